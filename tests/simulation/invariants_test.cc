// The invariant checks can fail: a doctored record, a corrupting backend
// wrapper or a replayed report each makes the checker (or the simulator)
// name the rule that broke.
#include "simulation/invariants.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simulation/sim_backend.h"
#include "simulation/sim_flows.h"
#include "simulation/simulator.h"
#include "simulation/store_snapshot.h"
#include "sluice/backends.h"
#include "sluice/clock.h"
#include "sluice/engine.h"
#include "sluice/forwarding_backend.h"

namespace sluice::simulation {
namespace {

using ::testing::AnyOf;
using ::testing::Eq;

class CheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*OpenBackend("memory:"));
    EngineOptions options;
    options.clock = &clock_;
    engine_ = std::move(*Engine::Create(*store_, std::move(options)));
    for (const SimFlow& flow : flows_) {
      ASSERT_TRUE(engine_->Deploy(flow.flow).ok());
    }
  }

  RunId Start(std::string_view flow, std::string_view input) {
    absl::StatusOr<RunId> run =
        engine_->StartRun(flow, *ParseJson(input, "input"));
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *run : RunId();
  }

  // Runs every claimable task of every flow, with its real handler.
  void DriveAll() {
    for (int round = 0; round < 20; ++round) {
      bool any = false;
      for (const SimFlow& flow : flows_) {
        ClaimRequest request{
            flow.flow.shape().steps[0].queue_name, "w", {}, 100};
        request.served.AddFlow(flow.flow.shape());
        absl::StatusOr<std::vector<ClaimedTask>> claimed =
            engine_->Claim(request);
        ASSERT_TRUE(claimed.ok()) << claimed.status();
        std::vector<TaskResult> results;
        for (const ClaimedTask& t : *claimed) {
          TaskContext context(TaskContext::Info{}, CancelToken());
          results.push_back(
              {t.key, t.attempt,
               flow.flow.handler(t.key.step_index)(t.input, context)});
        }
        if (results.empty()) continue;
        any = true;
        absl::StatusOr<FinishOutcome> done = engine_->FinishTasks(results);
        ASSERT_TRUE(done.ok()) << done.status();
        ASSERT_TRUE(engine_->ApplyReports(done->report_ids).ok());
      }
      if (!any) return;
    }
  }

  // Writes straight to the store, behind the engine's back.
  void Doctor(const std::function<void(Transaction&)>& change) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = store_->Begin();
    ASSERT_TRUE(tx.ok());
    change(**tx);
    ASSERT_TRUE((*tx)->Commit().ok());
  }

  std::optional<std::string> Check() {
    absl::StatusOr<StoreSnapshot> store = ReadStore(*store_);
    EXPECT_TRUE(store.ok()) << store.status();
    std::optional<Violation> v = checker_.Check(*store, ReportLedger());
    if (!v) return std::nullopt;
    return v->invariant;
  }

  RunRecord RunOf(const RunId& id) {
    absl::StatusOr<RunView> view = engine_->GetRun(id);
    EXPECT_TRUE(view.ok());
    return view->run;
  }

  ManualClock clock_;
  std::unique_ptr<Backend> store_;
  std::unique_ptr<Engine> engine_;
  std::vector<SimFlow> flows_ = MakeSimFlows();
  InvariantChecker checker_{flows_, [](const RunId&) { return "r"; }};
};

TEST_F(CheckerTest, EngineDrivenStore_HasNoViolation) {
  Start("chain", R"({"n":4})");
  Start("diamond", R"({"n":2,"flag":true})");
  Start("diamond", R"({"n":2,"flag":false})");
  Start("fanout", R"({"n":7})");
  Start("batch", "[1,2,3]");
  EXPECT_EQ(Check(), std::nullopt);
  DriveAll();
  EXPECT_EQ(Check(), std::nullopt);
  absl::StatusOr<StoreSnapshot> store = ReadStore(*store_);
  EXPECT_EQ(checker_.CheckSettled(*store), std::nullopt);
}

TEST_F(CheckerTest, RunCounterOffByOne_IsReported) {
  RunId run = Start("chain", R"({"n":1})");
  Doctor([&](Transaction& tx) {
    RunCounterDelta delta{run, 1};
    ASSERT_TRUE(tx.AddRunRemainingSteps(std::span(&delta, 1)).ok());
  });
  EXPECT_EQ(Check(), "run-remaining-steps");
}

TEST_F(CheckerTest, StepTaskCounterOffByOne_IsReported) {
  RunId run = Start("chain", R"({"n":1})");
  Doctor([&](Transaction& tx) {
    StepCounterDelta delta{{run, 0}, 1, 0};
    ASSERT_TRUE(tx.AddStepCounters(std::span(&delta, 1)).ok());
  });
  EXPECT_EQ(Check(), "step-remaining-tasks");
}

