// Listing runs (RunQuery) and finding them by external key.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sqlite_bound_rows.h"
#include "sqlite_rows.h"
#include "sqlite_sql.h"
#include "sqlite_tables.h"

namespace sluice::sqlite_internal {

bool sql::ListsOneStatusByIndex(const RunQuery& query) {
  if (query.statuses.size() != 1) return false;
  // By start across flows, runs_by_status holds exactly that order after
  // the status; by finish within one flow, runs_finished_by_flow_status
  // does. A rare status is then not found by walking every newer run.
  return query.order_by == RunQuery::OrderBy::kFinishedAt
             ? query.flow_slugs.size() == 1
             : query.flow_slugs.empty();
}

std::string sql::ListRunsSql(const RunQuery& query, Fields fields) {
  const bool by_finish = query.order_by == RunQuery::OrderBy::kFinishedAt;
  const bool one_flow = query.flow_slugs.size() == 1;
  const bool one_status = ListsOneStatusByIndex(query);
  const std::string_view column = by_finish ? "finished_at" : "started_at";
  // The start indexes hold (time, run_id) after their equality columns, so
  // the query's order is the index's own, forwards or backwards. The finish
  // indexes hold (finished_at, seq), the order retention needs; SQLite sorts
  // each group of equal times by run id as it walks.
  const std::string_view index =
      by_finish
          ? (one_status ? "runs_finished_by_flow_status" : "runs_finished")
      : one_flow   ? "runs_by_flow"
      : one_status ? "runs_by_status"
                   : "runs_by_start";
  std::vector<std::string> conditions;
  // Repeats runs_finished's WHERE clause, which lets SQLite use it.
  if (by_finish) conditions.emplace_back("finished_at IS NOT NULL");
  if (one_flow) {
    conditions.emplace_back("flow_slug = ?1");
  } else if (!query.flow_slugs.empty()) {
    conditions.emplace_back("flow_slug IN (SELECT c0 FROM sluice_rows(?1))");
  }
  if (one_status) {
    conditions.emplace_back("status = ?2");
  } else if (!query.statuses.empty()) {
    conditions.emplace_back("status IN (SELECT c0 FROM sluice_rows(?2))");
  }
  if (query.from.has_value()) conditions.push_back(StrCat(column, " >= ?3"));
  if (query.to.has_value()) conditions.push_back(StrCat(column, " < ?4"));
  const std::string_view direction = query.newest_first ? "DESC" : "ASC";
  if (query.after.has_value()) {
    // A row value compare: SQLite searches the index from the position.
    conditions.push_back(StrCat("(", column, ", run_id) ",
                                query.newest_first ? "<" : ">", " (?5, ?6)"));
  }
  std::string text =
      StrCat("SELECT ",
             fields == Fields::kAll ? kRunColumns.view()
                                    : std::string_view(kRunStateColumns),
             " FROM runs INDEXED BY ", index);
  if (!conditions.empty()) {
    StrAppend(&text, " WHERE ", absl::StrJoin(conditions, " AND "));
  }
  StrAppend(&text, " ORDER BY ", column, " ", direction, ", run_id ",
            direction);
  return text;
}

absl::StatusOr<std::vector<RunRecord>> SqliteTables::ListRuns(
    const RunQuery& query, Fields fields) {
  std::vector<RunRecord> runs;
  if (query.limit <= 0) return runs;
  SLUICE_ASSIGN_OR_RETURN(Statement list,
                          Prepare(sql::ListRunsSql(query, fields), "ListRuns"));
  // Bound rows must outlive the execution.
  BoundRows flows(1, query.flow_slugs.size());
  BoundRows statuses(1, query.statuses.size());
  if (query.flow_slugs.size() == 1) {
    list.BindText(1, query.flow_slugs[0]);
  } else if (!query.flow_slugs.empty()) {
    for (const std::string& flow_slug : query.flow_slugs) {
      flows.AddText(flow_slug);
    }
    list.BindRows(1, flows);
  }
  if (sql::ListsOneStatusByIndex(query)) {
    list.BindText(2, ToString(query.statuses[0]));
  } else if (!query.statuses.empty()) {
    for (RunStatus status : query.statuses) statuses.AddText(ToString(status));
    list.BindRows(2, statuses);
  }
  if (query.from.has_value()) list.BindTime(3, *query.from);
  if (query.to.has_value()) list.BindTime(4, *query.to);
  if (query.after.has_value()) {
    list.BindTime(5, query.after->time);
    BindRunId(list, 6, query.after->run_id);
  }
  // SQLite has no JSON containment operator: the metadata filter is applied
  // here, to the rows in the query's order, reading on until `limit` match.
  const bool filter_metadata = !query.metadata.is_null();
  while (runs.size() < static_cast<size_t>(query.limit)) {
    SLUICE_ASSIGN_OR_RETURN(bool row, list.Step());
    if (!row) break;
    SLUICE_ASSIGN_OR_RETURN(RunRecord run, ReadRun(list, fields));
    if (filter_metadata && !JsonContains(run.metadata, query.metadata)) {
      continue;
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

absl::StatusOr<std::vector<std::optional<RunRecord>>>
SqliteTables::FindRunsByKey(std::string_view flow_slug,
                            std::span<const std::string> external_keys,
                            Fields fields) {
  std::vector<std::optional<RunRecord>> runs(external_keys.size());
  if (external_keys.empty()) return runs;
  BoundRows keys(1, external_keys.size());
  for (const std::string& key : external_keys) keys.AddText(key);
  SLUICE_ASSIGN_OR_RETURN(
      Statement find,
      Prepare(sql::kFindRunsByKey.For(fields), "FindRunsByKey"));
  find.BindText(1, flow_slug);
  find.BindRows(2, keys);
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, find.Step());
    if (!row) return runs;
    SLUICE_ASSIGN_OR_RETURN(RunRecord run, ReadRun(find, fields, /*first=*/2));
    run_seqs_.emplace(run.run_id, find.Int(1));
    runs[find.Int(0)] = std::move(run);
  }
}

}  // namespace sluice::sqlite_internal
