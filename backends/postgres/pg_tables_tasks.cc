// Tasks and the outbox.
#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "pg_queue_sql.h"
#include "pg_rows.h"
#include "pg_sql.h"
#include "pg_sql_tasks.h"
#include "pg_tables.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

absl::StatusOr<std::vector<OutboxReport>> ReadReports(const Result& result) {
  std::vector<OutboxReport> reports;
  reports.reserve(result.rows());
  for (int i = 0; i < result.rows(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(OutboxReport report, ReadReport(result.row(i)));
    reports.push_back(std::move(report));
  }
  return reports;
}

// Reads rows of (ord, then a task) into the entries their ords name.
absl::Status ReadTasksByOrd(const Result& result, Fields fields,
                            std::vector<std::optional<TaskRecord>>& tasks) {
  for (int i = 0; i < result.rows(); ++i) {
    const int64_t ord = result.row(i).Int();
    SLUICE_ASSIGN_OR_RETURN(TaskRecord task,
                            ReadTask(result.row(i, 1), fields));
    tasks[ord - 1] = std::move(task);
  }
  return absl::OkStatus();
}

// The compare-and-set updates one statement applies: distinct tasks, all
// with the same skip_if_locked.
struct UpdateGroup {
  bool skip_if_locked = false;
  std::vector<size_t> positions;  // into the call's updates
};

// Splits `updates` into groups that run in order: a task's second update in
// one call goes in a later group than its first, so it sees what the first
// wrote.
std::vector<UpdateGroup> GroupUpdates(std::span<const TaskUpdate> updates) {
  absl::flat_hash_map<TaskKey, int> seen;
  std::vector<UpdateGroup> groups;
  for (size_t i = 0; i < updates.size(); ++i) {
    const int round = seen[updates[i].task.key]++;
    const size_t group = 2 * round + (updates[i].skip_if_locked ? 1 : 0);
    if (groups.size() <= group) groups.resize(group + 1);
    groups[group].skip_if_locked = updates[i].skip_if_locked;
    groups[group].positions.push_back(i);
  }
  // Each statement locks its rows in the order sent: key order, which is
  // Postgres' order too (a run id compares as its 16 bytes).
  for (UpdateGroup& group : groups) {
    std::sort(group.positions.begin(), group.positions.end(),
              [&updates](size_t a, size_t b) {
                return updates[a].task.key < updates[b].task.key;
              });
  }
  return groups;
}

}  // namespace

absl::Status PgTables::InsertTasks(std::span<const TaskRecord> tasks) {
  if (tasks.empty()) return absl::OkStatus();
  Send(ForRows(sql::kInsertTasks.For(InsertedHere(tasks)), tasks.size()),
       TaskColumns(tasks), "InsertTasks");
  return absl::OkStatus();
}

Params PgTables::TaskColumns(std::span<const TaskRecord> tasks) {
  using enum ElementType;  // each as kInsertTasksTail casts it
  ArrayLiteral ids(kUuid), steps(kInt4), indexes(kInt4), flows(kText),
      statuses(kText), attempts(kInt4), errors(kText), queues(kText),
      messages(kInt8), queued(kTimestamptz), started(kTimestamptz),
      finished(kTimestamptz), stalls(kTimestamptz), requeued(kInt4),
      workers(kText), inputs(kJson), outputs(kJson), budgets(kInt4),
      cancels(kBool), options(kJson);
  for (const TaskRecord& task : tasks) {
    budgets.Int(task.budget_start);
    cancels.Bool(task.cancel_requested);
    options.OptionalJson(NullIsAbsent(task.options));
    ids.RunId(task.key.run_id);
    steps.Int(task.key.step_index);
    indexes.Int(task.key.task_index);
    flows.Text(task.flow_slug);
    statuses.Text(ToString(task.status));
    attempts.Int(task.attempts);
    errors.Text(task.error);
    queues.Text(task.queue_name);
    messages.Int(task.message_id);
    queued.Time(task.queued_at);
    started.OptionalTime(task.started_at);
    finished.OptionalTime(task.finished_at);
    stalls.OptionalTime(task.stall_at);
    requeued.Int(task.requeued_count);
    workers.Text(task.worker_id);
    inputs.Json(task.input);
    outputs.OptionalJson(task.output);
  }
  Params params;
  for (ArrayLiteral* column :
       {&ids,      &steps,    &indexes, &flows,    &statuses,
        &attempts, &errors,   &queues,  &messages, &queued,
        &started,  &finished, &stalls,  &requeued, &workers,
        &inputs,   &outputs,  &budgets, &cancels,  &options}) {
    params.Array(std::move(*column));
  }
  return params;
}

