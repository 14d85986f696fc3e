// Tasks and the outbox.
#include <algorithm>
#include <string>
#include <utility>

#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_rows.h"
#include "sqlite_sql.h"
#include "sqlite_status.h"
#include "sqlite_tables.h"

namespace sluice::sqlite_internal {
namespace {
void BindTaskKey(Statement& statement, const TaskKey& key) {
  BindRunId(statement, 1, key.run_id);
  statement.BindInt(2, key.step_index);
  statement.BindInt(3, key.task_index);
}

std::string DescribeTask(const TaskRecord& task) {
  return StrCat("task ", task.key.run_id.ToString(), "/", task.key.step_index,
                "/", task.key.task_index, " or its message ", task.queue_name,
                "#", task.message_id);
}

// Reads every remaining row of `query` as an outbox report.
absl::Status AppendReportRows(Statement& query,
                              std::vector<OutboxReport>& reports) {
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) return absl::OkStatus();
    SLUICE_ASSIGN_OR_RETURN(OutboxReport report, ReadReport(query));
    reports.push_back(std::move(report));
  }
}

}  // namespace

absl::StatusOr<std::vector<TaskRecord>> SqliteTables::QueryTasks(
    Statement& query, TaskFields fields) {
  std::vector<TaskRecord> tasks;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) return tasks;
    SLUICE_ASSIGN_OR_RETURN(TaskRecord task, ReadTask(query, fields));
    tasks.push_back(std::move(task));
  }
}

absl::Status SqliteTables::InsertTasks(std::span<const TaskRecord> tasks) {
  SLUICE_ASSIGN_OR_RETURN(Statement insert,
                          Prepare(sql::kInsertTask, "InsertTasks"));
  for (const TaskRecord& task : tasks) {
    BindTaskKey(insert, task.key);
    insert.BindText(4, task.flow_slug);
    insert.BindText(5, ToString(task.status));
    insert.BindInt(6, task.attempts);
    insert.BindText(7, task.error);
    insert.BindText(8, task.queue_name);
    insert.BindInt(9, task.message_id);
    insert.BindTime(10, task.queued_at);
    insert.BindOptionalTime(11, task.started_at);
    insert.BindOptionalTime(12, task.finished_at);
    insert.BindOptionalTime(13, task.stall_at);
    insert.BindInt(14, task.requeued_count);
    insert.BindText(15, task.worker_id);
    BindJson(insert, 16, task.input);
    BindOptionalJson(insert, 17, task.output);
    SLUICE_ASSIGN_OR_RETURN(int64_t run_seq,
                            RunSeqOf(task.key.run_id, "InsertTasks"));
    insert.BindInt(18, run_seq);
    if (absl::Status status = insert.Run(); !status.ok()) {
      if (status.code() != absl::StatusCode::kAlreadyExists) return status;
      return absl::AlreadyExistsError(
          StrCat(DescribeTask(task), " already exists"));
    }
    insert.Reset();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::optional<TaskRecord>>> SqliteTables::GetTasks(
    std::span<const TaskKey> keys, TaskFields fields) {
  SLUICE_ASSIGN_OR_RETURN(Statement get,
                          Prepare(sql::kGetTask.For(fields), "GetTasks"));
  std::vector<std::optional<TaskRecord>> tasks;
  tasks.reserve(keys.size());
  for (const TaskKey& key : keys) {
    BindTaskKey(get, key);
    SLUICE_ASSIGN_OR_RETURN(bool found, get.Step());
    if (found) {
      SLUICE_ASSIGN_OR_RETURN(TaskRecord task, ReadTask(get, fields));
      tasks.push_back(std::move(task));
    } else {
      tasks.push_back(std::nullopt);
    }
    get.Reset();
  }
  return tasks;
}

absl::StatusOr<std::vector<std::optional<TaskRecord>>>
SqliteTables::GetTasksByMessage(std::string_view queue,
                                std::span<const int64_t> message_ids,
                                TaskFields fields) {
  SLUICE_ASSIGN_OR_RETURN(
      Statement get,
      Prepare(sql::kGetTaskByMessage.For(fields), "GetTasksByMessage"));
  std::vector<std::optional<TaskRecord>> tasks;
  tasks.reserve(message_ids.size());
  for (int64_t message_id : message_ids) {
    get.BindText(1, queue);
    get.BindInt(2, message_id);
    SLUICE_ASSIGN_OR_RETURN(bool found, get.Step());
    if (found) {
      SLUICE_ASSIGN_OR_RETURN(TaskRecord task, ReadTask(get, fields));
      tasks.push_back(std::move(task));
    } else {
      tasks.push_back(std::nullopt);
    }
    get.Reset();
  }
  return tasks;
}

absl::StatusOr<std::vector<bool>> SqliteTables::UpdateTasks(
    std::span<const TaskUpdate> updates) {
  SLUICE_ASSIGN_OR_RETURN(Statement update,
                          Prepare(sql::kUpdateTask, "UpdateTasks"));
  std::vector<bool> applied;
  applied.reserve(updates.size());
  for (const TaskUpdate& change : updates) {
    const TaskRecord& task = change.task;
    BindTaskKey(update, task.key);
    update.BindText(4, ToString(task.status));
    update.BindInt(5, task.attempts);
    BindOptionalJson(update, 6, task.output);
    update.BindText(7, task.error);
    update.BindOptionalTime(8, task.started_at);
    update.BindOptionalTime(9, task.finished_at);
    update.BindOptionalTime(10, task.stall_at);
    update.BindInt(11, task.requeued_count);
    update.BindText(12, task.worker_id);
    update.BindText(13, ToString(change.expected_status));
    update.BindInt(14, change.expected_attempts);
    SLUICE_RETURN_IF_ERROR(update.Run());
    applied.push_back(update.Changes() == 1);
    update.Reset();
  }
  return applied;
}

absl::StatusOr<std::vector<TaskRecord>> SqliteTables::GetUnfinishedTasks(
    const RunId& run_id, std::optional<int> step_index, TaskFields fields) {
  const sql::TaskQuery& query =
      step_index.has_value() ? sql::kUnfinishedOfStep : sql::kUnfinishedOfRun;
  SLUICE_ASSIGN_OR_RETURN(Statement get,
                          Prepare(query.For(fields), "GetUnfinishedTasks"));
  BindRunId(get, 1, run_id);
  if (step_index.has_value()) get.BindInt(2, *step_index);
  return QueryTasks(get, fields);
}

absl::StatusOr<std::vector<TaskRecord>> SqliteTables::ListTasks(
    const RunId& run_id) {
  SLUICE_ASSIGN_OR_RETURN(Statement list,
                          Prepare(sql::kListTasks, "ListTasks"));
  BindRunId(list, 1, run_id);
  return QueryTasks(list, TaskFields::kAll);
}

absl::StatusOr<std::vector<std::optional<Json>>> SqliteTables::GetTaskOutputs(
    const RunId& run_id, int step_index) {
  SLUICE_ASSIGN_OR_RETURN(Statement get,
                          Prepare(sql::kGetTaskOutputs, "GetTaskOutputs"));
  BindRunId(get, 1, run_id);
  get.BindInt(2, step_index);
  std::vector<std::optional<Json>> outputs;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, get.Step());
    if (!row) return outputs;
    if (get.IsNull(0)) {
      outputs.push_back(std::nullopt);
      continue;
    }
    SLUICE_ASSIGN_OR_RETURN(Json output,
                            ParseStoredJson(get.Text(0), "task output"));
    outputs.push_back(std::move(output));
  }
}

