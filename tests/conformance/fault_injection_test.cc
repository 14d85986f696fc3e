// The task path under a backend that fails its Nth call, for every N the
// script reaches: each failure surfaces as an error, leaves the stored state
// exactly as it was before the failed call, and a retry then succeeds; the
// final state equals a fault-free run's.
#include <functional>

#include "absl/strings/str_cat.h"
#include "boost/json/serialize.hpp"
#include "fail_nth_backend.h"
#include "harness.h"
#include "sluice/errors.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class FaultInjection : public Conformance {
 protected:
  // Everything stored, as text: runs, step states, tasks, their messages,
  // pending reports. Read straight from the real backend.
  std::string Snapshot(bool with_ids) {
    std::string out;
    auto tx = backend().Begin();
    EXPECT_TRUE(tx.ok());
    if (!tx.ok()) return out;
    auto runs = (*tx)->ListRuns(RunQuery::OfFlow("", 1000), Fields::kAll);
    EXPECT_TRUE(runs.ok());
    std::vector<std::string> per_run;
    for (const RunRecord& r : *runs) {
      std::string s = absl::StrCat(
          "run input=", boost::json::serialize(r.input),
          " status=", std::string(ToString(r.status)),
          " remaining=", r.remaining_steps,
          " output=", r.output ? boost::json::serialize(*r.output) : "-",
          " error=", r.error, "\n");
      if (with_ids) absl::StrAppend(&s, "id=", r.run_id.ToString(), "\n");
      auto steps = (*tx)->GetStepStates(std::span(&r.run_id, 1), Fields::kAll);
      EXPECT_TRUE(steps.ok());
      for (const StepStateRecord& st : (*steps)[0]) {
        absl::StrAppend(
            &s, " step ", st.step_slug, " ", std::string(ToString(st.status)),
            " deps=", st.remaining_deps,
            " tasks=", st.remaining_tasks.value_or(-1),
            " initial=", st.initial_tasks.value_or(-1),
            " output=", st.output ? boost::json::serialize(*st.output) : "-",
            "\n");
      }
      auto tasks = (*tx)->ListTasks(r.run_id);
      EXPECT_TRUE(tasks.ok());
      for (const TaskRecord& t : *tasks) {
        absl::StrAppend(&s, " task ", t.key.step_index, "/", t.key.task_index,
                        " ", std::string(ToString(t.status)), " output=",
                        t.output ? boost::json::serialize(*t.output) : "-");
        if (with_ids) {
          // Which task a claim picks depends on random run ids, so retry
          // history is compared only within one iteration.
          absl::StrAppend(&s, " attempts=", t.attempts,
                          " requeued=", t.requeued_count, " error=", t.error);
        }
        auto where = (*tx)->LookupMessage(t.queue_name, t.message_id);
        EXPECT_TRUE(where.ok());
        if (where.ok() && where->has_value()) {
          absl::StrAppend(&s, " archived=", (*where)->archived);
          if (with_ids) {
            absl::StrAppend(
                &s, " visible=", absl::FormatTime((*where)->message.visible_at),
                " msg=", t.message_id, " reads=", (*where)->message.read_count);
          }
        }
        absl::StrAppend(&s, "\n");
      }
      per_run.push_back(s);
    }
    std::sort(per_run.begin(), per_run.end());  // run ids are random
    for (const std::string& s : per_run) out += s;
    auto reports = (*tx)->CountReports();
    EXPECT_TRUE(reports.ok());
    absl::StrAppend(&out, "reports=", *reports, "\n");
    return out;
  }

  // The script: a sequence of engine calls, each one transaction, that
  // walks flows through claims, completions, retries, failures, skips,
  // stalls, the sweeper and cancellation.
  std::vector<std::function<absl::Status()>> Script() {
    auto claimed = std::make_shared<std::vector<ClaimedTask>>();
    auto reports = std::make_shared<std::vector<int64_t>>();
    auto claim = [this, claimed](const Flow* flow, int limit) {
      return [this, claimed, flow, limit]() -> absl::Status {
        ClaimRequest request{flow->shape().steps[0].queue_name, "w", {}, limit};
        request.served.AddFlow(flow->shape());
        absl::StatusOr<std::vector<ClaimedTask>> got = engine().Claim(request);
        if (!got.ok()) return got.status();
        *claimed = std::move(*got);
        return absl::OkStatus();
      };
    };
    // Finishes the claimed tasks: element 2's first attempt fails
    // (retryable), element 13 fails for good, roots return [1,2,3], the rest
    // echo their input. Decided by content, not order, so every iteration
    // ends alike.
    auto finish = [this, claimed, reports]() -> absl::Status {
      std::vector<TaskResult> results;
      for (const ClaimedTask& t : *claimed) {
        absl::StatusOr<Json> outcome = t.input;
        bool is_int = t.input.is_int64();
        if (is_int && t.input.as_int64() == 13) {
          outcome = NonRetryable("unlucky");
        } else if (is_int && t.input.as_int64() == 2 && t.attempt == 1) {
          outcome = absl::UnavailableError("flaky");
        } else if (t.step_slug == "root") {
          outcome = J("[1,2,3]");
        }
        results.push_back({t.key, t.attempt, std::move(outcome)});
      }
      absl::StatusOr<FinishOutcome> done = engine().FinishTasks(results);
      if (!done.ok()) return done.status();
      *reports = done->report_ids;
      return absl::OkStatus();
    };
    auto apply = [this, reports]() { return engine().ApplyReports(*reports); };
    auto advance = [this](absl::Duration d) {
      return [this, d]() {
        clock().Advance(d);
        return absl::OkStatus();
      };
    };
    auto lease = [this, claimed]() -> absl::Status {
      std::vector<Lease> leases;
      for (const ClaimedTask& t : *claimed)
        leases.push_back({t.key, t.attempt});
      return engine().ExtendLeases(leases).status();
    };
    std::vector<std::function<absl::Status()>> ops = {
        [this] { return engine().Deploy(pipeline_).status(); },
        [this] { return engine().Deploy(guarded_).status(); },
        [this] {
          std::vector<Json> inputs = {J("{\"n\":1}"), J("{\"n\":2}")};
          return engine().StartRuns("pipeline", inputs).status();
        },
        [this] {
          std::vector<Json> inputs = {J("[13,14]"), J("[15]")};
          return engine().StartRuns("guarded", inputs).status();
        },
    };
    for (int round = 0; round < 4; ++round) {
      ops.push_back(claim(&pipeline_, 2));
      ops.push_back(lease);
      ops.push_back(finish);
      ops.push_back(apply);
      ops.push_back(claim(&guarded_, 2));
      ops.push_back(finish);
      ops.push_back(apply);
      ops.push_back(advance(absl::Seconds(1)));
    }
    // A claimed task whose worker dies: the sweeper takes it back.
    ops.push_back(claim(&pipeline_, 1));
    ops.push_back([this] { return engine().FinishTasks({}).status(); });
    ops.push_back(advance(absl::Minutes(5)));
    ops.push_back(
        [this] { return engine().RecoverStalledTasks(100).status(); });
    ops.push_back([this] { return engine().ApplyStaleReports(100).status(); });
    for (int round = 0; round < 3; ++round) {
      ops.push_back(claim(&pipeline_, 10));
      ops.push_back(finish);
      ops.push_back(advance(absl::Minutes(1)));
      ops.push_back(
          [this] { return engine().ApplyStaleReports(100).status(); });
    }
    ops.push_back([this] {
      return engine().StartRun("pipeline", J("{\"n\":3}")).status();
    });
    ops.push_back([this] {
      absl::StatusOr<std::vector<RunRecord>> runs =
          engine().ListRuns("pipeline", 10);
      if (!runs.ok()) return runs.status();
      for (const RunRecord& r : *runs) {
        if (r.status == RunStatus::kStarted)
          return engine().CancelRun(r.run_id, CancelMode::kImmediate);
      }
      return absl::OkStatus();
    });
    return ops;
  }

  // Runs the script failing call `fail_at` (0: never). Returns false once
  // `fail_at` is past the script's last call.
  bool RunScript(int fail_at, std::string* final_state) {
    FailNthCall injector(backend());
    UseEngine(injector, DefaultOptions());
    injector.FailAt(fail_at);
    for (auto& op : Script()) {
      std::string before = Snapshot(true);
      absl::Status status = op();
      if (status.ok()) continue;
      EXPECT_TRUE(injector.failed()) << status;
      EXPECT_THAT(std::string(status.message()), HasSubstr("injected failure"));
      EXPECT_EQ(Snapshot(true), before)
          << "half-applied at call " << fail_at << ": " << status;
      injector.FailAt(0);
      absl::Status retried = op();
      EXPECT_TRUE(retried.ok()) << retried;
    }
    *final_state = Snapshot(false);
    return injector.calls() >= fail_at;
  }

  Flow pipeline_ = [] {
    Flow flow("pipeline", {.max_attempts = 3,
                           .base_delay = absl::ZeroDuration(),
                           .timeout = absl::Seconds(10)});
    flow.Step("root", Echo())
        .Map("each", {.depends_on = {"root"}}, Echo())
        .Step("reduce", {.depends_on = {"each"}}, Echo());
    return flow;
  }();
  Flow guarded_ = [] {
    Flow flow("guarded",
              {.max_attempts = 2, .base_delay = absl::ZeroDuration()});
    flow.Map("each", {.when_exhausted = Policy::kSkip}, Echo())
        .Step("after",
              {.depends_on = {"each"}, .if_not_pattern = J(R"({"run":[15]})")},
              Echo());
    return flow;
  }();
};

TEST_P(FaultInjection,
       EveryFailedCall_SurfacesAndLeavesNoHalfAppliedTransition) {
  std::string expected;
  ASSERT_TRUE(RunScript(0, &expected));
  ASSERT_THAT(expected, HasSubstr("completed"));
  int iterations = 0;
  for (int n = 1;; ++n) {
    ResetBackend();
    std::string state;
    bool reached = RunScript(n, &state);
    if (!reached) break;
    ++iterations;
    EXPECT_EQ(state, expected)
        << "final state differs when call " << n << " failed";
    if (HasFailure()) break;
  }
  EXPECT_GT(iterations, 100);
}

SLUICE_CONFORMANCE_SUITE(FaultInjection);

}  // namespace
}  // namespace sluice::testing
