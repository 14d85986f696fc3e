// Real worker processes on one Postgres database: three workers sharing a
// queue while one is killed holding claimed tasks, and a worker woken by
// NOTIFY whose LISTEN connection is terminated. (Every kind of engine call
// at once is in concurrent_calls_test.cc.)
//
// The Postgres tests need SLUICE_TEST_POSTGRES_URL (scripts/test.sh starts
// a throwaway cluster and sets it) and skip without it.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "sluice/internal/strings.h"
#include "support/child_process.h"
#include "support/postgres_sql.h"
#include "support/postgres_test_database.h"
#include "support/test_flows.h"

namespace sluice::testing {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(60);

std::unique_ptr<Backend> OpenOrFail(const std::string& url) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(*backend) : nullptr;
}

std::set<std::string> ReadLog(const std::string& path,
                              std::multiset<std::string>* all) {
  std::set<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    lines.insert(line);
    if (all != nullptr) all->insert(line);
  }
  return lines;
}

class PostgresProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
    absl::StatusOr<std::unique_ptr<TestDatabase>> database =
        TestDatabase::Create();
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = std::move(*database);
    char dir[] = "/tmp/sluice-pg-process-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    backend_ = OpenOrFail(database_->url());
    ASSERT_NE(backend_, nullptr);
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(*backend_);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }

  void TearDown() override {
    for (Child& child : children_) {
      if (child.pid > 0) KillAndReap(child, SIGKILL);
    }
    engine_.reset();
    backend_.reset();
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
    database_.reset();
  }

  // Starts sluice_test_worker MODE URL ARGS... and waits for its "ready".
  Child* StartWorkerProcess(const std::string& mode,
                            std::vector<std::string> args) {
    args.insert(args.begin(), {mode, database_->url()});
    children_.push_back(Spawn(SLUICE_TEST_WORKER, std::move(args)));
    Child* child = &children_.back();
    std::string line;
    EXPECT_TRUE(ReadLine(child->out, absl::Now() + kDeadline, &line))
        << mode << " worker did not start";
    EXPECT_EQ(line, "ready");
    return child;
  }

  std::unique_ptr<TestDatabase> database_;
  std::string dir_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Engine> engine_;
  std::deque<Child> children_;  // killed in TearDown if still running
};

TEST_F(PostgresProcessTest,
       ThreeWorkerProcesses_OneKilledHoldingTasks_EveryJobCompletesOnce) {
  ASSERT_TRUE(engine_->Deploy(FleetFlow(nullptr)).ok());
  const std::vector<std::string> ids = {"survivor_0", "survivor_1", "victim"};
  std::vector<Child*> workers;
  for (const std::string& id : ids) {
    std::vector<std::string> args = {"log=" + dir_ + "/" + id + ".log",
                                     "worker_id=" + id};
    // The victim completes 10 jobs, then its handlers hang.
    if (id == "victim") args.push_back("hang_after=10");
    workers.push_back(StartWorkerProcess("fleet", args));
  }
  if (HasFailure()) return;

  constexpr int kJobs = 300;
  std::vector<Json> inputs;
  for (int i = 0; i < kJobs; ++i) {
    inputs.push_back(boost::json::object{{"i", i}});
  }
  absl::StatusOr<std::vector<RunId>> runs = engine_->StartRuns("fleet", inputs);
  ASSERT_TRUE(runs.ok()) << runs.status();

  Child& victim = *workers[2];
  std::string line;
  ASSERT_TRUE(ReadLine(victim.out, absl::Now() + kDeadline, &line))
      << "the victim never hung; it handled "
      << ReadLog(dir_ + "/victim.log", nullptr).size() << " jobs";
  ASSERT_EQ(line, "hang");
  EXPECT_TRUE(WIFSIGNALED(KillAndReap(victim, SIGKILL)));

  // Its leases stand until they lapse (2 s timeout + grace), so this is
  // what it held when it died: hung handlers and prefetched tasks.
  SqlSession sql(database_->url());
  std::set<std::string> held;
  for (const auto& row :
       sql.Rows("SELECT run_id::text FROM sluice.tasks "
                "WHERE worker_id = 'victim' AND status = 'started'")) {
    held.insert(row[0]);
  }
  ASSERT_FALSE(held.empty()) << "the victim held no claimed task when killed";

  auto all_completed = [&] {
    absl::StatusOr<std::vector<RunRecord>> listed =
        engine_->ListRuns("fleet", kJobs + 1);
    if (!listed.ok() || listed->size() != kJobs) return false;
    for (const RunRecord& r : *listed) {
      if (r.status != RunStatus::kCompleted) return false;
    }
    return true;
  };
  EXPECT_TRUE(AwaitCondition(all_completed, kDeadline));
  for (int i = 0; i < 2; ++i) {
    int status = KillAndReap(*workers[i], SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << ids[i] << " wait status " << status;
  }

  // Handler calls: a survivor's each led to a recorded completion (it
  // stopped gracefully); the victim's may not have.
  std::multiset<std::string> survivor_calls;
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(ReadLog(dir_ + "/" + ids[i] + ".log", &survivor_calls).empty())
        << ids[i] << " made no progress";
  }
  std::set<std::string> victim_calls = ReadLog(dir_ + "/victim.log", nullptr);
  EXPECT_GT(victim_calls.size(), 10u);

  int completed_by_victim = 0;
  std::set<RunId> started(runs->begin(), runs->end());
  for (int i = 0; i < kJobs; ++i) {
    const RunId& id = (*runs)[i];
    const std::string text = id.ToString();
    absl::StatusOr<RunView> view = engine_->GetRun(id);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->run.status, RunStatus::kCompleted) << text;
    ASSERT_TRUE(view->run.output.has_value()) << text;
    EXPECT_EQ(*view->run.output,
              Json(boost::json::object{{"job", boost::json::object{{"i", i}}}}))
        << text;
    ASSERT_EQ(view->tasks.size(), 1u);
    const TaskRecord& task = view->tasks[0];
    EXPECT_EQ(task.status, TaskStatus::kCompleted) << text;
    // Exactly one handler call per job led to its completion.
    const bool by_victim = task.worker_id == "victim";
    completed_by_victim += by_victim;
    EXPECT_EQ(survivor_calls.count(text) + (by_victim ? 1 : 0), 1u)
        << text << " completed by " << task.worker_id;
    if (by_victim) {
      EXPECT_TRUE(victim_calls.contains(text)) << text;
    }
    if (held.contains(text)) {
      EXPECT_NE(task.worker_id, "victim") << text;
      EXPECT_GE(task.requeued_count, 1) << text;
      EXPECT_GE(task.attempts, 2) << text;
    }
  }
  EXPECT_GT(completed_by_victim, 0);
  absl::StatusOr<std::vector<RunRecord>> listed =
      engine_->ListRuns("fleet", kJobs + 1);
  ASSERT_TRUE(listed.ok());
  std::set<RunId> stored;
  for (const RunRecord& r : *listed) stored.insert(r.run_id);
  EXPECT_EQ(stored, started);
  EXPECT_EQ(sql.Count("SELECT count(*) FROM sluice.outbox"), 0);
  EXPECT_EQ(sql.Count("SELECT count(*) FROM pgmq.q_fleet"), 0);
}

