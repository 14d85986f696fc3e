// What a start and a finish do before their transactions begin (decision
// 0089): they plan their writes there, so that a backend which serializes
// writers (SQLite, memory) holds its lock only while they are written.
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "harness.h"
#include "sluice/forwarding_backend.h"

namespace sluice::testing {
namespace {

using ::testing::Each;
using ::testing::Eq;
using ::testing::IsEmpty;
using ::testing::Not;

// Counts the transactions open on the backend it wraps.
class OpenTransactions : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  int open() const { return open_.load(); }

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    return std::make_unique<Counted>(std::move(tx), open_);
  }

 private:
  class Counted : public ForwardingTransaction {
   public:
    Counted(std::unique_ptr<Transaction> tx, std::atomic<int>& open)
        : ForwardingTransaction(std::move(tx)), open_(open) {
      ++open_;
    }
    ~Counted() override { --open_; }

   private:
    std::atomic<int>& open_;
  };

  std::atomic<int> open_{0};
};

// A clock that notes, at each reading, how many transactions were open.
class NotingClock : public Clock {
 public:
  NotingClock(const Clock& time, const OpenTransactions& backend)
      : time_(time), backend_(backend) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    noted_.push_back(backend_.open());
    return time_.Now();
  }
  std::vector<int> Take() {
    absl::MutexLock lock(&mu_);
    return std::exchange(noted_, {});
  }

 private:
  const Clock& time_;
  const OpenTransactions& backend_;
  mutable absl::Mutex mu_;
  mutable std::vector<int> noted_ ABSL_GUARDED_BY(mu_);
};

class CriticalSection : public Conformance {
 protected:
  void TearDown() override {
    // A skipped case (no Postgres) has no backend to go back to.
    if (!IsSkipped()) UseEngine(backend(), DefaultOptions());
    Conformance::TearDown();
  }

  // The engine from here on reads the time through noting().
  void UseNotingEngine() {
    counted_ = std::make_unique<OpenTransactions>(backend());
    noting_ = std::make_unique<NotingClock>(clock(), *counted_);
    EngineOptions options = DefaultOptions();
    options.clock = noting_.get();
    UseEngine(*counted_, std::move(options));
  }
  NotingClock& noting() { return *noting_; }

  static Flow OneStep(std::string slug) {
    Flow flow(std::move(slug));
    flow.Step("work", Echo());
    return flow;
  }

 private:
  std::unique_ptr<OpenTransactions> counted_;
  std::unique_ptr<NotingClock> noting_;
};

TEST_P(CriticalSection, StartOfAKnownFlow_ReadsTheTimeOutsideItsTransaction) {
  Flow flow = OneStep("known");
  Deploy(flow);
  UseNotingEngine();
  // The first start resolves the alias in its transaction; a later one
  // knows it and finds the flow compiled.
  ASSERT_TRUE(engine().StartRun("known", J(R"({"n":1})")).ok());
  noting().Take();
  absl::StatusOr<RunId> second = engine().StartRun("known", J(R"({"n":2})"));
  ASSERT_TRUE(second.ok()) << second.status();
  std::vector<int> noted = noting().Take();
  EXPECT_THAT(noted, Not(IsEmpty()));
  EXPECT_THAT(noted, Each(Eq(0)));
  RunView view = View(*second);
  EXPECT_EQ(view.run.status, RunStatus::kStarted);
  EXPECT_EQ(view.run.started_at, clock().Now());
  ASSERT_EQ(view.tasks.size(), 1u);
  EXPECT_EQ(view.tasks[0].status, TaskStatus::kQueued);
  EXPECT_EQ(SerializeJson(view.tasks[0].input), R"({"run":{"n":2}})");
}

TEST_P(CriticalSection, FinishWithTheClaimsRecords_ReadsTheTimeOutsideIt) {
  Flow flow = OneStep("finished");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 1u);
  UseNotingEngine();
  clock().Advance(absl::Seconds(3));
  std::vector<TaskResult> results{WithRecord(claimed[0], StepResult(J("7")))};
  absl::StatusOr<FinishOutcome> outcome =
      engine().FinishTasks(results, {.apply_completions = true});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  std::vector<int> noted = noting().Take();
  ASSERT_THAT(noted, Not(IsEmpty()));
  EXPECT_EQ(noted.front(), 0);
  EXPECT_THAT(outcome->dispositions,
              ::testing::ElementsAre(ResultDisposition::kCompleted));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  ASSERT_EQ(view.tasks.size(), 1u);
  EXPECT_EQ(view.tasks[0].finished_at, clock().Now());
  EXPECT_EQ(SerializeJson(*view.tasks[0].output), "7");
}

TEST_P(CriticalSection, EnqueueManyWithoutKeys_ReadsTheTimeOutsideIt) {
  Job job("plain", [](const Json& payload, TaskContext&) { return payload; });
  ASSERT_TRUE(engine().Deploy(job).ok());
  UseNotingEngine();
  std::vector<Engine::EnqueueItem> items{{J(R"({"n":1})"), {.priority = 1}},
                                         {J(R"({"n":2})"), {.priority = 5}}};
  // The first call resolves the job's name in its transaction.
  ASSERT_TRUE(engine().EnqueueMany("plain", items).ok());
  noting().Take();
  absl::StatusOr<std::vector<EnqueueResult>> second =
      engine().EnqueueMany("plain", items);
  ASSERT_TRUE(second.ok()) << second.status();
  std::vector<int> noted = noting().Take();
  EXPECT_THAT(noted, Not(IsEmpty()));
  EXPECT_THAT(noted, Each(Eq(0)));
  // Claimed by priority, as from items planned in the transaction.
  std::vector<std::string> claimed;
  for (const ClaimedTask& task : Claim(job.flow(), 2)) {
    claimed.push_back(SerializeJson(task.input));
  }
  EXPECT_THAT(claimed, ::testing::ElementsAre(R"({"run":{"n":2}})",
                                              R"({"run":{"n":2}})"));
  for (const EnqueueResult& result : *second) {
    EXPECT_FALSE(result.duplicate);
    EXPECT_EQ(View(result.run_id).run.started_at, clock().Now());
  }
}

SLUICE_CONFORMANCE_SUITE(CriticalSection);

}  // namespace
}  // namespace sluice::testing
