// Flows shared by the test processes and the tests that spawn them, so both
// sides deploy the same shape.
#ifndef SLUICE_TESTS_SUPPORT_TEST_FLOWS_H_
#define SLUICE_TESTS_SUPPORT_TEST_FLOWS_H_

#include <functional>

#include "sluice/flow.h"
#include "sluice/job.h"

namespace sluice::testing {

// ProcJob's lease: a claim's time is a handler's deadline minus this.
inline constexpr absl::Duration kProcJobTimeout = absl::Seconds(2);

// "crashy": map over the run input (integers), then sum. The map handler is
// given by the caller so a process can hang on one element.
inline Flow CrashyFlow(Handler each) {
  Flow flow("crashy", {.max_attempts = 3,
                       .base_delay = absl::ZeroDuration(),
                       .timeout = absl::Seconds(5)});
  flow.Map("each", std::move(each))
      .Step("sum", {.depends_on = {"each"}},
            [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
              int64_t total = 0;
              for (const Json& v : in.at("each").as_array()) {
                total += v.as_int64();
              }
              return total;
            });
  return flow;
}

// "shared": a one-step job that returns its input.
inline Flow SharedFlow(Handler job) {
  Flow flow("shared", {.timeout = absl::Seconds(60)});
  flow.Step("job", std::move(job));
  return flow;
}

// "fleet": a one-step job with a short timeout, so stall recovery takes a
// dead worker's tasks back within seconds.
inline Flow FleetFlow(Handler job) {
  Flow flow("fleet", {.max_attempts = 3,
                      .base_delay = absl::ZeroDuration(),
                      .timeout = absl::Seconds(2)});
  flow.Step("job", std::move(job));
  return flow;
}

// "proc_job" on queue "proc": a job with a short timeout and no retry
// delay, for the jobs process test.
inline Job ProcJob(Handler handler) {
  return Job(
      "proc_job",
      {.queue = "proc",
       .max_attempts = 3,
       .backoff = {.kind = BackoffKind::kFixed, .delay = absl::ZeroDuration()},
       .timeout = kProcJobTimeout},
      std::move(handler));
}

// Two versions of the alias "rollout" with different shapes, for the
// rollout process test. "rollout_v1": one step "work". "rollout_v2": "work"
// then "finish". Each handler returns {"v": VERSION, "n": the input's n},
// so a run's output names the version that ran it: {"work": {...}} for v1,
// {"finish": {...}} for v2.
inline Flow RolloutV1(Handler work) {
  Flow flow("rollout_v1",
            {.base_delay = absl::ZeroDuration(), .timeout = absl::Seconds(10)});
  flow.Alias("rollout").Step("work", std::move(work));
  return flow;
}
inline Flow RolloutV2(Handler work, Handler finish) {
  Flow flow("rollout_v2",
            {.base_delay = absl::ZeroDuration(), .timeout = absl::Seconds(10)});
  flow.Alias("rollout")
      .Step("work", std::move(work))
      .Step("finish", {.depends_on = {"work"}}, std::move(finish));
  return flow;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_TEST_FLOWS_H_
