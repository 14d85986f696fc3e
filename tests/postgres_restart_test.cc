// The Postgres server restarted (`pg_ctl restart -m immediate`, a crash of
// every server process) while two workers are in the middle of a
// map-reduce workload shaped like the benchmark's W2: after the server is
// back, every run completes with the right output, every task completed
// exactly once, and nothing is left in the outbox or the queue.
//
// Needs SLUICE_TEST_POSTGRES_URL and SLUICE_TEST_POSTGRES_DIR, the directory
// scripts/pg_cluster.sh started that cluster in (scripts/test.sh sets both);
// skips without them. The restart cuts every connection to the cluster, so
// CTest runs this binary alone (RUN_SERIAL); the cluster is left running.
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "support/child_process.h"
#include "support/postgres_sql.h"
#include "support/postgres_test_database.h"

namespace sluice::testing {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(120);
constexpr int kRuns = 50;         // 12 tasks each: 600 tasks
constexpr int kTasksPerRun = 12;  // root, 10 squares, reduce

std::string PostgresClusterDir() {
  const char* dir = std::getenv("SLUICE_TEST_POSTGRES_DIR");
  return dir == nullptr ? "" : dir;
}

// (run, step, index) of one task.
using TaskId = std::tuple<std::string, std::string, int>;

// Handler calls per task, from every worker.
class CallLog {
 public:
  void Add(const TaskContext& ctx) {
    absl::MutexLock lock(&mu_);
    ++calls_[{ctx.run_id().ToString(), ctx.step_slug(), ctx.task_index()}];
    ++total_;
  }
  int total() {
    absl::MutexLock lock(&mu_);
    return total_;
  }
  std::map<TaskId, int> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  std::map<TaskId, int> calls_ ABSL_GUARDED_BY(mu_);
  int total_ ABSL_GUARDED_BY(mu_) = 0;
};

// W2's shape: root makes 10 numbers from the input, a map squares each, and
// reduce sums the squares. Short leases, so a result lost with the server
// is taken back within seconds.
Flow RestartFlow(CallLog* log) {
  Flow flow("restart_w2", {.max_attempts = 5,
                           .base_delay = absl::ZeroDuration(),
                           .timeout = absl::Seconds(2)});
  flow.Step("root",
            [log](const Json& in, TaskContext& ctx) -> absl::StatusOr<Json> {
              log->Add(ctx);
              boost::json::array items;
              const int64_t base = in.at("run").at("n").as_int64();
              for (int i = 0; i < 10; ++i) items.emplace_back(base + i);
              return items;
            })
      .Map("square", {.depends_on = {"root"}},
           [log](const Json& in, TaskContext& ctx) -> absl::StatusOr<Json> {
             log->Add(ctx);
             return in.as_int64() * in.as_int64();
           })
      .Step("reduce", {.depends_on = {"square"}},
            [log](const Json& in, TaskContext& ctx) -> absl::StatusOr<Json> {
              log->Add(ctx);
              int64_t total = 0;
              for (const Json& v : in.at("square").as_array()) {
                total += v.as_int64();
              }
              return total;
            });
  return flow;
}

int64_t ExpectedOutput(int n) {
  int64_t total = 0;
  for (int64_t i = n; i < n + 10; ++i) total += i * i;
  return total;
}

// One worker with its own backend (its own connections) and engine.
struct WorkerProcessLike {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Worker> worker;
};

class PostgresRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
    if (PostgresClusterDir().empty()) {
      GTEST_SKIP()
          << "set SLUICE_TEST_POSTGRES_DIR to the directory "
             "scripts/pg_cluster.sh started SLUICE_TEST_POSTGRES_URL's "
             "cluster in to run the restart test";
    }
    absl::StatusOr<std::unique_ptr<TestDatabase>> database =
        TestDatabase::Create();
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = std::move(*database);
    // The test cluster may run with synchronous_commit off (SLUICE_PG_FAST),
    // which lets a crash lose commits the client was told about. What a
    // client was told must survive: this database commits synchronously.
    SqlSession admin(database_->admin_url());
    admin.Rows("ALTER DATABASE " + database_->name() +
               " SET synchronous_commit = on");
  }

  // An engine on a new backend, with fast recovery of lost leases.
  void Open(WorkerProcessLike* w) {
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        OpenBackend(database_->url());
    ASSERT_TRUE(backend.ok()) << backend.status();
    w->backend = std::move(*backend);
    EngineOptions options;
    options.claim_grace = absl::Milliseconds(200);
    options.recovery_grace = absl::Milliseconds(500);
    options.report_stale_after = absl::Seconds(1);
    options.log = [](LogLevel, std::string_view) {};  // errors are expected
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Create(*w->backend, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    w->engine = std::move(*engine);
  }

  // When the server last started, from a new connection.
  std::string ServerStartTime() {
    SqlSession sql(database_->url());
    return sql.Value("SELECT pg_postmaster_start_time()::text").value_or("");
  }

  std::unique_ptr<TestDatabase> database_;
};

// Runs scripts/pg_cluster.sh restart: an immediate shutdown (no checkpoint;
// the server recovers from its WAL) and a start with the same settings.
bool RestartCluster() {
  const std::string command = std::string(SLUICE_PG_CLUSTER_SCRIPT) +
                              " restart '" + PostgresClusterDir() + "'";
  return std::system(command.c_str()) == 0;
}

