// Tasks and the outbox.
#include <algorithm>
#include <string>
#include <utility>

#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_bound_rows.h"
#include "sqlite_rows.h"
#include "sqlite_sql.h"
#include "sqlite_status.h"
#include "sqlite_tables.h"

namespace sluice::sqlite_internal {
namespace {

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

// Reads every remaining row of a batch query, (key, then a task), into the
// entry its key names. With `run_seqs`, each row has its task's run seq
// after the key (kGetTasksByMessage), and it is noted there.
absl::Status ReadTasksByKey(
    Statement& query, Fields fields,
    std::vector<std::optional<TaskRecord>>& tasks,
    absl::flat_hash_map<RunId, int64_t>* run_seqs = nullptr) {
  const int first = run_seqs == nullptr ? 1 : 2;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) return absl::OkStatus();
    SLUICE_ASSIGN_OR_RETURN(TaskRecord task, ReadTask(query, fields, first));
    if (run_seqs != nullptr) run_seqs->emplace(task.key.run_id, query.Int(1));
    tasks[query.Int(0)] = std::move(task);
  }
}

}  // namespace

absl::StatusOr<std::vector<TaskRecord>> SqliteTables::QueryTasks(
    Statement& query, Fields fields) {
  std::vector<TaskRecord> tasks;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) return tasks;
    SLUICE_ASSIGN_OR_RETURN(TaskRecord task, ReadTask(query, fields));
    tasks.push_back(std::move(task));
  }
}

absl::Status SqliteTables::InsertTasks(std::span<const TaskRecord> tasks) {
  constexpr std::string_view kOperation = "InsertTasks";
  if (tasks.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<int64_t> seqs,
      RequireRunSeqs(
          RunIdsOf(tasks, [](const TaskRecord& t) { return t.key.run_id; }),
          kOperation));
  // A failed call leaves the transaction unusable (sluice/backend.h), so
  // the chunks before a failing one need no undoing here.
  const std::string what = tasks.size() == 1
                               ? DescribeTask(tasks[0])
                               : "a task of the batch, or its message,";
  return InsertInChunks(tasks.size(), [&](size_t begin, size_t end) {
    BoundRows rows(21, end - begin);
    for (size_t i = begin; i < end; ++i) {
      const TaskRecord& task = tasks[i];
      rows.AddInt(seqs[i]);
      AddRunId(rows, task.key.run_id);
      rows.AddInt(task.key.step_index)
          .AddInt(task.key.task_index)
          .AddText(task.flow_slug)
          .AddText(ToString(task.status))
          .AddInt(task.attempts)
          .AddText(task.error)
          .AddText(task.queue_name)
          .AddInt(task.message_id)
          .AddTime(task.queued_at)
          .AddOptionalTime(task.started_at)
          .AddOptionalTime(task.finished_at)
          .AddOptionalTime(task.stall_at)
          .AddInt(task.requeued_count)
          .AddText(task.worker_id)
          .AddInt(task.budget_start)
          .AddInt(task.cancel_requested ? 1 : 0);
      AddNullableJson(rows, task.options);
      AddJson(rows, task.input);
      AddOptionalJson(rows, task.output);
    }
    SLUICE_ASSIGN_OR_RETURN(Statement insert,
                            Prepare(sql::kInsertTasks, kOperation));
    insert.BindRows(1, rows);
    return DescribeDuplicate(insert.Run(), what);
  });
}

absl::StatusOr<std::vector<std::optional<TaskRecord>>> SqliteTables::GetTasks(
    std::span<const TaskKey> keys, Fields fields) {
  std::vector<std::optional<TaskRecord>> tasks(keys.size());
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<int64_t>> seqs,
      FindRunSeqs(RunIdsOf(keys, [](const TaskKey& k) { return k.run_id; })));
  BoundRows rows(3, keys.size());
  std::vector<size_t> position_of;  // by bound row
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!seqs[i].has_value()) continue;
    rows.AddInt(*seqs[i]).AddInt(keys[i].step_index).AddInt(keys[i].task_index);
    position_of.push_back(i);
  }
  if (rows.empty()) return tasks;
  std::vector<std::optional<TaskRecord>> found(position_of.size());
  SLUICE_ASSIGN_OR_RETURN(Statement get,
                          Prepare(sql::kGetTasks.For(fields), "GetTasks"));
  get.BindRows(1, rows);
  SLUICE_RETURN_IF_ERROR(ReadTasksByKey(get, fields, found));
  for (size_t row = 0; row < found.size(); ++row) {
    tasks[position_of[row]] = std::move(found[row]);
  }
  return tasks;
}

