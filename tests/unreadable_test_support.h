// What the unreadable-data tests of SQLite and Postgres share: a fixture that
// changes stored rows from outside the backend, the flows, and the checks
// that one unreadable item failed only its own run.
#ifndef SLUICE_TESTS_UNREADABLE_TEST_SUPPORT_H_
#define SLUICE_TESTS_UNREADABLE_TEST_SUPPORT_H_

#include <string>
#include <string_view>
#include <vector>

#include "conformance/harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/internal/strings.h"
#include "support/postgres_sql.h"
#include "support/sqlite_test_support.h"

namespace sluice::testing {

class Unreadable : public Conformance {
 protected:
  // Runs `sql` on the store with a connection of the test's own, as a hand
  // edit or an older version would.
  void Corrupt(const std::string& sql) {
    if (GetParam() == "sqlite") {
      sqlite_testing::RawDatabase(sqlite_path()).Exec(sql);
    } else {
      SqlSession session(postgres_url());
      session.Rows(sql);
    }
  }

  // "job": one step that returns its input.
  static Flow Job() {
    Flow flow("unr_job", {.max_attempts = 3, .base_delay = absl::Seconds(1)});
    flow.Step("job", Echo());
    return flow;
  }

  // "chain": "first", then "second", whose input holds the run input.
  static Flow Chain() {
    Flow flow("unr_chain", {.base_delay = absl::Seconds(1)});
    flow.Step("first", Echo())
        .Step("second", {.depends_on = {"first"}}, Echo());
    return flow;
  }

  // Claims and finishes every task of `flow` without applying the reports,
  // then moves the clock past report_stale_after: the reports wait in the
  // outbox for the sweeper.
  std::vector<int64_t> FinishLeavingReports(const Flow& flow) {
    std::vector<TaskResult> results;
    for (const ClaimedTask& task : Claim(flow)) {
      results.push_back({task.key, task.attempt, task.input});
    }
    absl::StatusOr<FinishOutcome> outcome = engine().FinishTasks(results);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    clock().Advance(engine().options().report_stale_after + absl::Seconds(1));
    return outcome.ok() ? outcome->report_ids : std::vector<int64_t>();
  }

  void ExpectCompleted(const RunId& run) {
    RunView view = View(run);
    EXPECT_EQ(view.run.status, RunStatus::kCompleted) << view.run.error;
    EXPECT_EQ(view.run.unreadable, "");
  }

  // The run failed because stored data could not be read, and its error
  // says which (`what`); nothing of it is left queued or started.
  void ExpectFailedUnreadable(const RunId& run, std::string_view what) {
    RunView view = View(run);
    EXPECT_EQ(view.run.status, RunStatus::kFailed);
    EXPECT_THAT(view.run.error,
                ::testing::StartsWith("stored data unreadable"));
    EXPECT_THAT(view.run.error, ::testing::HasSubstr(std::string(what)));
    for (const TaskRecord& task : view.tasks) {
      EXPECT_TRUE(IsTerminal(task.status) || !task.unreadable.empty())
          << "task " << task.key.step_index << "/" << task.key.task_index
          << " is " << ToString(task.status);
    }
  }

  // The task failed for good with the unreadable error, and its message is
  // archived.
  void ExpectTaskFailedUnreadable(const RunId& run, std::string_view step,
                                  std::string_view what) {
    TaskRecord task = TaskOf(run, step);
    EXPECT_EQ(task.status, TaskStatus::kFailed);
    EXPECT_THAT(task.error, ::testing::StartsWith("stored data unreadable"));
    EXPECT_THAT(task.error, ::testing::HasSubstr(std::string(what)));
    EXPECT_EQ(task.attempts, 0);  // never handed to a handler
    std::optional<MessageLocation> message = MessageOf(task);
    ASSERT_TRUE(message.has_value());
    EXPECT_TRUE(message->archived);
  }
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_UNREADABLE_TEST_SUPPORT_H_