absl::StatusOr<std::vector<TaskRecord>> SqliteTables::FindStalledTasks(
    absl::Time now, int limit) {
  if (limit <= 0) return std::vector<TaskRecord>();
  SLUICE_ASSIGN_OR_RETURN(Statement find,
                          Prepare(sql::kFindStalledTasks, "FindStalledTasks"));
  find.BindTime(1, now);
  find.BindInt(2, limit);
  return QueryTasks(find, TaskFields::kAll);
}

// --- Outbox ----------------------------------------------------------------

absl::StatusOr<std::vector<int64_t>> SqliteTables::AppendReports(
    std::span<const OutboxReport> reports) {
  SLUICE_ASSIGN_OR_RETURN(Statement append,
                          Prepare(sql::kAppendReport, "AppendReports"));
  std::vector<int64_t> report_ids;
  report_ids.reserve(reports.size());
  for (const OutboxReport& report : reports) {
    BindTaskKey(append, report.task);
    append.BindText(4, report.flow_slug);
    append.BindText(5, ToString(report.kind));
    append.BindTime(6, report.created_at);
    SLUICE_RETURN_IF_ERROR(append.Run());
    report_ids.push_back(append.LastInsertRowid());
    append.Reset();
  }
  return report_ids;
}

absl::StatusOr<std::vector<OutboxReport>> SqliteTables::TakeReports(
    std::span<const int64_t> report_ids) {
  std::vector<OutboxReport> reports;
  if (report_ids.empty()) return reports;
  SLUICE_ASSIGN_OR_RETURN(Statement take,
                          Prepare(sql::kTakeReports, "TakeReports"));
  BindIdList(take, 1, report_ids);
  SLUICE_RETURN_IF_ERROR(AppendReportRows(take, reports));
  // RETURNING promises no order.
  std::sort(reports.begin(), reports.end(),
            [](const OutboxReport& a, const OutboxReport& b) {
              return a.report_id < b.report_id;
            });
  return reports;
}

absl::StatusOr<std::vector<OutboxReport>> SqliteTables::TakeStaleReports(
    absl::Time created_before, int limit) {
  std::vector<OutboxReport> reports;
  if (limit <= 0) return reports;
  SLUICE_ASSIGN_OR_RETURN(Statement take,
                          Prepare(sql::kTakeStaleReports, "TakeStaleReports"));
  take.BindTime(1, created_before);
  take.BindInt(2, limit);
  SLUICE_RETURN_IF_ERROR(AppendReportRows(take, reports));
  // RETURNING promises no order.
  std::sort(reports.begin(), reports.end(),
            [](const OutboxReport& a, const OutboxReport& b) {
              if (a.created_at != b.created_at) {
                return a.created_at < b.created_at;
              }
              return a.report_id < b.report_id;
            });
  return reports;
}

absl::StatusOr<int64_t> SqliteTables::CountReports() {
  SLUICE_ASSIGN_OR_RETURN(Statement count,
                          Prepare(sql::kCountReports, "CountReports"));
  SLUICE_ASSIGN_OR_RETURN(bool row, count.Step());
  if (!row) return absl::InternalError("sqlite CountReports: no row");
  return count.Int(0);
}

}  // namespace sluice::sqlite_internal