absl::StatusOr<std::vector<std::optional<TaskRecord>>> PgTables::GetTasks(
    std::span<const TaskKey> keys, Fields fields) {
  std::vector<std::optional<TaskRecord>> tasks(keys.size());
  if (keys.empty()) return tasks;
  ArrayLiteral ids, steps, indexes;
  for (const TaskKey& key : keys) {
    ids.RunId(key.run_id);
    steps.Int(key.step_index);
    indexes.Int(key.task_index);
  }
  SLUICE_ASSIGN_OR_RETURN(Result result, Query(sql::kGetTasks.For(fields),
                                               Params()
                                                   .Array(std::move(ids))
                                                   .Array(std::move(steps))
                                                   .Array(std::move(indexes)),
                                               "GetTasks"));
  SLUICE_RETURN_IF_ERROR(ReadTasksByOrd(result, fields, tasks));
  return tasks;
}

absl::StatusOr<std::vector<std::optional<TaskRecord>>>
PgTables::GetTasksByMessage(std::string_view queue,
                            std::span<const int64_t> message_ids,
                            Fields fields) {
  std::vector<std::optional<TaskRecord>> tasks(message_ids.size());
  if (message_ids.empty()) return tasks;
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(sql::kGetTasksByMessage.For(fields),
                           Params().Text(queue).Array(IntArray(message_ids)),
                           "GetTasksByMessage"));
  // Rows come in no particular order; a message id may be asked twice.
  absl::flat_hash_map<int64_t, std::vector<size_t>> positions;
  for (size_t i = 0; i < message_ids.size(); ++i) {
    positions[message_ids[i]].push_back(i);
  }
  for (int i = 0; i < result.rows(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(TaskRecord task, ReadTask(result.row(i), fields));
    auto it = positions.find(task.message_id);
    if (it == positions.end()) continue;
    for (size_t position : it->second) tasks[position] = task;
  }
  return tasks;
}

absl::StatusOr<std::vector<bool>> PgTables::UpdateTasks(
    std::span<const TaskUpdate> updates, const Control* then) {
  return UpdateTasksWith(updates, then, nullptr);
}

absl::StatusOr<std::vector<bool>> PgTables::UpdateTasksThenReadRuns(
    std::span<const TaskUpdate> updates, std::span<const RunId> run_ids,
    LockMode lock, Fields fields, internal::RunsWithSteps& read) {
  const RunReads reads{run_ids, lock, fields, &read};
  return UpdateTasksWith(updates, nullptr, &reads);
}