absl::StatusOr<std::vector<std::optional<TaskRecord>>>
SqliteTables::GetTasksByMessage(std::string_view queue,
                                std::span<const int64_t> message_ids,
                                Fields fields) {
  std::vector<std::optional<TaskRecord>> tasks(message_ids.size());
  if (message_ids.empty()) return tasks;
  BoundRows ids(1, message_ids.size());
  for (int64_t message_id : message_ids) ids.AddInt(message_id);
  SLUICE_ASSIGN_OR_RETURN(
      Statement get,
      Prepare(sql::kGetTasksByMessage.For(fields), "GetTasksByMessage"));
  get.BindText(1, queue);
  get.BindRows(2, ids);
  SLUICE_RETURN_IF_ERROR(ReadTasksByKey(get, fields, tasks, &run_seqs_));
  return tasks;
}

namespace {

// `u` outlives the execution (Applied), so its text is bound without a copy.
void BindUpdate(Statement& update, int64_t run_seq, const TaskUpdate& u) {
  const TaskRecord& task = u.task;
  update.BindInt(1, run_seq);
  update.BindInt(2, task.key.step_index);
  update.BindInt(3, task.key.task_index);
  update.BindBorrowedText(4, ToString(task.status));
  update.BindInt(5, task.attempts);
  update.BindBorrowedText(6, task.error);
  update.BindOptionalTime(7, task.started_at);
  update.BindOptionalTime(8, task.finished_at);
  update.BindOptionalTime(9, task.stall_at);
  update.BindInt(10, task.requeued_count);
  update.BindBorrowedText(11, task.worker_id);
  BindOptionalJson(update, 12, task.output);
  update.BindBorrowedText(13, ToString(u.expected_status));
  update.BindInt(14, u.expected_attempts);
  update.BindInt(15, task.budget_start);
  update.BindInt(16, task.cancel_requested ? 1 : 0);
  update.BindInt(17, task.message_id);
  if (u.expected_cancel_requested.has_value()) {
    update.BindInt(18, *u.expected_cancel_requested ? 1 : 0);
  } else {
    update.BindNull(18);
  }
}

// Runs `update` bound for `u`; true if it changed the task.
absl::StatusOr<bool> Applied(Statement& update, int64_t run_seq,
                             const TaskUpdate& u) {
  BindUpdate(update, run_seq, u);
  SLUICE_RETURN_IF_ERROR(update.Run());
  const bool applied = update.Changes() == 1;
  update.Reset();
  return applied;
}

}  // namespace

absl::StatusOr<std::vector<bool>> SqliteTables::UpdateTasks(
    std::span<const TaskUpdate> updates) {
  std::vector<bool> applied(updates.size(), false);
  if (updates.empty()) return applied;
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<int64_t>> seqs,
      FindRunSeqs(RunIdsOf(
          updates, [](const TaskUpdate& u) { return u.task.key.run_id; })));
  SLUICE_ASSIGN_OR_RETURN(Statement same_message,
                          Prepare(sql::kUpdateTaskSameMessage, "UpdateTasks"));
  for (size_t i = 0; i < updates.size(); ++i) {
    if (!seqs[i].has_value()) continue;  // no run, so no task to update
    SLUICE_ASSIGN_OR_RETURN(bool done,
                            Applied(same_message, *seqs[i], updates[i]));
    if (!done) {
      // A new message (RetryRun), or the compare-and-set failed.
      SLUICE_ASSIGN_OR_RETURN(Statement full,
                              Prepare(sql::kUpdateTask, "UpdateTasks"));
      SLUICE_ASSIGN_OR_RETURN(done, Applied(full, *seqs[i], updates[i]));
    }
    applied[i] = done;
  }
  return applied;
}

absl::StatusOr<std::vector<TaskRecord>> SqliteTables::GetUnfinishedTasks(
    const RunId& run_id, std::optional<int> step_index, Fields fields) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<int64_t>> seq,
                          FindRunSeqs({&run_id, 1}));
  if (!seq[0].has_value()) return std::vector<TaskRecord>();
  const sql::ByFields& query =
      step_index.has_value() ? sql::kUnfinishedOfStep : sql::kUnfinishedOfRun;
  SLUICE_ASSIGN_OR_RETURN(Statement get,
                          Prepare(query.For(fields), "GetUnfinishedTasks"));
  get.BindInt(1, *seq[0]);
  if (step_index.has_value()) get.BindInt(2, *step_index);
  return QueryTasks(get, fields);
}

