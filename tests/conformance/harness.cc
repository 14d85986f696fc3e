#include "harness.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "absl/synchronization/mutex.h"
#include "sluice/backends.h"
#include "support/postgres_sql.h"

namespace sluice::testing {

Json J(std::string_view text) {
  absl::StatusOr<Json> v = ParseJson(text, "test JSON");
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : Json();
}

Handler Returns(Json output) {
  return [output](const Json&, TaskContext&) -> absl::StatusOr<Json> {
    return output;
  };
}

Handler Echo() {
  return [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
    return input;
  };
}

std::unique_ptr<Backend> OpenTestBackend(const std::string& kind,
                                         const std::string& sqlite_path,
                                         const std::string& postgres_url) {
  std::string url = kind == "sqlite"     ? "sqlite:" + sqlite_path
                    : kind == "postgres" ? postgres_url
                                         : kind + ":";
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(*backend) : nullptr;
}

void Conformance::SetUp() {
  char dir[] = "/tmp/sluice-conformance-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  temp_dir_ = dir;
  sqlite_path_ = temp_dir_ + "/sluice.db";
  std::string postgres_url;
  if (GetParam() == "postgres") {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
    absl::StatusOr<std::unique_ptr<TestDatabase>> database =
        TestDatabase::Create();
    ASSERT_TRUE(database.ok()) << database.status();
    postgres_database_ = std::move(*database);
    postgres_url = postgres_database_->url();
  }
  backend_ = OpenTestBackend(GetParam(), sqlite_path_, postgres_url);
  ASSERT_NE(backend_, nullptr);
  UseEngine(*backend_);
}

void Conformance::TearDown() {
  engine_.reset();
  backend_.reset();
  postgres_database_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(temp_dir_, ignored);
}

void Conformance::ResetBackend() {
  if (GetParam() != "postgres") {
    TearDown();
    SetUp();
    return;
  }
  engine_.reset();
  backend_.reset();
  SqlSession sql(postgres_database_->url());
  sql.Rows(
      "TRUNCATE sluice.flows, sluice.queues, sluice.runs, sluice.step_states, "
      "sluice.tasks, sluice.outbox, sluice.workers, sluice.aliases, "
      "sluice.child_links, sluice.child_reports RESTART IDENTITY CASCADE");
  sql.Rows("SELECT pgmq.drop_queue(queue_name) FROM pgmq.meta");
  backend_ =
      OpenTestBackend(GetParam(), sqlite_path_, postgres_database_->url());
  ASSERT_NE(backend_, nullptr);
  UseEngine(*backend_);
}

EngineOptions Conformance::DefaultOptions() {
  EngineOptions options;
  options.clock = &clock_;
  auto log = log_;
  auto mu = log_mu_;
  options.log = [log, mu](LogLevel, std::string_view line) {
    absl::MutexLock lock(mu.get());
    log->emplace_back(line);
  };
  return options;
}

void Conformance::UseEngine(Backend& backend, EngineOptions options) {
  if (options.clock == Clock::Real()) options = DefaultOptions();
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(backend, std::move(options));
  ASSERT_TRUE(engine.ok()) << engine.status();
  engine_ = std::move(*engine);
}

void Conformance::Deploy(const Flow& flow) {
  absl::StatusOr<DeployOutcome> outcome = engine_->Deploy(flow);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
}

RunId Conformance::Start(const Flow& flow, const Json& input) {
  absl::StatusOr<RunId> run = engine_->StartRun(flow.slug(), input);
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? *run : RunId();
}

std::vector<ClaimedTask> Conformance::Claim(const Flow& flow, int limit) {
  ClaimRequest request;
  request.queue = flow.shape().steps.front().queue_name;
  request.worker_id = "test-worker";
  request.served.AddFlow(flow.shape());
  request.limit = limit;
  absl::StatusOr<std::vector<ClaimedTask>> claimed = engine_->Claim(request);
  EXPECT_TRUE(claimed.ok()) << claimed.status();
  return claimed.ok() ? std::move(*claimed) : std::vector<ClaimedTask>();
}

FinishOutcome Conformance::Finish(std::vector<TaskResult> results) {
  absl::StatusOr<FinishOutcome> outcome = engine_->FinishTasks(results);
  EXPECT_TRUE(outcome.ok()) << outcome.status();
  if (!outcome.ok()) return {};
  absl::Status applied = engine_->ApplyReports(outcome->report_ids);
  EXPECT_TRUE(applied.ok()) << applied;
  return *outcome;
}

FinishOutcome Conformance::Complete(const ClaimedTask& task, Json output) {
  return Finish({TaskResult{task.key, task.attempt, std::move(output)}});
}

FinishOutcome Conformance::Fail(const ClaimedTask& task, absl::Status error) {
  return Finish({TaskResult{task.key, task.attempt, std::move(error)}});
}

int Conformance::Drive(const Flow& flow, int batch) {
  int calls = 0;
  while (true) {
    std::vector<ClaimedTask> claimed = Claim(flow, batch);
    if (claimed.empty()) return calls;
    std::vector<TaskResult> results;
    for (ClaimedTask& task : claimed) {
      const Handler& handler = flow.handler(task.key.step_index);
      TaskContext context(
          TaskContext::Info{task.key.run_id, task.flow_slug, task.step_slug,
                            task.key.task_index, task.attempt,
                            task.max_attempts, task.deadline, task.traceparent},
          CancelToken());
      // As a worker does, with the claim's record of the task.
      results.push_back(TaskResult{task.key, task.attempt,
                                   handler(task.input, context),
                                   /*completion_write=*/nullptr, task.record});
      ++calls;
    }
    Finish(std::move(results));
  }
}

RunView Conformance::View(const RunId& run) {
  absl::StatusOr<RunView> view = engine_->GetRun(run);
  EXPECT_TRUE(view.ok()) << view.status();
  return view.ok() ? std::move(*view) : RunView();
}

const StepStateRecord& Conformance::StepOf(const RunView& view,
                                           std::string_view slug) {
  for (const StepStateRecord& s : view.steps) {
    if (s.step_slug == slug) return s;
  }
  ADD_FAILURE() << "no step " << slug;
  static const StepStateRecord kNone;
  return kNone;
}

TaskRecord Conformance::TaskOf(const RunId& run, std::string_view slug,
                               int task_index) {
  RunView view = View(run);
  int step = -1;
  for (const StepStateRecord& s : view.steps) {
    if (s.step_slug == slug) step = s.step_index;
  }
  for (const TaskRecord& t : view.tasks) {
    if (t.key.step_index == step && t.key.task_index == task_index) return t;
  }
  ADD_FAILURE() << "no task " << slug << "[" << task_index << "]";
  return TaskRecord();
}

std::optional<MessageLocation> Conformance::MessageOf(const TaskRecord& task) {
  absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
  EXPECT_TRUE(tx.ok()) << tx.status();
  if (!tx.ok()) return std::nullopt;
  absl::StatusOr<std::optional<MessageLocation>> where =
      (*tx)->LookupMessage(task.queue_name, task.message_id);
  EXPECT_TRUE(where.ok()) << where.status();
  return where.ok() ? *where : std::nullopt;
}

int64_t Conformance::PendingReports() {
  absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
  EXPECT_TRUE(tx.ok()) << tx.status();
  if (!tx.ok()) return -1;
  absl::StatusOr<int64_t> count = (*tx)->CountReports();
  EXPECT_TRUE(count.ok()) << count.status();
  return count.ok() ? *count : -1;
}

std::vector<std::string> Conformance::LogLines() {
  absl::MutexLock lock(log_mu_.get());
  return *log_;
}

std::string Conformance::postgres_url() const {
  return postgres_database_ ? postgres_database_->url() : "";
}

}  // namespace sluice::testing
