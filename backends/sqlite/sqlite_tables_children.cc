// Fan-out: child links (in a parent's store) and child reports (in a child's
// store). See docs/decisions/0036-fan-out-storage.md.
//
// The transaction holds SQLite's write lock from its start, so nothing here
// can be skipped as "held by another transaction" (TakeStaleChildLinks takes
// every stale link) and a select followed by an update of the same rows sees
// no interleaved writer.
#include <string>
#include <utility>

#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_bound_rows.h"
#include "sqlite_rows.h"
#include "sqlite_sql_children.h"
#include "sqlite_status.h"
#include "sqlite_tables.h"

namespace sluice::sqlite_internal {
namespace {

std::string DescribeLink(const TaskKey& parent, int child_index) {
  return StrCat("child link ", child_index, " of task ",
                parent.run_id.ToString(), "/", parent.step_index, "/",
                parent.task_index);
}

void BindParent(Statement& statement, int64_t run_seq, const TaskKey& parent) {
  statement.BindInt(1, run_seq);
  statement.BindInt(2, parent.step_index);
  statement.BindInt(3, parent.task_index);
}

// Reads every remaining row of `query`, links from column `first` on.
absl::StatusOr<std::vector<ChildLinkRecord>> ReadLinks(Statement& query,
                                                       Fields fields,
                                                       int first = 0) {
  std::vector<ChildLinkRecord> links;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) return links;
    links.push_back(ReadChildLink(query, fields, first));
  }
}

}  // namespace

absl::Status SqliteTables::InsertChildLinks(
    std::span<const ChildLinkRecord> links) {
  constexpr std::string_view kOperation = "InsertChildLinks";
  if (links.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> seqs,
                          RequireRunSeqs(RunIdsOf(links,
                                                  [](const ChildLinkRecord& l) {
                                                    return l.parent.run_id;
                                                  }),
                                         kOperation));
  BoundRows parents(3, links.size());
  for (size_t i = 0; i < links.size(); ++i) {
    parents.AddInt(seqs[i])
        .AddInt(links[i].parent.step_index)
        .AddInt(links[i].parent.task_index);
  }
  {
    SLUICE_ASSIGN_OR_RETURN(Statement find,
                            Prepare(sql::kFindMissingParent, kOperation));
    find.BindRows(1, parents);
    SLUICE_ASSIGN_OR_RETURN(bool missing, find.Step());
    if (missing) {
      const TaskKey& parent = links[find.Int(0)].parent;
      return absl::NotFoundError(
          StrCat(kOperation, ": parent task ", parent.run_id.ToString(), "/",
                 parent.step_index, "/", parent.task_index, " does not exist"));
    }
  }
  BoundRows rows(13, links.size());
  for (size_t i = 0; i < links.size(); ++i) {
    const ChildLinkRecord& link = links[i];
    rows.AddInt(seqs[i]);
    AddRunId(rows, link.parent.run_id);
    rows.AddInt(link.parent.step_index)
        .AddInt(link.parent.task_index)
        .AddInt(link.child_index)
        .AddText(link.child_store);
    AddRunId(rows, link.child_run_id);
    rows.AddText(ToString(link.status))
        .AddText(link.error)
        .AddInt(link.cascaded ? 1 : 0)
        .AddTime(link.pending_since);
    AddOptionalJson(rows, link.output);
    AddJson(rows, link.spec);
  }
  SLUICE_ASSIGN_OR_RETURN(Statement insert,
                          Prepare(sql::kInsertChildLinks, kOperation));
  insert.BindRows(1, rows);
  return DescribeDuplicate(
      insert.Run(), links.size() == 1
                        ? DescribeLink(links[0].parent, links[0].child_index)
                        : "a child link of the batch");
}

absl::StatusOr<std::vector<ChildLinkRecord>> SqliteTables::GetChildLinks(
    const TaskKey& parent, Fields fields) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<int64_t>> seq,
                          FindRunSeqs({&parent.run_id, 1}));
  if (!seq[0].has_value()) return std::vector<ChildLinkRecord>();
  SLUICE_ASSIGN_OR_RETURN(
      Statement get,
      Prepare(fields == Fields::kAll ? sql::kGetChildLinksAll.view()
                                     : sql::kGetChildLinksNoPayloads.view(),
              "GetChildLinks"));
  BindParent(get, *seq[0], parent);
  return ReadLinks(get, fields);
}