TEST_F(PostgresProcessTest,
       IdleWorker_WakesOnNotify_AlsoAfterItsListenConnectionIsTerminated) {
  ASSERT_TRUE(engine_->Deploy(SharedFlow(nullptr)).ok());
  // It polls and heartbeats once a minute and never sweeps: only a
  // notification wakes it within seconds.
  Child* worker = StartWorkerProcess("announce", {});
  ASSERT_FALSE(HasFailure());
  SqlSession admin(database_->admin_url());
  auto listener = [&]() -> std::optional<std::string> {
    return admin.Value(
        "SELECT pid::text FROM pg_stat_activity "
        "WHERE datname = $1 AND query ILIKE 'LISTEN%' "
        "ORDER BY backend_start DESC LIMIT 1",
        {database_->name()});
  };
  std::string first_listener;
  ASSERT_TRUE(AwaitCondition(
      [&] {
        first_listener = listener().value_or("");
        return !first_listener.empty();
      },
      kDeadline))
      << "the worker never LISTENed";

  constexpr absl::Duration kWakeDeadline = absl::Seconds(10);
  // Starts a job from this process, waits for the worker's handler to start
  // within kWakeDeadline, then for the run to complete (the worker is idle
  // again).
  auto handler_starts = [&](int i) -> ::testing::AssertionResult {
    absl::StatusOr<RunId> run =
        engine_->StartRun("shared", boost::json::object{{"i", i}});
    if (!run.ok()) {
      return ::testing::AssertionFailure() << run.status();
    }
    const absl::Time deadline = absl::Now() + kWakeDeadline;
    std::string line;
    while (ReadLine(worker->out, deadline, &line)) {
      if (line != "started " + run->ToString()) continue;
      bool completed = AwaitCondition(
          [&] {
            absl::StatusOr<RunView> view = engine_->GetRun(*run);
            return view.ok() && view->run.status == RunStatus::kCompleted;
          },
          kDeadline);
      if (!completed) {
        return ::testing::AssertionFailure() << "job " << i << " started but "
                                             << "did not complete";
      }
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "job " << i << ": the handler did not start within "
           << kWakeDeadline;
  };

  EXPECT_TRUE(handler_starts(1)) << "idle worker, LISTEN connection intact";

  EXPECT_EQ(admin.Value("SELECT pg_terminate_backend($1::integer, 10000)::text",
                        {first_listener}),
            "true");
  EXPECT_TRUE(handler_starts(2)) << "started just after the LISTEN "
                                    "connection was terminated";

  std::string second_listener;
  ASSERT_TRUE(AwaitCondition(
      [&] {
        second_listener = listener().value_or("");
        return !second_listener.empty() && second_listener != first_listener;
      },
      kDeadline))
      << "the worker never LISTENed again";
  EXPECT_TRUE(handler_starts(3)) << "idle worker on its new LISTEN connection";

  int status = KillAndReap(*worker, SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "wait status " << status;
}

}  // namespace
}  // namespace sluice::testing