TEST_F(PostgresRestartTest,
       ImmediateRestartDuringW2Workload_EveryRunCompletes_EachTaskOnce) {
  CallLog calls;
  const Flow flow = RestartFlow(&calls);
  WorkerProcessLike client;
  ASSERT_NO_FATAL_FAILURE(Open(&client));
  ASSERT_TRUE(client.engine->Deploy(flow).ok());

  std::vector<Json> inputs;
  for (int i = 0; i < kRuns; ++i) {
    inputs.push_back(boost::json::object{{"n", i}});
  }
  absl::StatusOr<std::vector<RunId>> runs =
      client.engine->StartRuns("restart_w2", inputs);
  ASSERT_TRUE(runs.ok()) << runs.status();

  WorkerProcessLike workers[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_NO_FATAL_FAILURE(Open(&workers[i]));
    WorkerOptions options;
    options.worker_id = "worker_" + std::to_string(i);
    options.concurrency = 4;
    options.batch_size = 8;
    options.poll_interval = absl::Milliseconds(10);
    options.heartbeat_interval = absl::Milliseconds(200);
    options.sweep_interval = absl::Milliseconds(200);
    absl::StatusOr<std::unique_ptr<Worker>> worker =
        workers[i].engine->StartWorker(flow, options);
    ASSERT_TRUE(worker.ok()) << worker.status();
    workers[i].worker = std::move(*worker);
  }

  // Restart once a fifth of the handlers ran: mid-workload.
  constexpr int kTasks = kRuns * kTasksPerRun;
  ASSERT_TRUE(
      AwaitCondition([&] { return calls.total() >= kTasks / 5; }, kDeadline))
      << "the workers never got going: " << calls.total() << " calls";
  const std::string started_before = ServerStartTime();
  const int calls_before = calls.total();
  ASSERT_TRUE(RestartCluster()) << "pg_cluster.sh restart failed";
  EXPECT_LT(calls_before, kTasks) << "the workload ended before the restart";
  EXPECT_NE(ServerStartTime(), started_before) << "the server did not restart";

  auto all_completed = [&] {
    absl::StatusOr<std::vector<RunRecord>> listed =
        client.engine->ListRuns("restart_w2", kRuns + 1);
    if (!listed.ok() || listed->size() != kRuns) return false;
    for (const RunRecord& r : *listed) {
      if (r.status != RunStatus::kCompleted) return false;
    }
    return true;
  };
  EXPECT_TRUE(AwaitCondition(all_completed, kDeadline))
      << "runs still unfinished after the restart";
  for (WorkerProcessLike& w : workers) {
    EXPECT_TRUE(w.worker->Stop().ok());
    EXPECT_TRUE(w.worker->Wait().ok());
  }

  // Each run's output, and each task: completed once, its handler called
  // at most once per attempt (a result lost with the server is retried).
  const std::map<TaskId, int> handler_calls = calls.calls();
  int tasks_seen = 0;
  int retried = 0;
  for (int i = 0; i < kRuns; ++i) {
    const std::string text = (*runs)[i].ToString();
    absl::StatusOr<RunView> view = client.engine->GetRun((*runs)[i]);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->run.status, RunStatus::kCompleted) << text;
    ASSERT_TRUE(view->run.output.has_value()) << text;
    EXPECT_EQ(*view->run.output,
              Json(boost::json::object{{"reduce", ExpectedOutput(i)}}))
        << text;
    EXPECT_EQ(view->tasks.size(), static_cast<size_t>(kTasksPerRun)) << text;
    std::map<int, std::string> step_slugs;
    for (const StepStateRecord& step : view->steps) {
      step_slugs[step.step_index] = step.step_slug;
      EXPECT_EQ(step.status, StepStatus::kCompleted)
          << text << " " << step.step_slug;
      EXPECT_EQ(step.remaining_tasks, 0) << text << " " << step.step_slug;
      EXPECT_EQ(step.initial_tasks, step.step_slug == "square" ? 10 : 1)
          << text << " " << step.step_slug;
    }
    for (const TaskRecord& task : view->tasks) {
      ++tasks_seen;
      const std::string step = step_slugs[task.key.step_index];
      EXPECT_EQ(task.status, TaskStatus::kCompleted) << text << " " << step;
      auto it = handler_calls.find({text, step, task.key.task_index});
      ASSERT_NE(it, handler_calls.end()) << text << " " << step;
      EXPECT_LE(it->second, task.attempts) << text << " " << step;
      retried += task.attempts > 1;
    }
  }
  EXPECT_EQ(tasks_seen, kTasks);
  EXPECT_EQ(handler_calls.size(), static_cast<size_t>(kTasks));
  std::cout << "restarted after " << calls_before << " of " << kTasks
            << " handler calls; " << calls.total() << " calls in all, "
            << retried << " tasks claimed more than once\n";

  // Every report applied, every message deleted.
  SqlSession sql(database_->url());
  EXPECT_EQ(sql.Count("SELECT count(*) FROM sluice.outbox"), 0);
  EXPECT_EQ(sql.Count("SELECT count(*) FROM pgmq.q_restart_w2"), 0);
  EXPECT_EQ(sql.Count("SELECT count(*) FROM sluice.tasks "
                      "WHERE status <> 'completed'"),
            0);
}

}  // namespace
}  // namespace sluice::testing
