// Queue pausing and listing, task counts, the attempts ledger and the
// dedupe registry.
#include <utility>

#include "pg_rows.h"
#include "pg_sql.h"
#include "pg_sql_tasks.h"
#include "pg_tables.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {

// --- Queues ----------------------------------------------------------------

absl::StatusOr<std::vector<QueueRecord>> PgTables::ListQueues() {
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kListQueues, Params(), "ListQueues"));
  std::vector<QueueRecord> queues;
  queues.reserve(result.rows());
  for (int i = 0; i < result.rows(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(QueueRecord queue, ReadQueue(result.row(i)));
    queues.push_back(std::move(queue));
  }
  return queues;
}

absl::Status PgTables::SetQueuePaused(std::string_view name, bool paused) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(sql::kSetQueuePaused,
                           Params().Text(name).Text(paused ? "true" : "false"),
                           "SetQueuePaused"));
  if (result.rows() == 0) {
    return absl::NotFoundError(
        StrCat("SetQueuePaused: queue \"", name, "\" is not registered"));
  }
  // Resumed: idle workers sleeping until a wake-up claim again.
  if (!paused) NotifyQueue(name);
  return absl::OkStatus();
}

absl::StatusOr<QueueCounts> PgTables::CountTasks(std::string_view queue,
                                                 absl::Time now,
                                                 TaskCounts which) {
  SawTime(now);
  QueueCounts counts;
  // A queue that does not exist has no tasks (its table can't be joined).
  SLUICE_ASSIGN_OR_RETURN(bool exists, QueueExists(queue));
  if (!exists) return counts;
  const QueueSql& statements = connection_.StatementsFor(queue);
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(which == TaskCounts::kAll ? statements.count_tasks
                                      : statements.count_in_flight,
            Params().Text(queue).Time(now), "CountTasks", queue));
  for (int i = 0; i < result.rows(); ++i) {
    Row row = result.row(i);
    const std::string status = row.Text();
    const int64_t delayed = row.Int();
    const int64_t total = row.Int();
    const std::optional<absl::Time> oldest_visible = row.OptionalTime();
    SLUICE_RETURN_IF_ERROR(row.status());
    absl::StatusOr<TaskStatus> parsed = ParseTaskStatus(status);
    // A status this build does not know counts nowhere.
    if (!parsed.ok()) continue;
    switch (*parsed) {
      case TaskStatus::kQueued:
        counts.delayed += delayed;
        counts.waiting += total - delayed;
        counts.oldest_waiting_since = oldest_visible;
        break;
      case TaskStatus::kStarted:
        counts.active += total;
        break;
      case TaskStatus::kCompleted:
        counts.completed += total;
        break;
      case TaskStatus::kFailed:
        counts.failed += total;
        break;
      case TaskStatus::kCancelled:
        counts.cancelled += total;
        break;
      case TaskStatus::kSkipped:
        counts.skipped += total;
        break;
      case TaskStatus::kWaiting:
        counts.parked += total;
        break;
    }
  }
  return counts;
}

// --- Attempts ledger -------------------------------------------------------

absl::Status PgTables::AppendAttempts(std::span<const AttemptRecord> attempts) {
  if (attempts.empty()) return absl::OkStatus();
  ArrayLiteral ids, steps, indexes, numbers, workers, started, finished,
      outcomes, errors;
  for (const AttemptRecord& attempt : attempts) {
    ids.RunId(attempt.task.run_id);
    steps.Int(attempt.task.step_index);
    indexes.Int(attempt.task.task_index);
    numbers.Int(attempt.attempt);
    workers.Text(attempt.worker_id);
    started.OptionalTime(attempt.started_at);
    finished.Time(attempt.finished_at);
    outcomes.Text(ToString(attempt.outcome));
    errors.Text(attempt.error);
  }
  Params params;
  for (ArrayLiteral* column : {&ids, &steps, &indexes, &numbers, &workers,
                               &started, &finished, &outcomes, &errors}) {
    params.Array(std::move(*column));
  }
  // A missing run fails the statement (kNotFound), a repeated attempt the
  // primary key (kAlreadyExists), at the next statement waited for.
  Send(sql::kAppendAttempts.view(), params, "AppendAttempts");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AttemptRecord>> PgTables::ListAttempts(
    const RunId& run_id) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kListAttempts, Params().RunId(run_id), "ListAttempts"));
  return ReadAttempts(result);
}

absl::StatusOr<std::vector<AttemptRecord>> PgTables::ReadAttempts(
    const Result& result) {
  std::vector<AttemptRecord> attempts;
  attempts.reserve(result.rows());
  for (int i = 0; i < result.rows(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(AttemptRecord attempt, ReadAttempt(result.row(i)));
    attempts.push_back(std::move(attempt));
  }
  return attempts;
}

// --- Dedupe registry -------------------------------------------------------

absl::StatusOr<std::optional<DedupeRecord>> PgTables::GetDedupe(
    std::string_view flow_slug, std::string_view key) {
  Send(sql::kLockDedupeKey, Params().Text(flow_slug).Text(key), "GetDedupe");
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kGetDedupe, Params().Text(flow_slug).Text(key), "GetDedupe"));
  if (result.rows() == 0) return std::nullopt;
  return ReadDedupe(result.row(0));
}

absl::Status PgTables::PutDedupe(const DedupeRecord& entry) {
  Send(sql::kPutDedupe,
       Params()
           .Text(entry.flow_slug)
           .Text(entry.key)
           .RunId(entry.run_id)
           .OptionalTime(entry.expires_at),
       "PutDedupe");
  return absl::OkStatus();
}

absl::StatusOr<bool> PgTables::DeleteDedupe(std::string_view flow_slug,
                                            std::string_view key,
                                            const RunId& run_id) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kDeleteDedupe,
            Params().Text(flow_slug).Text(key).RunId(run_id), "DeleteDedupe"));
  return result.rows() > 0;
}

absl::StatusOr<int> PgTables::DeleteExpiredDedupe(absl::Time now, int limit) {
  SawTime(now);
  if (limit <= 0) return 0;
  SLUICE_ASSIGN_OR_RETURN(Result result, Query(sql::kDeleteExpiredDedupe,
                                               Params().Time(now).Int(limit),
                                               "DeleteExpiredDedupe"));
  return result.rows();
}

}  // namespace sluice::postgres_internal