absl::StatusOr<ChildCounts> SqliteTables::CountChildLinks(const TaskKey& parent,
                                                          int64_t up_to) {
  ChildCounts counts;
  if (up_to <= 0) return counts;  // SQLite reads LIMIT -1 as no limit
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<int64_t>> seq,
                          FindRunSeqs({&parent.run_id, 1}));
  if (!seq[0].has_value()) return counts;
  SLUICE_ASSIGN_OR_RETURN(Statement count,
                          Prepare(sql::kCountChildLinks, "CountChildLinks"));
  BindParent(count, *seq[0], parent);
  count.BindInt(4, up_to);
  SLUICE_ASSIGN_OR_RETURN(bool row, count.Step());
  if (!row) return absl::InternalError("sqlite CountChildLinks: no row");
  counts.pending = count.Int(0);
  counts.completed = count.Int(1);
  counts.failed = count.Int(2);
  counts.cancelled = count.Int(3);
  return counts;
}

absl::StatusOr<std::vector<bool>> SqliteTables::SettleChildLinks(
    std::span<const ChildSettlement> settlements) {
  constexpr std::string_view kOperation = "SettleChildLinks";
  std::vector<bool> applied(settlements.size(), false);
  if (settlements.empty()) return applied;
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<int64_t>> seqs,
      FindRunSeqs(RunIdsOf(settlements, [](const ChildSettlement& s) {
        return s.parent.run_id;
      })));
  SLUICE_ASSIGN_OR_RETURN(Statement settle,
                          Prepare(sql::kSettleChildLink, kOperation));
  for (size_t i = 0; i < settlements.size(); ++i) {
    const ChildSettlement& s = settlements[i];
    // A pending "outcome" would leave the link pending: nothing to apply.
    if (!seqs[i].has_value() || s.outcome == ChildStatus::kPending) continue;
    settle.Reset();
    BindParent(settle, *seqs[i], s.parent);
    settle.BindInt(4, s.child_index);
    settle.BindText(5, ToString(s.outcome));
    BindOptionalJson(settle, 6, s.output);
    settle.BindText(7, s.error);
    settle.BindInt(8, s.cascaded ? 1 : 0);
    SLUICE_RETURN_IF_ERROR(settle.Run());
    // A repeat of a link settled earlier in this call finds it settled.
    applied[i] = settle.Changes() == 1;
  }
  return applied;
}

absl::StatusOr<int64_t> SqliteTables::CancelPendingChildLinks(
    const TaskKey& parent, std::string_view error) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<int64_t>> seq,
                          FindRunSeqs({&parent.run_id, 1}));
  if (!seq[0].has_value()) return 0;
  SLUICE_ASSIGN_OR_RETURN(
      Statement cancel,
      Prepare(sql::kCancelPendingChildLinks, "CancelPendingChildLinks"));
  BindParent(cancel, *seq[0], parent);
  cancel.BindText(4, error);
  SLUICE_RETURN_IF_ERROR(cancel.Run());
  return cancel.Changes();
}

absl::StatusOr<std::vector<ChildLinkRecord>> SqliteTables::TakeStaleChildLinks(
    absl::Time pending_before, absl::Time now, int limit) {
  constexpr std::string_view kOperation = "TakeStaleChildLinks";
  std::vector<ChildLinkRecord> links;
  if (limit <= 0) return links;
  BoundRows keys(4);
  {
    SLUICE_ASSIGN_OR_RETURN(Statement find,
                            Prepare(sql::kFindStaleChildLinks, kOperation));
    find.BindTime(1, pending_before);
    find.BindInt(2, limit);
    while (true) {
      SLUICE_ASSIGN_OR_RETURN(bool row, find.Step());
      if (!row) break;
      ChildLinkRecord& link =
          links.emplace_back(ReadChildLink(find, Fields::kAll, /*first=*/1));
      keys.AddInt(find.Int(0))
          .AddInt(link.parent.step_index)
          .AddInt(link.parent.task_index)
          .AddInt(link.child_index);
    }
  }
  if (links.empty()) return links;
  SLUICE_ASSIGN_OR_RETURN(Statement rearm,
                          Prepare(sql::kRearmChildLinks, kOperation));
  rearm.BindTime(1, now);
  rearm.BindRows(2, keys);
  SLUICE_RETURN_IF_ERROR(rearm.Run());
  for (ChildLinkRecord& link : links) link.pending_since = now;
  return links;
}