absl::StatusOr<std::vector<bool>> PgTables::UpdateTasksWith(
    std::span<const TaskUpdate> updates, const Control* then,
    const RunReads* reads) {
  std::vector<bool> applied(updates.size(), false);
  std::vector<UpdateGroup> groups = GroupUpdates(updates);
  std::erase_if(groups,
                [](const UpdateGroup& g) { return g.positions.empty(); });
  if (groups.empty() && then != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(
        *then->result, connection_.QueryControl(then->sql, {"Commit", {}}));
  }
  if (groups.empty() && reads != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(
        *reads->read,
        ReadRunsWithSteps(reads->run_ids, reads->lock, reads->fields));
  }
  for (const UpdateGroup& group : groups) {
    using enum ElementType;  // each as kUpdateTasksInput casts it
    ArrayLiteral ids(kUuid), steps(kInt4), indexes(kInt4), statuses(kText),
        attempts(kInt4), errors(kText), started(kTimestamptz),
        finished(kTimestamptz), stalls(kTimestamptz), requeued(kInt4),
        workers(kText), outputs(kJson), expected_statuses(kText),
        expected_attempts(kInt4), budgets(kInt4), cancels(kBool),
        message_ids(kInt8), expected_cancels(kBool);
    for (size_t i : group.positions) {
      const TaskRecord& task = updates[i].task;
      message_ids.Int(task.message_id);
      budgets.Int(task.budget_start);
      cancels.Bool(task.cancel_requested);
      ids.RunId(task.key.run_id);
      steps.Int(task.key.step_index);
      indexes.Int(task.key.task_index);
      statuses.Text(ToString(task.status));
      attempts.Int(task.attempts);
      errors.Text(task.error);
      started.OptionalTime(task.started_at);
      finished.OptionalTime(task.finished_at);
      stalls.OptionalTime(task.stall_at);
      requeued.Int(task.requeued_count);
      workers.Text(task.worker_id);
      outputs.OptionalJson(task.output);
      expected_statuses.Text(ToString(updates[i].expected_status));
      expected_attempts.Int(updates[i].expected_attempts);
      if (const std::optional<bool>& cancel =
              updates[i].expected_cancel_requested;
          cancel.has_value()) {
        expected_cancels.Bool(*cancel);
      } else {
        expected_cancels.Null();
      }
    }
    Params params;
    for (ArrayLiteral* column :
         {&ids, &steps, &indexes, &statuses, &attempts, &errors, &started,
          &finished, &stalls, &requeued, &workers, &outputs, &expected_statuses,
          &expected_attempts, &budgets, &cancels, &message_ids,
          &expected_cancels}) {
      params.Array(std::move(*column));
    }
    const std::string_view statement =
        ForRows(group.skip_if_locked ? sql::kUpdateTasksSkipLocked.view()
                                     : sql::kUpdateTasks.view(),
                group.positions.size());
    // The last group carries `then`, or the reads, in its round trip.
    const bool last = &group == &groups.back();
    Result result;
    if (last && reads != nullptr) {
      const Lead lead{{statement, params, {"UpdateTasks", {}}}, &result};
      SLUICE_ASSIGN_OR_RETURN(
          *reads->read,
          ReadRunsWithSteps(reads->run_ids, reads->lock, reads->fields, &lead));
    } else {
      SLUICE_ASSIGN_OR_RETURN(
          result, last && then != nullptr
                      ? connection_.QueryThenControl(
                            statement, params, {"UpdateTasks", {}}, then->sql,
                            {"Commit", {}}, *then->result)
                      : Query(statement, params, "UpdateTasks"));
    }
    for (int i = 0; i < result.rows(); ++i) {
      applied[group.positions[result.row(i).Int() - 1]] = true;
    }
  }
  return applied;
}

absl::StatusOr<std::vector<TaskRecord>> PgTables::GetUnfinishedTasks(
    const RunId& run_id, std::optional<int> step_index, Fields fields) {
  Params params;
  params.RunId(run_id);
  if (step_index.has_value()) params.Int(*step_index);
  const sql::ByFields& query = step_index.has_value()
                                   ? sql::kUnfinishedOfStepSql
                                   : sql::kUnfinishedOfRunSql;
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(query.For(fields), params, "GetUnfinishedTasks"));
  return ReadTasks(result, fields);
}

absl::StatusOr<std::vector<TaskRecord>> PgTables::ListTasks(
    const RunId& run_id) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kListTasks, Params().RunId(run_id), "ListTasks"));
  return ReadTasks(result, Fields::kAll);
}

absl::StatusOr<std::vector<StepOutputs>> PgTables::GetTaskOutputs(
    std::span<const StepRef> steps) {
  std::vector<StepOutputs> outputs(steps.size());
  if (steps.empty()) return outputs;
  ArrayLiteral ids, indexes;
  for (const StepRef& step : steps) {
    ids.RunId(step.run_id);
    indexes.Int(step.step_index);
  }
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kGetTaskOutputs,
            Params().Array(std::move(ids)).Array(std::move(indexes)),
            "GetTaskOutputs"));
  for (int i = 0; i < result.rows(); ++i) {
    Row row = result.row(i);
    const int64_t ord = row.Int();
    StepOutputs& step = outputs[ord - 1];
    std::optional<Json> output =
        row.OptionalJson(StrCat("task output of task ", step.outputs.size()));
    SLUICE_RETURN_IF_ERROR(row.status());
    std::string unreadable = row.TakeUnreadable();
    if (step.unreadable.empty()) step.unreadable = std::move(unreadable);
    step.outputs.push_back(std::move(output));
  }
  return outputs;
}

