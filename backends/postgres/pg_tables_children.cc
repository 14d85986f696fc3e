// Fan-out: child links (in a parent's store) and child reports (in a child's
// store). See docs/decisions/0036-fan-out-storage.md and
// migrations/0005_children.sql.
#include <algorithm>
#include <tuple>
#include <utility>

#include "pg_rows.h"
#include "pg_sql_children.h"
#include "pg_tables.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

Params ParentParams(const TaskKey& parent) {
  return Params()
      .RunId(parent.run_id)
      .Int(parent.step_index)
      .Int(parent.task_index);
}

// Every row of `result` as a link, columns from `first`.
absl::StatusOr<std::vector<ChildLinkRecord>> ReadLinks(const Result& result,
                                                       Fields fields,
                                                       int first = 0) {
  std::vector<ChildLinkRecord> links;
  links.reserve(result.rows());
  for (int i = 0; i < result.rows(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(ChildLinkRecord link,
                            ReadChildLink(result.row(i, first), fields));
    links.push_back(std::move(link));
  }
  return links;
}

}  // namespace

absl::Status PgTables::InsertChildLinks(
    std::span<const ChildLinkRecord> links) {
  if (links.empty()) return absl::OkStatus();
  ArrayLiteral runs, steps, tasks, indexes, stores, children, statuses, errors,
      cascaded, since, outputs, specs;
  for (const ChildLinkRecord& link : links) {
    runs.RunId(link.parent.run_id);
    steps.Int(link.parent.step_index);
    tasks.Int(link.parent.task_index);
    indexes.Int(link.child_index);
    stores.Text(link.child_store);
    children.RunId(link.child_run_id);
    statuses.Text(ToString(link.status));
    errors.Text(link.error);
    cascaded.Bool(link.cascaded);
    since.Time(link.pending_since);
    outputs.OptionalJson(link.output);
    specs.Json(link.spec);
  }
  Params params;
  for (ArrayLiteral* column :
       {&runs, &steps, &tasks, &indexes, &stores, &children, &statuses, &errors,
        &cascaded, &since, &outputs, &specs}) {
    params.Array(std::move(*column));
  }
  // Pipelined: a missing parent task (23503) or a repeat (23505) surfaces
  // at the next call that waits, with its code (pg_tables.h).
  Send(sql::kInsertChildLinks, params, "InsertChildLinks");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ChildLinkRecord>> PgTables::GetChildLinks(
    const TaskKey& parent, Fields fields) {
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kGetChildLinks.For(fields),
                                ParentParams(parent), "GetChildLinks"));
  return ReadLinks(result, fields);
}

absl::StatusOr<ChildCounts> PgTables::CountChildLinks(const TaskKey& parent,
                                                      int64_t up_to) {
  if (up_to <= 0) return ChildCounts();  // LIMIT refuses a negative count
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(sql::kCountChildLinks,
                           ParentParams(parent).Int(up_to), "CountChildLinks"));
  if (result.rows() != 1) {
    return absl::InternalError("postgres CountChildLinks: no row");
  }
  Row row = result.row(0);
  ChildCounts counts;
  counts.pending = row.Int();
  counts.completed = row.Int();
  counts.failed = row.Int();
  counts.cancelled = row.Int();
  SLUICE_RETURN_IF_ERROR(row.status());
  return counts;
}

absl::StatusOr<std::vector<bool>> PgTables::SettleChildLinks(
    std::span<const ChildSettlement> settlements) {
  std::vector<bool> applied(settlements.size(), false);
  ArrayLiteral runs, steps, tasks, indexes, statuses, outputs, errors, cascaded;
  // Each settlement's position, by the ord it is sent with.
  std::vector<size_t> position_of;
  for (size_t i = 0; i < settlements.size(); ++i) {
    const ChildSettlement& s = settlements[i];
    // A pending "outcome" would leave the link pending: nothing to apply.
    if (s.outcome == ChildStatus::kPending) continue;
    runs.RunId(s.parent.run_id);
    steps.Int(s.parent.step_index);
    tasks.Int(s.parent.task_index);
    indexes.Int(s.child_index);
    statuses.Text(ToString(s.outcome));
    outputs.OptionalJson(s.output);
    errors.Text(s.error);
    cascaded.Bool(s.cascaded);
    position_of.push_back(i);
  }
  if (position_of.empty()) return applied;
  Params params;
  for (ArrayLiteral* column : {&runs, &steps, &tasks, &indexes, &statuses,
                               &outputs, &errors, &cascaded}) {
    params.Array(std::move(*column));
  }
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(sql::kSettleChildLinks, params, "SettleChildLinks"));
  for (int i = 0; i < result.rows(); ++i) {
    applied[position_of[result.row(i).Int() - 1]] = true;
  }
  return applied;
}

absl::StatusOr<int64_t> PgTables::CancelPendingChildLinks(
    const TaskKey& parent, std::string_view error) {
  SLUICE_ASSIGN_OR_RETURN(Result result, Query(sql::kCancelPendingChildLinks,
                                               ParentParams(parent).Text(error),
                                               "CancelPendingChildLinks"));
  if (result.rows() != 1) {
    return absl::InternalError("postgres CancelPendingChildLinks: no row");
  }
  return result.row(0).Int();
}

