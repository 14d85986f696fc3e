// Shared pieces of the fan-out conformance tests (fanout_*_test.cc).
#ifndef SLUICE_TESTS_CONFORMANCE_FANOUT_FIXTURE_H_
#define SLUICE_TESTS_CONFORMANCE_FANOUT_FIXTURE_H_

#include <string>
#include <vector>

#include "jobs_fixture.h"
#include "sluice/errors.h"
#include "sluice/fan_out.h"

namespace sluice::testing {

class FanOutConformance : public JobsConformance {
 protected:
  // "child": {"n": n} -> {"doubled": 2n}; {"fail": "why"} fails for good.
  static Job ChildJob() {
    return Job("child", {.queue = "kids"},
               [](const Json& p, TaskContext&) -> absl::StatusOr<StepResult> {
                 const boost::json::object& o = p.as_object();
                 if (const Json* why = o.if_contains("fail")) {
                   return NonRetryable(std::string(why->as_string()));
                 }
                 return Json(boost::json::object{
                     {"doubled", 2 * o.at("n").as_int64()}});
               });
  }
  // "parent": one `child_name` child per element of payload "items"
  // (each {"payload": ..., "priority": p?}); "fail_fast" if set.
  // Each job has a queue of its own, so a claim for one never meets
  // another's messages.
  static Job ParentJob(std::string name = "parent",
                       std::string child_name = "child") {
    std::string queue = name;
    return Job(std::move(name), {.queue = std::move(queue), .max_attempts = 3},
               [child_name](const Json& p,
                            TaskContext&) -> absl::StatusOr<StepResult> {
                 const boost::json::object& o = p.as_object();
                 FanOut out;
                 if (const Json* ff = o.if_contains("fail_fast")) {
                   out.fail_fast = ff->as_bool();
                 }
                 for (const Json& item : o.at("items").as_array()) {
                   ChildSpec spec{.name = child_name, .payload = item};
                   if (const Json* n = o.if_contains("child")) {
                     spec.name = std::string(n->as_string());
                   }
                   out.children.push_back(std::move(spec));
                 }
                 return out;
               });
  }
  // "nest": {"depth": d} fans out one "nest" child with d - 1 while d > 0.
  static Job NestJob() {
    return Job("nest", {.queue = "nest"},
               [](const Json& p, TaskContext&) -> absl::StatusOr<StepResult> {
                 int64_t d = p.as_object().at("depth").as_int64();
                 if (d == 0) return Json("leaf");
                 FanOut out;
                 out.children.push_back(
                     {.name = "nest",
                      .payload = boost::json::object{{"depth", d - 1}}});
                 return out;
               });
  }

  void SetUp() override {
    JobsConformance::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;  // no backend to deploy to
    DeployJob(child_);
    DeployJob(parent_);
  }

  // Claims and runs every job's handlers until nothing is claimable.
  int DriveAll(const std::vector<const Job*>& jobs) {
    int total = 0;
    for (int round = 0; round < 100; ++round) {
      int calls = 0;
      for (const Job* job : jobs) calls += Drive(job->flow());
      total += calls;
      if (calls == 0) break;
    }
    return total;
  }
  int DriveAll() { return DriveAll({&parent_, &child_}); }

  RunId StartParent(const Json& payload) {
    return Enqueue(parent_, payload).run_id;
  }
  // The parent job's task of `run` (step "job").
  TaskRecord ParentTask(const RunId& run) { return TaskOf(run, "job"); }
  // The "job" output of a completed job run.
  Json JobOutput(const RunId& run) {
    RunView view = View(run);
    EXPECT_EQ(view.run.status, RunStatus::kCompleted) << view.run.error;
    const Json output = view.run.output.value_or(Json());
    if (!output.is_object()) return Json();
    const Json* job = output.as_object().if_contains("job");
    return job != nullptr ? *job : Json();
  }
  int64_t ChildReports() {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return -1;
    absl::StatusOr<int64_t> n = (*tx)->CountChildReports();
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : -1;
  }
  std::vector<ChildLinkRecord> LinksOf(const TaskKey& parent) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return {};
    absl::StatusOr<std::vector<ChildLinkRecord>> links =
        (*tx)->GetChildLinks(parent, Fields::kAll);
    EXPECT_TRUE(links.ok()) << links.status();
    return links.ok() ? std::move(*links) : std::vector<ChildLinkRecord>();
  }
  static Json Items(std::initializer_list<int> ns) {
    boost::json::array items;
    for (int n : ns) items.push_back(boost::json::object{{"n", n}});
    return Json(std::move(items));
  }

  Job child_ = ChildJob();
  Job parent_ = ParentJob();
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CONFORMANCE_FANOUT_FIXTURE_H_