// Through the queues' messages: an index of tasks by stall_at would keep
// every claim and finish off the heap-only update path (decision 0064).
absl::StatusOr<std::vector<TaskRecord>> PgTables::FindStalledTasks(
    const StalledQuery& query, Fields fields) {
  SawTime(query.now);
  if (query.limit <= 0) return std::vector<TaskRecord>();
  SLUICE_ASSIGN_OR_RETURN(
      Result names, Query(sql::kQueueNames, Params(), "FindStalledTasks"));
  std::vector<std::string> queues;
  queues.reserve(names.rows());
  for (int i = 0; i < names.rows(); ++i) {
    queues.push_back(names.row(i).Text());
  }
  if (queues.empty()) return std::vector<TaskRecord>();
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(FindStalledSql(queues, fields),
                                Params()
                                    .Time(query.now)
                                    .Time(query.messages_visible_by)
                                    .Int(query.limit),
                                "FindStalledTasks"));
  return ReadTasks(result, fields);
}

// --- Outbox ----------------------------------------------------------------

absl::StatusOr<std::vector<int64_t>> PgTables::AppendReports(
    std::span<const OutboxReport> reports) {
  std::vector<int64_t> report_ids;
  if (reports.empty()) return report_ids;
  ArrayLiteral ids, steps, indexes, flows, kinds, created;
  for (const OutboxReport& report : reports) {
    ids.RunId(report.task.run_id);
    steps.Int(report.task.step_index);
    indexes.Int(report.task.task_index);
    flows.Text(report.flow_slug);
    kinds.Text(ToString(report.kind));
    created.Time(report.created_at);
  }
  Params params;
  for (ArrayLiteral* column :
       {&ids, &steps, &indexes, &flows, &kinds, &created}) {
    params.Array(std::move(*column));
  }
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kAppendReports, params, "AppendReports"));
  if (result.rows() != static_cast<int>(reports.size())) {
    return absl::InternalError(
        "postgres AppendReports: a report was not added");
  }
  // Rows were inserted in batch order, so the identity handed out
  // increasing ids in that order; RETURNING itself promises no order.
  for (int i = 0; i < result.rows(); ++i) {
    report_ids.push_back(result.row(i).Int());
  }
  std::sort(report_ids.begin(), report_ids.end());
  return report_ids;
}

absl::StatusOr<std::vector<OutboxReport>> PgTables::TakeReports(
    std::span<const int64_t> report_ids) {
  if (report_ids.empty()) return std::vector<OutboxReport>();
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kTakeReports, Params().Array(IntArray(report_ids)),
            "TakeReports"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<OutboxReport> reports,
                          ReadReports(result));
  std::sort(reports.begin(), reports.end(),
            [](const OutboxReport& a, const OutboxReport& b) {
              return a.report_id < b.report_id;
            });
  return reports;
}

absl::StatusOr<std::vector<OutboxReport>> PgTables::TakeStaleReports(
    absl::Time created_before, int limit) {
  if (limit <= 0) return std::vector<OutboxReport>();
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kTakeStaleReports, Params().Time(created_before).Int(limit),
            "TakeStaleReports"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<OutboxReport> reports,
                          ReadReports(result));
  std::sort(reports.begin(), reports.end(),
            [](const OutboxReport& a, const OutboxReport& b) {
              if (a.created_at != b.created_at) {
                return a.created_at < b.created_at;
              }
              return a.report_id < b.report_id;
            });
  return reports;
}

absl::StatusOr<int64_t> PgTables::CountReports() {
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kCountReports, Params(), "CountReports"));
  if (result.rows() != 1) {
    return absl::InternalError("postgres CountReports: no row");
  }
  return result.row(0).Int();
}

}  // namespace sluice::postgres_internal
