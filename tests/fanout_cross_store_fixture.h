// Children in another store (docs/decisions/0039-cross-store-children.md):
// a parent engine on one backend ("central") whose children live on another
// ("edge"), reached through a fail-Nth-call wrapper that can also be taken
// down, and the edge's own engine that runs the children. Parameterized by
// (parent backend, child backend): memory -> SQLite and SQLite -> Postgres
// (skipped without SLUICE_TEST_POSTGRES_URL).
#ifndef SLUICE_TESTS_FANOUT_CROSS_STORE_FIXTURE_H_
#define SLUICE_TESTS_FANOUT_CROSS_STORE_FIXTURE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "conformance/fail_nth_backend.h"
#include "conformance/harness.h"
#include "sluice/engine.h"
#include "sluice/errors.h"
#include "sluice/fan_out.h"

namespace sluice::testing {

// The parent engine's way to the child store: fails one chosen call
// (FailNthCall), every Begin while `down`, or every call of one method.
class EdgeLink : public FailNthCall {
 public:
  using FailNthCall::FailNthCall;
  void SetDown(bool down) { down_ = down; }
  // Fails every call of `method` ("" for none) until changed.
  void FailEvery(std::string method) { fail_method_ = std::move(method); }

 protected:
  absl::Status BeforeBegin() override {
    if (down_) return absl::UnavailableError("edge store unreachable");
    return FailNthCall::BeforeBegin();
  }
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    class Named : public ForwardingTransaction {
     public:
      Named(std::unique_ptr<Transaction> t, const std::string& method)
          : ForwardingTransaction(std::move(t)), method_(method) {}

     protected:
      absl::Status BeforeCall(std::string_view method) override {
        if (method_.empty() || method != method_) return absl::OkStatus();
        return absl::UnavailableError(
            absl::StrCat("injected failure of every ", method_));
      }

     private:
      const std::string& method_;
    };
    return std::make_unique<Named>(FailNthCall::Wrap(std::move(tx)),
                                   fail_method_);
  }

 private:
  bool down_ = false;
  std::string fail_method_;
};

using StorePair = std::pair<std::string, std::string>;

class CrossStore : public ::testing::TestWithParam<StorePair> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Builds both backends and engines afresh (for failure-point sweeps).
  void Open();

  // "child": {"n": n} -> {"doubled": 2n}; {"fail": why} fails for good.
  static Job ChildJob();
  // "parent": one "child" in store "edge" per element of "items";
  // "fail_fast" if set.
  static Job ParentJob();

  RunId StartParent(const Json& payload);
  // Claims and runs `job`'s handlers on `engine` until nothing is
  // claimable; errors tolerated. Returns the handler calls.
  int Drive(Engine& engine, const Job& job);
  // The children's handlers, through the edge engine.
  int DriveChildren() { return Drive(*edge_, child_); }
  int DriveParents() { return Drive(*central_, parent_); }
  // One sweep of each side's worker, after the clock moved past
  // report_stale_after and every lease.
  void Sweep();
  // Drives both sides until `run` ended and nothing is owed anywhere.
  bool RunToEnd(const RunId& run);

  RunView ParentView(const RunId& run);
  RunView ChildView(const RunId& child);
  TaskKey ParentTaskOf(const RunId& run);
  std::vector<ChildLinkRecord> LinksOf(const TaskKey& parent);
  int64_t ChildReportsAtEdge();
  std::vector<ChildReport> PeekEdgeReports();
  void AppendEdgeReports(std::vector<ChildReport> reports);
  // How many run-ended events the parent engine published for `run`.
  int TimesEnded(const RunId& run);

  static Json Items(std::initializer_list<int> ns);

  ManualClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::string temp_dir_;
  std::unique_ptr<TestDatabase> database_;
  std::unique_ptr<Backend> central_store_;
  std::unique_ptr<Backend> edge_store_;
  std::unique_ptr<EdgeLink> link_;
  std::unique_ptr<Engine> central_;  // the parents' engine, "central"
  std::unique_ptr<Engine> edge_;     // the edge's own engine
  std::vector<Event> ended_;
  Job child_ = ChildJob();
  Job parent_ = ParentJob();
  int opened_ = 0;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_FANOUT_CROSS_STORE_FIXTURE_H_
