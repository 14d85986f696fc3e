// Children in another store (docs/decisions/0039-cross-store-children.md):
// a parent engine on one backend ("central") whose children live on another
// ("edge"), reached through a fail-Nth-call wrapper that can also be taken
// down, and the edge's own engine that runs the children. Parameterized by
// (parent backend, child backend): memory -> SQLite and SQLite -> Postgres
// (skipped without SLUICE_TEST_POSTGRES_URL).
#ifndef SLUICE_TESTS_FANOUT_CROSS_STORE_FIXTURE_H_
#define SLUICE_TESTS_FANOUT_CROSS_STORE_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "conformance/fail_nth_backend.h"
#include "conformance/harness.h"
#include "sluice/engine.h"
#include "sluice/errors.h"
#include "sluice/fan_out.h"
#include "support/drive_job.h"

namespace sluice::testing {

// The parent engine's way to the child store: fails one chosen call
// (FailNthCall), every Begin while `down`, or every call of one method.
class EdgeLink : public FailNthCall {
 public:
  using FailNthCall::FailNthCall;
  void SetDown(bool down) { down_ = down; }
  // Fails every call of `method` ("" for none) until changed.
  void FailEvery(std::string method) { fail_method_ = std::move(method); }
  // Runs `hook` once, in the calling thread, just before the `n`-th Begin
  // from now reaches the child store (or is refused while down): a point
  // between two steps of the engine, to put another call there.
  void AtBegin(int n, std::function<void()> hook) {
    hook_at_ = begins_ + n;
    hook_ = std::move(hook);
  }

 protected:
  absl::Status BeforeBegin() override {
    if (++begins_ == hook_at_ && hook_) {
      std::function<void()> hook = std::move(hook_);
      hook_ = nullptr;  // its own Begins count on, without calling it again
      hook();
    }
    if (down_) return absl::UnavailableError("edge store unreachable");
    return FailNthCall::BeforeBegin();
  }
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    return std::make_unique<FailEveryCallOf>(FailNthCall::Wrap(std::move(tx)),
                                             &fail_method_);
  }

 private:
  bool down_ = false;
  std::string fail_method_;
  int begins_ = 0;
  int hook_at_ = 0;
  std::function<void()> hook_;
};

using StorePair = std::pair<std::string, std::string>;

class CrossStore : public ::testing::TestWithParam<StorePair> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Builds both backends and engines afresh (for failure-point sweeps).
  void Open();
  // Drops both engines and backends (and the Postgres database).
  void CloseStores();

  // "child": {"n": n} -> {"doubled": 2n}; {"fail": why} fails for good.
  static Job ChildJob();
  // "parent": one "child" in store "edge" per element of "items";
  // "fail_fast" if set.
  static Job ParentJob();

  RunId StartParent(const Json& payload);
  // The children's handlers, through the edge engine, and the parents',
  // until nothing is claimable; errors tolerated. Return the handler calls.
  int DriveChildren() { return DriveJob(*edge_, child_); }
  int DriveParents() { return DriveJob(*central_, parent_); }
  // One sweep of each side's worker, after the clock moved past
  // report_stale_after and every lease.
  void Sweep();
  // Drives both sides until `run` ended and nothing is owed anywhere.
  bool RunToEnd(const RunId& run);
  // The end state of a parent that ended: no child left to run, after one
  // more relay pass no report left at the edge, one run-ended event, and
  // every link settled with no cancel owed.
  void ExpectSettledOnce(const RunId& run);

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
