// A host process that dies between enqueuing in its transaction and
// committing it: a child process (this binary, re-run as HostChild.Run)
// begins a transaction, writes its own row, enqueues a job through it, says
// so, and is SIGKILLed, before or after its COMMIT. Before: nothing of the
// run, its message or the host's row exists, and the database is usable.
// After: the run exists and a worker completes it.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "host_transaction_fixture.h"
#include "support/child_process.h"

namespace sluice::testing {
namespace {

constexpr char kKindVariable[] = "SLUICE_HOST_CHILD_KIND";
constexpr char kLocationVariable[] = "SLUICE_HOST_CHILD_LOCATION";
constexpr char kCommitVariable[] = "SLUICE_HOST_CHILD_COMMIT";

// The child's body: prints "enqueued" (and "committed"), then waits to be
// killed. Skipped unless the parent set the variables.
TEST(HostChild, Run) {
  const char* kind = getenv(kKindVariable);
  const char* location = getenv(kLocationVariable);
  if (kind == nullptr || location == nullptr) GTEST_SKIP() << "child only";
  const bool commit = getenv(kCommitVariable) != nullptr;
  std::unique_ptr<HostDatabase> db = ConnectHostDatabase(kind, location);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(db->backend());
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::unique_ptr<Backend> borrowed;
  absl::StatusOr<HostTransaction> host =
      BeginHostTransaction(*db, **engine, borrowed);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(db->Exec("INSERT INTO orders (id) VALUES ('crash')").ok());
  ASSERT_TRUE(host->Enqueue("order_job", Order("crash")).ok());
  std::printf("\nenqueued\n");
  if (commit) {
    ASSERT_TRUE(db->Exec("COMMIT").ok());
    std::printf("\ncommitted\n");
  }
  std::fflush(stdout);
  while (true) absl::SleepFor(absl::Seconds(1));  // until SIGKILL
}

// Waits for the line `marker` among the child's output; `output` gets
// every line read, to explain a failure.
bool AwaitLine(Child& child, std::string_view marker, std::string* output) {
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::string line;
  while (ReadLine(child.out, deadline, &line)) {
    if (line == marker) return true;
    output->append(line).append("\n");
  }
  return false;
}

using HostCrashTest = HostTransactionTest;

// Runs the child against this test's database and kills it once it printed
// `marker`.
void RunAndKillChild(HostDatabase& db, bool commit, std::string_view marker) {
  setenv(kKindVariable, std::string(db.kind()).c_str(), 1);
  setenv(kLocationVariable, db.location().c_str(), 1);
  if (commit) {
    setenv(kCommitVariable, "1", 1);
  } else {
    unsetenv(kCommitVariable);
  }
  Child child = Spawn("/proc/self/exe", {"--gtest_filter=HostChild.Run"});
  unsetenv(kKindVariable);
  unsetenv(kLocationVariable);
  unsetenv(kCommitVariable);
  std::string output;
  bool reached = AwaitLine(child, marker, &output);
  int status = KillAndReap(child, SIGKILL);
  ASSERT_TRUE(reached) << "the child never printed " << marker << ":\n"
                       << output;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST_P(HostCrashTest, KilledBeforeCommit_NothingExists) {
  Totals before = Snapshot();
  RunAndKillChild(*db_, /*commit=*/false, "enqueued");
  EXPECT_EQ(Snapshot(), before);
  // Nothing the child held is left locked: a new job runs to the end.
  absl::StatusOr<EnqueueResult> job =
      engine_->Enqueue("order_job", Order("after"));
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine_->StartWorker(WorkerSpec().Serve(OrderJob(false, db_.get())),
                           {.poll_interval = absl::Milliseconds(50)});
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_TRUE(AwaitRunEnded(job->run_id, absl::Seconds(30)));
  EXPECT_TRUE((*worker)->Stop().ok());
  EXPECT_EQ(db_->CommittedRows(db_->SluiceTable("runs")), 1);
}

TEST_P(HostCrashTest, KilledAfterCommit_TheRunExistsAndIsWorked) {
  RunAndKillChild(*db_, /*commit=*/true, "committed");
  EXPECT_EQ(db_->CommittedRows("orders"), 1);
  absl::StatusOr<std::vector<RunRecord>> runs = engine_->ListRuns("", 10);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 1u);
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine_->StartWorker(WorkerSpec().Serve(OrderJob(false, db_.get())),
                           {.poll_interval = absl::Milliseconds(50)});
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_TRUE(AwaitRunEnded(runs->front().run_id, absl::Seconds(30)));
  EXPECT_TRUE((*worker)->Stop().ok());
  absl::StatusOr<RunView> view = engine_->GetRun(runs->front().run_id);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->run.status, RunStatus::kCompleted);
}

INSTANTIATE_TEST_SUITE_P(Backends, HostCrashTest,
                         ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