absl::StatusOr<std::vector<ChildLinkRecord>> PgTables::TakeStaleChildLinks(
    absl::Time pending_before, absl::Time now, int limit) {
  std::vector<ChildLinkRecord> links;
  if (limit <= 0) return links;
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(sql::kTakeStaleChildLinks,
                           Params().Time(pending_before).Time(now).Int(limit),
                           "TakeStaleChildLinks"));
  // RETURNING promises no order: put them back oldest first (by the
  // pending_since each had), then by key.
  std::vector<std::pair<absl::Time, ChildLinkRecord>> taken;
  taken.reserve(result.rows());
  for (int i = 0; i < result.rows(); ++i) {
    const absl::Time old_since = result.row(i).Time();
    SLUICE_ASSIGN_OR_RETURN(ChildLinkRecord link,
                            ReadChildLink(result.row(i, 1), Fields::kAll));
    taken.emplace_back(old_since, std::move(link));
  }
  auto key = [](const std::pair<absl::Time, ChildLinkRecord>& t) {
    return std::tie(t.first, t.second.parent.run_id, t.second.parent.step_index,
                    t.second.parent.task_index, t.second.child_index);
  };
  std::sort(taken.begin(), taken.end(),
            [&](const auto& a, const auto& b) { return key(a) < key(b); });
  links.reserve(taken.size());
  for (auto& [old_since, link] : taken) links.push_back(std::move(link));
  return links;
}

absl::StatusOr<std::vector<ChildLinkRecord>> PgTables::FindUncascadedChildLinks(
    int limit) {
  if (limit <= 0) return std::vector<ChildLinkRecord>();
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(sql::kFindUncascadedChildLinks, Params().Int(limit),
                           "FindUncascadedChildLinks"));
  return ReadLinks(result, Fields::kAll);
}

absl::Status PgTables::MarkChildLinksCascaded(
    std::span<const ChildLinkRecord> links) {
  if (links.empty()) return absl::OkStatus();
  ArrayLiteral runs, steps, tasks, indexes;
  for (const ChildLinkRecord& link : links) {
    runs.RunId(link.parent.run_id);
    steps.Int(link.parent.step_index);
    tasks.Int(link.parent.task_index);
    indexes.Int(link.child_index);
  }
  Send(sql::kMarkChildLinksCascaded,
       Params()
           .Array(std::move(runs))
           .Array(std::move(steps))
           .Array(std::move(tasks))
           .Array(std::move(indexes)),
       "MarkChildLinksCascaded");
  return absl::OkStatus();
}

// --- Child reports -----------------------------------------------------------

absl::StatusOr<std::vector<int64_t>> PgTables::AppendChildReports(
    std::span<const ChildReport> reports) {
  std::vector<int64_t> report_ids;
  if (reports.empty()) return report_ids;
  ArrayLiteral stores, runs, steps, tasks, indexes, children, outcomes, errors,
      created, outputs;
  for (const ChildReport& report : reports) {
    stores.Text(report.parent_store);
    runs.RunId(report.parent.run_id);
    steps.Int(report.parent.step_index);
    tasks.Int(report.parent.task_index);
    indexes.Int(report.child_index);
    children.RunId(report.child_run_id);
    outcomes.Text(ToString(report.outcome));
    errors.Text(report.error);
    created.Time(report.created_at);
    outputs.OptionalJson(report.output);
  }
  Params params;
  for (ArrayLiteral* column :
       {&stores, &runs, &steps, &tasks, &indexes, &children, &outcomes, &errors,
        &created, &outputs}) {
    params.Array(std::move(*column));
  }
  SLUICE_ASSIGN_OR_RETURN(Result result, Query(sql::kAppendChildReports, params,
                                               "AppendChildReports"));
  if (result.rows() != static_cast<int>(reports.size())) {
    return absl::InternalError(
        "postgres AppendChildReports: a report was not added");
  }
  // Inserted in batch order, so the identity handed out increasing ids in
  // that order; RETURNING itself promises no order.
  for (int i = 0; i < result.rows(); ++i) {
    report_ids.push_back(result.row(i).Int());
  }
  std::sort(report_ids.begin(), report_ids.end());
  return report_ids;
}

absl::StatusOr<std::vector<ChildReport>> PgTables::PeekChildReports(
    int64_t after_id, int limit) {
  std::vector<ChildReport> reports;
  if (limit <= 0) return reports;
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kPeekChildReports, Params().Int(after_id).Int(limit),
            "PeekChildReports"));
  reports.reserve(result.rows());
  for (int i = 0; i < result.rows(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(ChildReport report, ReadChildReport(result.row(i)));
    reports.push_back(std::move(report));
  }
  return reports;
}

absl::Status PgTables::DeleteChildReports(std::span<const int64_t> report_ids) {
  if (report_ids.empty()) return absl::OkStatus();
  Send(sql::kDeleteChildReports, Params().Array(IntArray(report_ids)),
       "DeleteChildReports");
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PgTables::CountChildReports() {
  SLUICE_ASSIGN_OR_RETURN(Result result, Query(sql::kCountChildReports,
                                               Params(), "CountChildReports"));
  if (result.rows() != 1) {
    return absl::InternalError("postgres CountChildReports: no row");
  }
  return result.row(0).Int();
}

}  // namespace sluice::postgres_internal
