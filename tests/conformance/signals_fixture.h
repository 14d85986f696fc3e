// Shared helpers of the signal scenarios (signals_*_test.cc): Wait steps,
// Engine::Signal and wait timeouts (docs/decisions/0030-signals.md).
#ifndef SLUICE_TESTS_CONFORMANCE_SIGNALS_FIXTURE_H_
#define SLUICE_TESTS_CONFORMANCE_SIGNALS_FIXTURE_H_

#include <string>
#include <vector>

#include "harness.h"
#include "sluice/internal/strings.h"

namespace sluice::testing {

class Signals : public Conformance {
 protected:
  // ask -> approve (Wait) -> finish: `ask` returns "asked", `finish` echoes
  // its input.
  static Flow Approval(std::string slug, WaitSpec wait = {},
                       StepSpec wait_spec = {.depends_on = {"ask"}}) {
    Flow flow(std::move(slug));
    flow.Step("ask", Returns(Json("asked")))
        .Wait("approve", std::move(wait_spec), std::move(wait))
        .Step("finish", {.depends_on = {"approve"}}, Echo());
    return flow;
  }

  absl::StatusOr<SignalOutcome> Send(const RunId& run, std::string_view step,
                                     const Json& payload) {
    return engine().Signal(run, step, payload);
  }

  // Signals and expects `want`.
  void ExpectSignal(const RunId& run, std::string_view step,
                    const Json& payload, SignalOutcome want) {
    absl::StatusOr<SignalOutcome> got = Send(run, step, payload);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want) << ToString(*got);
  }

  // The run's ledger as "step:outcome@attempt by worker".
  std::vector<std::string> Ledger(const RunId& run) {
    RunView view = View(run);
    std::vector<std::string> out;
    for (const AttemptRecord& a : view.attempts) {
      out.push_back(StrCat(view.steps[a.task.step_index].step_slug, ":",
                           ToString(a.outcome), "@", a.attempt, " by ",
                           a.worker_id.empty() ? "signal" : a.worker_id));
    }
    return out;
  }

  QueueCounts CountsOf(std::string_view queue) {
    absl::StatusOr<QueueState> state = engine().Counts(queue);
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() ? state->counts : QueueCounts();
  }

  // Whether `status` has `code` and its message contains `text`.
  static ::testing::AssertionResult Refused(const absl::Status& status,
                                            absl::StatusCode code,
                                            std::string_view text) {
    std::string message(status.message());
    if (status.code() == code && message.find(text) != std::string::npos) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "got " << status << "; want code "
           << absl::StatusCodeToString(code) << " with \"" << text << "\"";
  }
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CONFORMANCE_SIGNALS_FIXTURE_H_
