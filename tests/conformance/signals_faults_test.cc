// Signals and wait timeouts under a backend that fails its Nth call, for
// every N the operation reaches: a failure before commit changes nothing
// and a retry delivers; a failure after it (the push path) leaves a report
// the sweeper applies. Either way the run ends as a fault-free one does.
#include <memory>

#include "absl/strings/str_cat.h"
#include "fail_nth_backend.h"
#include "signals_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;

class SignalFaults : public Signals {
 protected:
  // A fresh store (after the first round) with the engine over a
  // FailNthCall wrapper, and a run of `flow` parked on its wait.
  RunId Prepare(int round, const Flow& flow) {
    if (round > 1) ResetBackend();
    auto faulty = std::make_unique<FailNthCall>(backend());
    UseEngine(*faulty);
    faulty_ = std::move(faulty);
    Deploy(flow);
    RunId run = Start(flow, J("{}"));
    EXPECT_EQ(Drive(flow), 1);  // ask
    return run;
  }
  // The sweeper's pass: applies any report the push path left.
  void Sweep() {
    clock().Advance(engine().options().report_stale_after + absl::Seconds(1));
    absl::StatusOr<int> applied = engine().ApplyStaleReports(100);
    EXPECT_TRUE(applied.ok()) << applied.status();
  }

  std::unique_ptr<FailNthCall> faulty_;
};

TEST_P(SignalFaults, Signal_FailingEachCall_DeliversExactlyOnce) {
  Flow flow = Approval("faulty_signal");
  for (int n = 1; n < 100; ++n) {
    SCOPED_TRACE(StrCat("failing call ", n, " of Signal"));
    RunId run = Prepare(n, flow);
    faulty_->FailIn(n);
    absl::StatusOr<SignalOutcome> first = Send(run, "approve", J("\"yes\""));
    bool injected = faulty_->failed();
    faulty_->Disarm();
    if (!first.ok()) {
      EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
      EXPECT_EQ(TaskOf(run, "approve").status, TaskStatus::kQueued);
      EXPECT_EQ(PendingReports(), 0);
      ExpectSignal(run, "approve", J("\"yes\""), SignalOutcome::kDelivered);
    } else {
      EXPECT_EQ(*first, SignalOutcome::kDelivered);
      ExpectSignal(run, "approve", J("\"no\""),
                   SignalOutcome::kAlreadySignalled);
    }
    Sweep();
    EXPECT_EQ(Drive(flow), 1);  // finish
    RunView view = View(run);
    EXPECT_EQ(view.run.status, RunStatus::kCompleted);
    EXPECT_EQ(*view.run.output,
              J("{\"finish\":{\"run\":{},\"approve\":\"yes\"}}"));
    EXPECT_THAT(Ledger(run), ElementsAre("ask:completed@1 by test-worker",
                                         "approve:completed@1 by signal",
                                         "finish:completed@1 by test-worker"));
    if (!injected || HasFailure()) break;  // past the last call, or broken
  }
}

TEST_P(SignalFaults, Timeout_FailingEachCallOfTheClaim_AppliesItOnce) {
  Flow flow = Approval("faulty_timeout",
                       {.timeout = absl::Minutes(1),
                        .on_timeout = WaitTimeoutPolicy::kComplete,
                        .timeout_output = J("\"late\"")},
                       {.depends_on = {"ask"}});
  ClaimRequest request;
  request.queue = "faulty_timeout";
  request.worker_id = "w";
  request.served.AddFlow(flow.shape());
  for (int n = 1; n < 100; ++n) {
    SCOPED_TRACE(StrCat("failing call ", n, " of Claim"));
    RunId run = Prepare(n, flow);
    clock().Advance(absl::Minutes(1));
    faulty_->FailIn(n);
    absl::StatusOr<std::vector<ClaimedTask>> first = engine().Claim(request);
    bool injected = faulty_->failed();
    faulty_->Disarm();
    if (!first.ok()) {
      EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
      EXPECT_EQ(TaskOf(run, "approve").status, TaskStatus::kQueued);
      absl::StatusOr<std::vector<ClaimedTask>> again = engine().Claim(request);
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_TRUE(again->empty());
    } else {
      EXPECT_TRUE(first->empty());
    }
    Sweep();
    EXPECT_EQ(Drive(flow), 1);  // finish
    RunView view = View(run);
    EXPECT_EQ(view.run.status, RunStatus::kCompleted);
    EXPECT_EQ(StepOf(view, "approve").output, J("\"late\""));
    EXPECT_THAT(Ledger(run), ElementsAre("ask:completed@1 by test-worker",
                                         "approve:completed@1 by w",
                                         "finish:completed@1 by test-worker"));
    if (!injected || HasFailure()) break;
  }
}

SLUICE_CONFORMANCE_SUITE(SignalFaults);

}  // namespace
}  // namespace sluice::testing