TEST_F(CheckerTest, QueuedTaskOnCancelledRun_IsReported) {
  RunId run = Start("chain", R"({"n":1})");
  ASSERT_TRUE(engine_->CancelRun(run, CancelMode::kImmediate).ok());
  checker_.NoteCancelRequested(run);
  EXPECT_EQ(Check(), std::nullopt);
  Doctor([&](Transaction& tx) {
    TaskKey key{run, 0, 0};
    TaskRecord task = *(*tx.GetTasks(std::span(&key, 1), Fields::kAll))[0];
    TaskUpdate update{task, TaskStatus::kCancelled, task.attempts};
    update.task.status = TaskStatus::kQueued;
    ASSERT_TRUE(tx.UpdateTasks(std::span(&update, 1)).ok());
  });
  EXPECT_EQ(Check(), "active-task-on-ended-run");
}

TEST_F(CheckerTest, CancelledRunNobodyCancelled_IsReported) {
  RunId run = Start("chain", R"({"n":1})");
  ASSERT_TRUE(engine_->CancelRun(run, CancelMode::kImmediate).ok());
  EXPECT_EQ(Check(), "cancelled-run-not-requested");
}

TEST_F(CheckerTest, WrongRunOutput_IsReported) {
  RunId run = Start("chain", R"({"n":3})");
  DriveAll();
  ASSERT_EQ(RunOf(run).status, RunStatus::kCompleted);
  RunRecord record = RunOf(run);
  Doctor([&](Transaction& tx) {
    record.output = *ParseJson(R"({"shift":0})", "output");
    ASSERT_TRUE(tx.UpdateRuns(std::span(&record, 1)).ok());
  });
  EXPECT_EQ(Check(), "run-output");
}

TEST_F(CheckerTest, TaskOutputNotItsHandlers_IsReported) {
  RunId run = Start("fanout", R"({"n":5})");
  DriveAll();
  Doctor([&](Transaction& tx) {
    TaskKey key{run, 1, 0};  // square of 5
    TaskRecord task = *(*tx.GetTasks(std::span(&key, 1), Fields::kAll))[0];
    TaskUpdate update{task, TaskStatus::kCompleted, task.attempts};
    update.task.output = Json(24);
    ASSERT_TRUE(tx.UpdateTasks(std::span(&update, 1)).ok());
  });
  EXPECT_EQ(Check(), "task-output");
}

TEST_F(CheckerTest, StepOutputNotItsTasks_IsReported) {
  RunId run = Start("fanout", R"({"n":5})");
  // Claim and finish the first step only, so the run is still going.
  ClaimRequest request{"fanout", "w", {}, 1};
  request.served.AddFlow(flows_[2].flow.shape());
  absl::StatusOr<std::vector<ClaimedTask>> claimed = engine_->Claim(request);
  ASSERT_TRUE(claimed.ok() && claimed->size() == 1);
  absl::StatusOr<FinishOutcome> done =
      engine_->FinishTasks(std::vector<TaskResult>{
          {(*claimed)[0].key, 1, *ParseJson("[5]", "output")}});
  ASSERT_TRUE(done.ok());
  ASSERT_TRUE(engine_->ApplyReports(done->report_ids).ok());
  EXPECT_EQ(Check(), std::nullopt);
  Doctor([&](Transaction& tx) {
    std::vector<std::vector<StepStateRecord>> steps =
        *tx.GetStepStates(std::span(&run, 1), Fields::kAll);
    StepStateRecord expand = steps[0][0];
    expand.output = *ParseJson("[6]", "output");
    ASSERT_TRUE(tx.UpdateStepStates(std::span(&expand, 1)).ok());
  });
  EXPECT_EQ(Check(), "step-output");
}

TEST_F(CheckerTest, EndedRunThatChangesLater_IsReported) {
  RunId run = Start("chain", R"({"n":3})");
  DriveAll();
  EXPECT_EQ(Check(), std::nullopt);
  RunRecord record = RunOf(run);
  Doctor([&](Transaction& tx) {
    record.status = RunStatus::kFailed;
    record.error = "sim failure: doctored";
    ASSERT_TRUE(tx.UpdateRuns(std::span(&record, 1)).ok());
  });
  EXPECT_EQ(Check(), "ended-state-changed");
}

TEST_F(CheckerTest, RunDeletedWithoutPruning_IsReported) {
  RunId run = Start("chain", R"({"n":3})");
  EXPECT_EQ(Check(), std::nullopt);
  Doctor([&](Transaction& tx) {
    ASSERT_TRUE(tx.DeleteRuns(std::span(&run, 1)).ok());
  });
  EXPECT_EQ(Check(), "run-vanished");
}

TEST_F(CheckerTest, RunStillStartedAtTheEnd_IsReported) {
  Start("chain", R"({"n":3})");
  absl::StatusOr<StoreSnapshot> store = ReadStore(*store_);
  std::optional<Violation> v = checker_.CheckSettled(*store);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->invariant, "run-never-ended");
}