absl::StatusOr<std::vector<ChildLinkRecord>>
SqliteTables::FindUncascadedChildLinks(int limit) {
  if (limit <= 0) return std::vector<ChildLinkRecord>();
  SLUICE_ASSIGN_OR_RETURN(
      Statement find,
      Prepare(sql::kFindUncascadedChildLinks, "FindUncascadedChildLinks"));
  find.BindInt(1, limit);
  return ReadLinks(find, Fields::kAll);
}

absl::Status SqliteTables::MarkChildLinksCascaded(
    std::span<const ChildLinkRecord> links) {
  if (links.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<int64_t>> seqs,
      FindRunSeqs(RunIdsOf(
          links, [](const ChildLinkRecord& l) { return l.parent.run_id; })));
  BoundRows keys(4, links.size());
  for (size_t i = 0; i < links.size(); ++i) {
    if (!seqs[i].has_value()) continue;  // unknown: skipped
    keys.AddInt(*seqs[i])
        .AddInt(links[i].parent.step_index)
        .AddInt(links[i].parent.task_index)
        .AddInt(links[i].child_index);
  }
  if (keys.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(Statement mark, Prepare(sql::kMarkChildLinksCascaded,
                                                  "MarkChildLinksCascaded"));
  mark.BindRows(1, keys);
  return mark.Run();
}

// --- Child reports -----------------------------------------------------------

absl::StatusOr<std::vector<int64_t>> SqliteTables::AppendChildReports(
    std::span<const ChildReport> reports) {
  constexpr std::string_view kOperation = "AppendChildReports";
  std::vector<int64_t> report_ids;
  if (reports.empty()) return report_ids;
  BoundRows rows(10, reports.size());
  for (const ChildReport& report : reports) {
    rows.AddText(report.parent_store);
    AddRunId(rows, report.parent.run_id);
    rows.AddInt(report.parent.step_index)
        .AddInt(report.parent.task_index)
        .AddInt(report.child_index);
    AddRunId(rows, report.child_run_id);
    rows.AddText(ToString(report.outcome))
        .AddText(report.error)
        .AddTime(report.created_at);
    AddOptionalJson(rows, report.output);
  }
  SLUICE_ASSIGN_OR_RETURN(Statement append,
                          Prepare(sql::kAppendChildReports, kOperation));
  append.BindRows(1, rows);
  SLUICE_RETURN_IF_ERROR(append.Run());
  // AUTOINCREMENT gave the rows, inserted in batch order while this
  // transaction holds the write lock, consecutive ids ending at the last.
  const int64_t count = static_cast<int64_t>(reports.size());
  if (append.Changes() != count) {
    return absl::InternalError(
        "sqlite AppendChildReports: a report was not added");
  }
  const int64_t first = append.LastInsertRowid() - count + 1;
  report_ids.reserve(reports.size());
  for (int64_t i = 0; i < count; ++i) report_ids.push_back(first + i);
  return report_ids;
}

absl::StatusOr<std::vector<ChildReport>> SqliteTables::PeekChildReports(
    int64_t after_id, int limit) {
  std::vector<ChildReport> reports;
  if (limit <= 0) return reports;
  SLUICE_ASSIGN_OR_RETURN(Statement peek,
                          Prepare(sql::kPeekChildReports, "PeekChildReports"));
  peek.BindInt(1, after_id);
  peek.BindInt(2, limit);
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, peek.Step());
    if (!row) return reports;
    reports.push_back(ReadChildReport(peek));
  }
}

absl::Status SqliteTables::DeleteChildReports(
    std::span<const int64_t> report_ids) {
  if (report_ids.empty()) return absl::OkStatus();
  BoundRows ids(1, report_ids.size());
  for (int64_t report_id : report_ids) ids.AddInt(report_id);
  SLUICE_ASSIGN_OR_RETURN(Statement remove, Prepare(sql::kDeleteChildReports,
                                                    "DeleteChildReports"));
  remove.BindRows(1, ids);
  return remove.Run();
}

absl::StatusOr<int64_t> SqliteTables::CountChildReports() {
  SLUICE_ASSIGN_OR_RETURN(
      Statement count, Prepare(sql::kCountChildReports, "CountChildReports"));
  SLUICE_ASSIGN_OR_RETURN(bool row, count.Step());
  if (!row) return absl::InternalError("sqlite CountChildReports: no row");
  return count.Int(0);
}

}  // namespace sluice::sqlite_internal
