// What jobs added: task counts by state, the attempts ledger and the dedupe
// registry.
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

absl::StatusOr<QueueCounts> SqliteTables::CountTasks(std::string_view queue,
                                                     absl::Time now,
                                                     TaskCounts which) {
  const bool all = which == TaskCounts::kAll;
  SLUICE_ASSIGN_OR_RETURN(
      Statement count,
      Prepare(all ? sql::kCountTasks : sql::kCountTasksInFlight, "CountTasks"));
  count.BindText(1, queue);
  count.BindTime(2, now);
  SLUICE_ASSIGN_OR_RETURN(bool row, count.Step());
  if (!row) return absl::InternalError("sqlite CountTasks: no row");
  // sum() over no rows is NULL, which reads as 0.
  QueueCounts counts;
  counts.waiting = count.Int(0);
  counts.delayed = count.Int(1);
  counts.active = count.Int(2);
  if (!all) {
    counts.oldest_waiting_since = count.OptionalTime(3);
    return counts;
  }
  counts.completed = count.Int(3);
  counts.failed = count.Int(4);
  counts.cancelled = count.Int(5);
  counts.skipped = count.Int(6);
  counts.parked = count.Int(7);
  counts.oldest_waiting_since = count.OptionalTime(8);
  return counts;
}

// --- The attempts ledger ---------------------------------------------------

absl::Status SqliteTables::AppendAttempts(
    std::span<const AttemptRecord> attempts) {
  constexpr std::string_view kOperation = "AppendAttempts";
  if (attempts.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> seqs,
                          RequireRunSeqs(RunIdsOf(attempts,
                                                  [](const AttemptRecord& a) {
                                                    return a.task.run_id;
                                                  }),
                                         kOperation));
  BoundRows rows(10, attempts.size());
  for (size_t i = 0; i < attempts.size(); ++i) {
    const AttemptRecord& attempt = attempts[i];
    rows.AddInt(seqs[i]);
    AddRunId(rows, attempt.task.run_id);
    rows.AddInt(attempt.task.step_index)
        .AddInt(attempt.task.task_index)
        .AddInt(attempt.attempt)
        .AddText(attempt.worker_id)
        .AddOptionalTime(attempt.started_at)
        .AddTime(attempt.finished_at)
        .AddText(ToString(attempt.outcome))
        .AddText(attempt.error);
  }
  SLUICE_ASSIGN_OR_RETURN(Statement append,
                          Prepare(sql::kAppendAttempts, kOperation));
  append.BindRows(1, rows);
  const AttemptRecord& first = attempts[0];
  return DescribeDuplicate(
      append.Run(),
      attempts.size() == 1
          ? StrCat("attempt ", first.attempt, " of task ",
                   first.task.run_id.ToString(), "/", first.task.step_index,
                   "/", first.task.task_index)
          : "an attempt of the batch");
}

absl::StatusOr<std::vector<AttemptRecord>> SqliteTables::ListAttempts(
    const RunId& run_id) {
  std::vector<AttemptRecord> attempts;
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<int64_t>> seq,
                          FindRunSeqs({&run_id, 1}));
  if (!seq[0].has_value()) return attempts;
  SLUICE_ASSIGN_OR_RETURN(Statement list,
                          Prepare(sql::kListAttempts, "ListAttempts"));
  list.BindInt(1, *seq[0]);
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, list.Step());
    if (!row) return attempts;
    attempts.push_back(ReadAttempt(list));
  }
}

// --- The dedupe registry ---------------------------------------------------
// BEGIN IMMEDIATE already holds every row, so GetDedupe needs no lock.

absl::StatusOr<std::optional<DedupeRecord>> SqliteTables::GetDedupe(
    std::string_view flow_slug, std::string_view key) {
  SLUICE_ASSIGN_OR_RETURN(Statement get, Prepare(sql::kGetDedupe, "GetDedupe"));
  get.BindText(1, flow_slug);
  get.BindText(2, key);
  SLUICE_ASSIGN_OR_RETURN(bool found, get.Step());
  if (!found) return std::nullopt;
  return ReadDedupe(get);
}

absl::Status SqliteTables::PutDedupe(const DedupeRecord& entry) {
  SLUICE_ASSIGN_OR_RETURN(Statement put, Prepare(sql::kPutDedupe, "PutDedupe"));
  put.BindText(1, entry.flow_slug);
  put.BindText(2, entry.key);
  BindRunId(put, 3, entry.run_id);
  put.BindOptionalTime(4, entry.expires_at);
  return put.Run();
}

absl::StatusOr<bool> SqliteTables::DeleteDedupe(std::string_view flow_slug,
                                                std::string_view key,
                                                const RunId& run_id) {
  SLUICE_ASSIGN_OR_RETURN(Statement remove,
                          Prepare(sql::kDeleteDedupe, "DeleteDedupe"));
  remove.BindText(1, flow_slug);
  remove.BindText(2, key);
  BindRunId(remove, 3, run_id);
  SLUICE_RETURN_IF_ERROR(remove.Run());
  return remove.Changes() == 1;
}

absl::StatusOr<int> SqliteTables::DeleteExpiredDedupe(absl::Time now,
                                                      int limit) {
  if (limit <= 0) return 0;  // SQLite reads a negative LIMIT as "all"
  SLUICE_ASSIGN_OR_RETURN(Statement remove, Prepare(sql::kDeleteExpiredDedupe,
                                                    "DeleteExpiredDedupe"));
  remove.BindTime(1, now);
  remove.BindInt(2, limit);
  SLUICE_RETURN_IF_ERROR(remove.Run());
  return remove.Changes();
}

}  // namespace sluice::sqlite_internal