absl::StatusOr<std::vector<TaskRecord>> SqliteTables::ListTasks(
    const RunId& run_id) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<int64_t>> seq,
                          FindRunSeqs({&run_id, 1}));
  if (!seq[0].has_value()) return std::vector<TaskRecord>();
  SLUICE_ASSIGN_OR_RETURN(Statement list,
                          Prepare(sql::kListTasks, "ListTasks"));
  list.BindInt(1, *seq[0]);
  return QueryTasks(list, Fields::kAll);
}

absl::StatusOr<std::vector<StepOutputs>> SqliteTables::GetTaskOutputs(
    std::span<const StepRef> steps) {
  std::vector<StepOutputs> outputs(steps.size());
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<int64_t>> seqs,
      FindRunSeqs(RunIdsOf(steps, [](const StepRef& s) { return s.run_id; })));
  BoundRows rows(2, steps.size());
  std::vector<size_t> position_of;  // by bound row
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!seqs[i].has_value()) continue;
    rows.AddInt(*seqs[i]).AddInt(steps[i].step_index);
    position_of.push_back(i);
  }
  if (rows.empty()) return outputs;
  SLUICE_ASSIGN_OR_RETURN(Statement get,
                          Prepare(sql::kGetTaskOutputs, "GetTaskOutputs"));
  get.BindRows(1, rows);
  // Each output goes straight to its step as it is read, so a map's
  // outputs are held once. The join walks the batch, then each step's tasks
  // by primary key, so they come in task order; `task_indexes` only checks
  // that, and puts a step back in order if a plan ever walks it otherwise.
  std::vector<std::vector<int32_t>> task_indexes(steps.size());
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, get.Step());
    if (!row) break;
    const size_t position = position_of[get.Int(0)];
    const int64_t task_index = get.Int(1);
    StepOutputs& step = outputs[position];
    task_indexes[position].push_back(static_cast<int32_t>(task_index));
    std::optional<Json>& output = step.outputs.emplace_back();
    if (get.IsNull(2)) continue;
    absl::StatusOr<Json> value = ParseStoredJson(
        get.Text(2), StrCat("task output of task ", task_index));
    if (value.ok()) {
      output = std::move(*value);
    } else if (step.unreadable.empty()) {
      step.unreadable = ToStd(value.status().message());
    }
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    SortByTaskIndex(task_indexes[i], outputs[i].outputs);
  }
  return outputs;
}

absl::StatusOr<std::vector<TaskRecord>> SqliteTables::FindStalledTasks(
    const StalledQuery& query, Fields fields) {
  if (query.limit <= 0) return std::vector<TaskRecord>();
  SLUICE_ASSIGN_OR_RETURN(
      Statement find,
      Prepare(sql::kFindStalledTasks.For(fields), "FindStalledTasks"));
  find.BindTime(1, query.now);
  find.BindInt(2, query.limit);
  find.BindTime(3, query.messages_visible_by);
  return QueryTasks(find, fields);
}

// --- Outbox ----------------------------------------------------------------

absl::StatusOr<std::vector<int64_t>> SqliteTables::AppendReports(
    std::span<const OutboxReport> reports) {
  std::vector<int64_t> report_ids;
  if (reports.empty()) return report_ids;
  BoundRows rows(6, reports.size());
  for (const OutboxReport& report : reports) {
    AddRunId(rows, report.task.run_id);
    rows.AddInt(report.task.step_index)
        .AddInt(report.task.task_index)
        .AddText(report.flow_slug)
        .AddText(ToString(report.kind))
        .AddTime(report.created_at);
  }
  SLUICE_ASSIGN_OR_RETURN(Statement append,
                          Prepare(sql::kAppendReports, "AppendReports"));
  append.BindRows(1, rows);
  SLUICE_RETURN_IF_ERROR(append.Run());
  // AUTOINCREMENT gave the rows, inserted in batch order while this
  // transaction holds the write lock, consecutive ids ending at the last.
  const int64_t count = static_cast<int64_t>(reports.size());
  if (append.Changes() != count) {
    return absl::InternalError("sqlite AppendReports: a report was not added");
  }
  const int64_t first = append.LastInsertRowid() - count + 1;
  report_ids.reserve(reports.size());
  for (int64_t i = 0; i < count; ++i) report_ids.push_back(first + i);
  return report_ids;
}

absl::StatusOr<std::vector<OutboxReport>> SqliteTables::TakeReports(
    std::span<const int64_t> report_ids) {
  std::vector<OutboxReport> reports;
  if (report_ids.empty()) return reports;
  BoundRows ids(1, report_ids.size());
  for (int64_t report_id : report_ids) ids.AddInt(report_id);
  SLUICE_ASSIGN_OR_RETURN(Statement take,
                          Prepare(sql::kTakeReports, "TakeReports"));
  take.BindRows(1, ids);
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
