// The conformance suite's fixture: one engine on a manual clock over the
// backend named by the test parameter ("memory", "sqlite" or "postgres"),
// and helpers that drive the task path by hand, deterministically.
//
// "postgres" runs each test in a fresh database on the cluster named by
// SLUICE_TEST_POSTGRES_URL, and skips when it is unset.
#ifndef SLUICE_TESTS_CONFORMANCE_HARNESS_H_
#define SLUICE_TESTS_CONFORMANCE_HARNESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/clock.h"
#include "sluice/engine.h"
#include "sluice/flow.h"
#include "sluice/json.h"
#include "support/postgres_test_database.h"

namespace sluice::testing {

// Parses JSON text; the test fails on malformed text.
Json J(std::string_view text);

// A handler that returns `output` whatever its input.
Handler Returns(Json output);
// A handler that returns its input.
Handler Echo();

// Opens a fresh backend of `kind` ("memory", "sqlite" or "postgres");
// SQLite files go under a temporary directory removed by the fixture, and
// `postgres_url` names the (fresh) Postgres database.
std::unique_ptr<Backend> OpenTestBackend(const std::string& kind,
                                         const std::string& sqlite_path,
                                         const std::string& postgres_url = "");

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Starts over with an empty backend and a new engine, as TearDown() then
  // SetUp() would, but cheaper: a Postgres database is emptied in place
  // (ids restart) instead of dropped and cloned again.
  void ResetBackend();

  Engine& engine() { return *engine_; }
  ManualClock& clock() { return clock_; }
  Backend& backend() { return *backend_; }
  const std::string& sqlite_path() const { return sqlite_path_; }
  // The test's Postgres database ("" on other backends).
  std::string postgres_url() const;
  // Replaces the engine (e.g. to wrap the backend); `backend` must outlive it.
  void UseEngine(Backend& backend, EngineOptions options = {});
  EngineOptions DefaultOptions();

  void Deploy(const Flow& flow);
  RunId Start(const Flow& flow, const Json& input);
  // Claims up to `limit` tasks of `flow` from its queue.
  std::vector<ClaimedTask> Claim(const Flow& flow, int limit = 100);
  // Records results and applies their reports (the push path).
  FinishOutcome Finish(std::vector<TaskResult> results);
  FinishOutcome Complete(const ClaimedTask& task, Json output);
  FinishOutcome Fail(const ClaimedTask& task, absl::Status error);
  // `task`'s result, with the record its claim stored (TaskResult::claimed).
  static TaskResult WithRecord(const ClaimedTask& task,
                               absl::StatusOr<StepResult> outcome) {
    return TaskResult{task.key, task.attempt, std::move(outcome),
                      /*completion_write=*/nullptr, task.record};
  }
  // Claims and runs `flow`'s handlers until nothing is claimable now.
  // Returns the number of handler calls.
  int Drive(const Flow& flow, int batch = 100);

  RunView View(const RunId& run);
  const StepStateRecord& StepOf(const RunView& view, std::string_view slug);
  // The task (step `slug`, index `task_index`) of a run.
  TaskRecord TaskOf(const RunId& run, std::string_view slug,
                    int task_index = 0);
  // Where a task's message is now.
  std::optional<MessageLocation> MessageOf(const TaskRecord& task);
  int64_t PendingReports();
  std::vector<std::string> LogLines();

 private:
  ManualClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::string temp_dir_;
  std::string sqlite_path_;
  std::unique_ptr<TestDatabase> postgres_database_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Engine> engine_;
  std::vector<const Flow*> flows_;
  // Workers log from their own threads.
  std::shared_ptr<absl::Mutex> log_mu_ = std::make_shared<absl::Mutex>();
  std::shared_ptr<std::vector<std::string>> log_ =
      std::make_shared<std::vector<std::string>>();
};

// Registers every TEST_P of a conformance test class for each backend.
#define SLUICE_CONFORMANCE_SUITE(fixture)                                     \
  INSTANTIATE_TEST_SUITE_P(Backends, fixture,                                 \
                           ::testing::Values("memory", "sqlite", "postgres"), \
                           [](const auto& info) { return info.param; })

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CONFORMANCE_HARNESS_H_