// Hands a report it took once out again on the next take, as a backend
// whose take forgot to delete would.
class ReplayingBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    class Tx : public ForwardingTransaction {
     public:
      Tx(std::unique_ptr<Transaction> t, ReplayingBackend& owner)
          : ForwardingTransaction(std::move(t)), owner_(owner) {}
      absl::StatusOr<std::vector<OutboxReport>> TakeReports(
          std::span<const int64_t> ids) override {
        absl::StatusOr<std::vector<OutboxReport>> taken =
            ForwardingTransaction::TakeReports(ids);
        if (!taken.ok()) return taken;
        if (owner_.replay_) taken->push_back(*owner_.replay_);
        if (!taken->empty()) owner_.replay_ = taken->front();
        return taken;
      }

     private:
      ReplayingBackend& owner_;
    };
    return std::make_unique<Tx>(std::move(tx), *this);
  }

 private:
  std::optional<OutboxReport> replay_;
};

TEST(ReportLedgerTest, ReportTakenByTwoCommits_IsReportedAsAppliedTwice) {
  std::unique_ptr<Backend> store = std::move(*OpenBackend("memory:"));
  ReplayingBackend replaying(*store);
  SimBackend backend(replaying, /*seed=*/1);
  std::vector<SimFlow> flows = MakeSimFlows();
  InvariantChecker checker(flows, [](const RunId&) { return "r"; });
  OutboxReport report{.task = TaskKey{RunId(1, 2), 0, 0},
                      .flow_slug = "chain",
                      .kind = ReportKind::kCompleted};
  int64_t id = 0;
  {
    auto tx = std::move(*backend.Begin());
    id = (*tx->AppendReports(std::span(&report, 1)))[0];
    ASSERT_TRUE(tx->Commit().ok());
  }
  for (int take = 0; take < 2; ++take) {
    auto tx = std::move(*backend.Begin());
    ASSERT_TRUE(tx->TakeReports(std::span(&id, 1)).ok());
    ASSERT_TRUE(tx->Commit().ok());
  }
  std::optional<Violation> v = checker.Check(StoreSnapshot(), backend.ledger());
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->invariant, "report-applied-twice");
}

// Adds one to every integer task output the engine reads back, so the
// outputs it aggregates into steps and runs are wrong.
class WrongOutputsBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    class Tx : public ForwardingTransaction {
     public:
      using ForwardingTransaction::ForwardingTransaction;
      absl::StatusOr<std::vector<StepOutputs>> GetTaskOutputs(
          std::span<const StepRef> steps) override {
        auto outputs = ForwardingTransaction::GetTaskOutputs(steps);
        if (!outputs.ok()) return outputs;
        for (auto& step : *outputs) {
          for (auto& output : step.outputs) {
            if (output && output->is_int64()) *output = output->as_int64() + 1;
          }
        }
        return outputs;
      }
    };
    return std::make_unique<Tx>(std::move(tx));
  }
};

// Drops every write that would cancel a task, claiming it applied.
class LostCancelsBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    class Tx : public ForwardingTransaction {
     public:
      using ForwardingTransaction::ForwardingTransaction;
      absl::StatusOr<std::vector<bool>> UpdateTasks(
          std::span<TaskUpdate> updates) override {
        std::vector<TaskUpdate> kept;
        std::vector<size_t> index;
        for (size_t i = 0; i < updates.size(); ++i) {
          if (updates[i].task.status == TaskStatus::kCancelled) continue;
          kept.push_back(updates[i]);
          index.push_back(i);
        }
        auto applied = ForwardingTransaction::UpdateTasks(kept);
        if (!applied.ok()) return applied;
        std::vector<bool> all(updates.size(), true);
        for (size_t k = 0; k < index.size(); ++k) all[index[k]] = (*applied)[k];
        return all;
      }
    };
    return std::make_unique<Tx>(std::move(tx));
  }
};

// The first violation the simulator finds within `seeds` seeds, if any.
template <typename Wrapper>
std::optional<std::string> FirstViolation(int seeds) {
  for (int seed = 1; seed <= seeds; ++seed) {
    SimOptions options;
    options.seed = seed;
    options.interpose = [](Backend& store) -> std::unique_ptr<Backend> {
      return std::make_unique<Wrapper>(store);
    };
    SimResult r = Simulate(options);
    if (r.violation) return r.violation->invariant;
  }
  return std::nullopt;
}

TEST(CorruptedBackendTest, WrongOutputs_AreCaught) {
  EXPECT_THAT(FirstViolation<WrongOutputsBackend>(10),
              AnyOf(Eq("step-output"), Eq("run-output")));
}

TEST(CorruptedBackendTest, LostCancellations_AreCaught) {
  EXPECT_EQ(FirstViolation<LostCancelsBackend>(10), "active-task-on-ended-run");
}

}  // namespace
}  // namespace sluice::simulation
