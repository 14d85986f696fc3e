// Rows of a SQLite file that no longer decode (edited by hand, or written by
// an older version) are taken out of the way one by one: each fails only its
// own task and run, and the claim, the sweep and listing go on with the
// rest. See docs/decisions/0014-unreadable-stored-data.md.
#include "unreadable_test_support.h"

namespace sluice::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::SizeIs;

class SqliteUnreadable : public Unreadable {
 protected:
  // `sql` with "$run" replaced by the run's id text.
  void CorruptRun(std::string sql, const RunId& run) {
    size_t at = sql.find("$run");
    if (at != std::string::npos) {
      sql.replace(at, 4, StrCat("'", run.ToString(), "'"));
    }
    Corrupt(sql);
  }
};

// Stored values that can't be read back: not JSON, a number JSON does not
// have (what `1e99999` became before inputs were checked), and a string
// that is not UTF-8 (the bytes {"a":"<FF>"}).
const std::vector<std::string>& BadJsonValues() {
  static const std::vector<std::string> kValues = {
      "'not json'", "'{\"a\":Infinity}'",
      "CAST(X'7B2261223A22FF227D' AS TEXT)"};
  return kValues;
}

TEST_P(SqliteUnreadable, TaskInput_FailsOnlyItsTaskAndRun) {
  for (const std::string& value : BadJsonValues()) {
    SCOPED_TRACE(value);
    ResetBackend();
    Flow flow = Job();
    Deploy(flow);
    RunId healthy = Start(flow, J(R"({"n":1})"));
    RunId bad = Start(flow, J(R"({"n":2})"));
    CorruptRun("UPDATE tasks SET input = " + value + " WHERE run_id = $run",
               bad);

    EXPECT_EQ(Drive(flow), 1);

    ExpectCompleted(healthy);
    ExpectTaskFailedUnreadable(bad, "job", "task input");
    ExpectFailedUnreadable(bad, "task input");
    EXPECT_EQ(PendingReports(), 0);
    EXPECT_THAT(LogLines(), Contains(HasSubstr("stored data unreadable")));
  }
}

TEST_P(SqliteUnreadable, TaskStatus_ArchivesItsMessage_AndOthersAreClaimed) {
  Flow flow = Job();
  Deploy(flow);
  RunId healthy = Start(flow, J("1"));
  RunId bad = Start(flow, J("2"));
  TaskRecord bad_task = TaskOf(bad, "job");
  CorruptRun("UPDATE tasks SET status = 'bogus' WHERE run_id = $run", bad);

  EXPECT_EQ(Drive(flow), 1);

  ExpectCompleted(healthy);
  ExpectFailedUnreadable(bad, "\"bogus\"");
  EXPECT_THAT(TaskOf(bad, "job").unreadable, HasSubstr("\"bogus\""));
  EXPECT_TRUE(MessageOf(bad_task)->archived);
}

TEST_P(SqliteUnreadable, MessageBody_NeverStopsAClaim_AndReadsAsUnreadable) {
  Flow flow = Job();
  Deploy(flow);
  RunId first = Start(flow, J("1"));
  RunId second = Start(flow, J("2"));
  TaskRecord task = TaskOf(first, "job");
  Corrupt(StrCat("UPDATE messages SET body = 'not json' WHERE message_id = ",
                 task.message_id));

  std::optional<MessageLocation> message = MessageOf(task);
  ASSERT_TRUE(message.has_value());
  EXPECT_THAT(message->message.unreadable, HasSubstr("message body"));

  EXPECT_EQ(Drive(flow), 2);  // claims use the task's input, not the body

  ExpectCompleted(first);
  ExpectCompleted(second);
  EXPECT_FALSE(MessageOf(task).has_value());  // deleted on completion
}

