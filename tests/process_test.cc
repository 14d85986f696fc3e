// Real OS processes on one SQLite file: a worker killed with SIGKILL in the
// middle of a handler, and two workers sharing the queue.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "support/child_process.h"
#include "support/test_flows.h"

namespace sluice::testing {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(60);

Child Spawn(std::vector<std::string> args) {
  return testing::Spawn(SLUICE_TEST_WORKER, std::move(args));
}

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/sluice-process-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    db_ = dir_ + "/shared.db";
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string dir_;
  std::string db_;
};

Handler TimesTen() {
  return [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
    return in.as_int64() * 10;
  };
}

TEST_F(ProcessTest,
       WorkerKilledMidHandler_LosesNothingAndCompletesNoTaskTwice) {
  auto backend = OpenBackend("sqlite:" + db_);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ManualClock clock(absl::Now());
  auto engine = Engine::Create(**backend, {.clock = &clock});
  ASSERT_TRUE(engine.ok());
  int step_completions = 0;
  int run_completions = 0;
  (*engine)->Subscribe([&](const Event& e) {
    if (e.kind == EventKind::kStepCompleted && e.step_slug == "each") {
      ++step_completions;
    }
    if (e.kind == EventKind::kRunCompleted) ++run_completions;
  });
  Flow flow = CrashyFlow(TimesTen());
  ASSERT_TRUE((*engine)->Deploy(flow).ok());
  absl::StatusOr<RunId> run = (*engine)->StartRun(
      "crashy", boost::json::array{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  ASSERT_TRUE(run.ok());

  int hang[2];
  ASSERT_EQ(pipe(hang), 0);
  Child child =
      Spawn({"crashy", "sqlite:" + db_, "fd=" + std::to_string(hang[1])});
  close(hang[1]);
  std::string line;
  ASSERT_TRUE(ReadLine(hang[0], absl::Now() + kDeadline, &line));
  ASSERT_EQ(line, "hang");
  ASSERT_EQ(kill(child.pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child.pid, &status, 0), child.pid);
  EXPECT_TRUE(WIFSIGNALED(status));

  absl::StatusOr<RunView> mid = (*engine)->GetRun(*run);
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->run.status, RunStatus::kStarted);
  // Past every lease: timeout 5 s + recovery grace 30 s.
  clock.Advance(absl::Minutes(10));
  absl::StatusOr<int> recovered = (*engine)->RecoverStalledTasks(100);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_GE(*recovered, 1);
  ASSERT_TRUE((*engine)->ApplyStaleReports(1000).ok());

  // Finish in this process.
  ClaimRequest request{"crashy", "survivor", {}, 100};
  request.served.AddFlow(flow.shape());
  for (int round = 0; round < 10; ++round) {
    absl::StatusOr<std::vector<ClaimedTask>> claimed =
        (*engine)->Claim(request);
    ASSERT_TRUE(claimed.ok()) << claimed.status();
    if (claimed->empty()) break;
    std::vector<TaskResult> results;
    for (ClaimedTask& t : *claimed) {
      TaskContext ctx({t.key.run_id, t.flow_slug, t.step_slug, t.key.task_index,
                       t.attempt, t.max_attempts, t.deadline},
                      CancelToken());
      results.push_back(
          {t.key, t.attempt, flow.handler(t.key.step_index)(t.input, ctx)});
    }
    absl::StatusOr<FinishOutcome> done = (*engine)->FinishTasks(results);
    ASSERT_TRUE(done.ok());
    ASSERT_TRUE((*engine)->ApplyReports(done->report_ids).ok());
  }

  absl::StatusOr<RunView> view = (*engine)->GetRun(*run);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view->run.output, Json(boost::json::object{{"sum", 450}}));
  for (const StepStateRecord& s : view->steps) {
    EXPECT_EQ(s.status, StepStatus::kCompleted) << s.step_slug;
    EXPECT_EQ(s.remaining_tasks, 0) << s.step_slug;
  }
  EXPECT_EQ(*view->steps[0].output,
            Json(boost::json::array{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}));
  for (const TaskRecord& t : view->tasks) {
    EXPECT_EQ(t.status, TaskStatus::kCompleted);
    if (t.key.step_index == 0 && t.key.task_index == 5) {
      EXPECT_EQ(t.attempts, 2);
      EXPECT_EQ(t.requeued_count, 1);
    }
  }
  // The map step completed once, and the run once.
  EXPECT_LE(step_completions, 1);
  EXPECT_EQ(run_completions, 1);
  auto tx = (*backend)->Begin();
  ASSERT_TRUE(tx.ok());
  EXPECT_EQ(*(*tx)->CountReports(), 0);
}

TEST_F(ProcessTest, TwoWorkerProcessesOnOneFile_BothProgressAndNoJobRunsTwice) {
  auto backend = OpenBackend("sqlite:" + db_);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto engine = Engine::Create(**backend);
  ASSERT_TRUE(engine.ok());
  Flow flow = SharedFlow(nullptr);
  ASSERT_TRUE((*engine)->Deploy(flow).ok());

  std::vector<Child> children;
  std::vector<std::string> logs;
  for (int i = 0; i < 2; ++i) {
    logs.push_back(dir_ + "/worker" + std::to_string(i) + ".log");
    children.push_back(
        Spawn({"shared", "sqlite:" + db_, "log=" + logs.back()}));
  }
  for (Child& c : children) {
    std::string line;
    ASSERT_TRUE(ReadLine(c.out, absl::Now() + kDeadline, &line));
    ASSERT_EQ(line, "ready");
  }
  constexpr int kJobs = 400;
  std::vector<Json> inputs;
  for (int i = 0; i < kJobs; ++i)
    inputs.push_back(boost::json::object{{"i", i}});
  absl::StatusOr<std::vector<RunId>> runs =
      (*engine)->StartRuns("shared", inputs);
  ASSERT_TRUE(runs.ok()) << runs.status();

  auto all_done = [&] {
    absl::StatusOr<std::vector<RunRecord>> listed =
        (*engine)->ListRuns("shared", kJobs);
    if (!listed.ok()) return false;
    for (const RunRecord& r : *listed) {
      if (r.status != RunStatus::kCompleted) return false;
    }
    return listed->size() == kJobs;
  };
  EXPECT_TRUE(AwaitCondition(all_done, kDeadline));
  for (Child& c : children) {
    kill(c.pid, SIGTERM);
    int status = 0;
    ASSERT_EQ(waitpid(c.pid, &status, 0), c.pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }

  std::multiset<std::string> handled;
  for (const std::string& path : logs) {
    std::ifstream in(path);
    int lines = 0;
    for (std::string line; std::getline(in, line);) {
      handled.insert(line);
      ++lines;
    }
    EXPECT_GT(lines, 0) << path << " made no progress";
  }
  EXPECT_EQ(handled.size(), static_cast<size_t>(kJobs));
  for (const RunId& id : *runs) {
    EXPECT_EQ(handled.count(id.ToString()), 1u) << id.ToString();
    absl::StatusOr<RunView> view = (*engine)->GetRun(id);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view->tasks[0].attempts, 1);
    EXPECT_EQ(view->run.status, RunStatus::kCompleted);
  }
}

}  // namespace
}  // namespace sluice::testing