TEST_P(SqliteUnreadable, ReportKind_FailsItsRun_AndOtherReportsApply) {
  Flow flow = Job();
  Deploy(flow);
  RunId healthy = Start(flow, J("1"));
  RunId bad = Start(flow, J("2"));
  ASSERT_THAT(FinishLeavingReports(flow), SizeIs(2));
  CorruptRun("UPDATE outbox SET kind = 'bogus' WHERE run_id = $run", bad);

  absl::StatusOr<int> applied = engine().ApplyStaleReports(100);

  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(*applied, 2);
  ExpectCompleted(healthy);
  ExpectFailedUnreadable(bad, "outbox report");
  EXPECT_EQ(PendingReports(), 0);
}

TEST_P(SqliteUnreadable, ReportWithoutARun_IsDropped_AndOtherReportsApply) {
  Flow flow = Job();
  Deploy(flow);
  RunId healthy = Start(flow, J("1"));
  RunId bad = Start(flow, J("2"));
  ASSERT_THAT(FinishLeavingReports(flow), SizeIs(2));
  CorruptRun("UPDATE outbox SET run_id = 'no-such-id' WHERE run_id = $run",
             bad);

  absl::StatusOr<int> applied = engine().ApplyStaleReports(100);

  ASSERT_TRUE(applied.ok()) << applied.status();
  ExpectCompleted(healthy);
  EXPECT_EQ(PendingReports(), 0);
  EXPECT_THAT(LogLines(), Contains(HasSubstr("names no run; dropped it")));
}

TEST_P(SqliteUnreadable, TaskOutput_FailsItsRun_AndOtherReportsApply) {
  for (const std::string& value : BadJsonValues()) {
    SCOPED_TRACE(value);
    ResetBackend();
    Flow flow = Job();
    Deploy(flow);
    RunId healthy = Start(flow, J("1"));
    RunId bad = Start(flow, J("2"));
    ASSERT_THAT(FinishLeavingReports(flow), SizeIs(2));
    CorruptRun("UPDATE tasks SET output = " + value + " WHERE run_id = $run",
               bad);

    absl::StatusOr<int> applied = engine().ApplyStaleReports(100);

    ASSERT_TRUE(applied.ok()) << applied.status();
    EXPECT_EQ(*applied, 2);
    ExpectCompleted(healthy);
    ExpectFailedUnreadable(bad, "task output of task 0");
  }
}

TEST_P(SqliteUnreadable, RunInput_IsListed_AndFailsItsRunWhenNeeded) {
  Flow flow = Chain();
  Deploy(flow);
  RunId healthy = Start(flow, J(R"({"n":1})"));
  RunId bad = Start(flow, J(R"({"n":2})"));
  CorruptRun(
      "UPDATE runs SET input = CAST(X'22FF22' AS TEXT) "
      "WHERE run_id = $run",
      bad);

  absl::StatusOr<std::vector<RunRecord>> listed = engine().ListRuns("", 10);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_THAT(*listed, SizeIs(2));
  for (const RunRecord& run : *listed) {
    if (run.run_id == bad) {
      EXPECT_TRUE(run.input.is_null());
      EXPECT_THAT(run.unreadable, HasSubstr("run input"));
    } else {
      EXPECT_EQ(run.unreadable, "");
      EXPECT_EQ(run.input, J(R"({"n":1})"));
    }
  }
  EXPECT_THAT(View(bad).run.unreadable,
              HasSubstr("run input is not valid JSON"));

  // "first" reads its own stored input; "second" needs the run input.
  EXPECT_EQ(Drive(flow), 3);

  ExpectCompleted(healthy);
  ExpectFailedUnreadable(bad, "run input");
  EXPECT_EQ(StepOf(View(bad), "second").status, StepStatus::kFailed);
}

TEST_P(SqliteUnreadable, StepStatus_FailsItsRun_WhenAReportArrives) {
  Flow flow = Chain();
  Deploy(flow);
  RunId healthy = Start(flow, J("1"));
  RunId bad = Start(flow, J("2"));
  CorruptRun(
      "UPDATE step_states SET status = 'lost' WHERE run_id = $run "
      "AND step_index = 1",
      bad);

  Drive(flow);

  ExpectCompleted(healthy);
  ExpectFailedUnreadable(bad, "\"lost\"");
}

INSTANTIATE_TEST_SUITE_P(Sqlite, SqliteUnreadable, ::testing::Values("sqlite"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
