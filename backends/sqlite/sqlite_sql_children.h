// The SQLite backend's fan-out statements (child links and child reports),
// kept beside sqlite_sql.h under the same rules: numbered parameters, batches
// from sluice_rows(), secondary indexes named with INDEXED BY and partial
// indexes' WHERE clauses repeated word for word. Their plans are checked in
// sqlite_backend_plans_test.cc.
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_SQL_CHILDREN_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_SQL_CHILDREN_H_

#include <string_view>

#include "sqlite_statement.h"

namespace sluice::sqlite_internal::sql {

// A link's columns without and with its payloads (output, spec).
inline constexpr char kChildLinkStateColumns[] =
    "parent_run_id, parent_step, parent_task, child_index, child_store, "
    "child_run_id, status, error, cascaded, pending_since";
inline constexpr auto kChildLinkColumns =
    JoinSql(kChildLinkStateColumns, ", output, spec");
inline constexpr char kChildReportColumns[] =
    "report_id, parent_store, parent_run_id, parent_step, parent_task, "
    "child_index, child_run_id, outcome, error, created_at, output";

// Rows: (parent run seq, parent step, parent task): the first (by key) whose
// task does not exist.
inline constexpr std::string_view kFindMissingParent =
    "SELECT j.key FROM sluice_rows(?1) AS j WHERE NOT EXISTS (SELECT 1 FROM "
    "tasks AS t WHERE t.run_seq = j.c0 AND t.step_index = j.c1 "
    "AND t.task_index = j.c2) ORDER BY j.key LIMIT 1";
// Rows: (parent run seq, then every column of kChildLinkColumns).
inline constexpr auto kInsertChildLinks =
    JoinSql("INSERT INTO child_links (parent_run_seq, ", kChildLinkColumns.text,
            ") SELECT c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12 "
            "FROM sluice_rows(?1)");

// ?1..?3: the parent (run seq, step, task). The primary key's order.
inline constexpr char kLinksOfParent[] =
    " FROM child_links WHERE parent_run_seq = ?1 AND parent_step = ?2 "
    "AND parent_task = ?3 ORDER BY child_index";
inline constexpr auto kGetChildLinksAll =
    JoinSql("SELECT ", kChildLinkColumns.text, kLinksOfParent);
inline constexpr auto kGetChildLinksNoPayloads =
    JoinSql("SELECT ", kChildLinkStateColumns, kLinksOfParent);
// Per status, a seek into child_links_by_status (it covers every column
// read) and at most ?4 entries: a parent's 10,000 pending links cost what
// one does.
inline constexpr char kCountLinksWith[] =
    "(SELECT count(*) FROM (SELECT 1 FROM child_links INDEXED BY "
    "child_links_by_status WHERE parent_run_seq = ?1 AND parent_step = ?2 "
    "AND parent_task = ?3 AND status = '";
inline constexpr char kCountLinksUpTo[] = "' LIMIT ?4))";
inline constexpr auto kCountChildLinks =
    JoinSql("SELECT ", kCountLinksWith, "pending", kCountLinksUpTo, ", ",
            kCountLinksWith, "completed", kCountLinksUpTo, ", ",
            kCountLinksWith, "failed", kCountLinksUpTo, ", ", kCountLinksWith,
            "cancelled", kCountLinksUpTo);

// One link per execution, by primary key, only while pending: a repeat in
// the same call finds it settled and changes nothing. ?5 status, ?6 output,
// ?7 error, ?8 cascaded.
inline constexpr std::string_view kSettleChildLink =
    "UPDATE child_links SET status = ?5, output = ?6, error = ?7, "
    "cascaded = ?8 WHERE parent_run_seq = ?1 AND parent_step = ?2 "
    "AND parent_task = ?3 AND child_index = ?4 AND status = 'pending'";
// ?4 is the error.
inline constexpr std::string_view kCancelPendingChildLinks =
    "UPDATE child_links SET status = 'cancelled', cascaded = 0, error = ?4 "
    "WHERE parent_run_seq = ?1 AND parent_step = ?2 AND parent_task = ?3 "
    "AND status = 'pending'";

// child_links_pending holds (pending_since, then the primary key), so this
// order is the index's own. ?1 pending before, ?2 limit.
inline constexpr auto kFindStaleChildLinks =
    JoinSql("SELECT parent_run_seq, ", kChildLinkColumns.text,
            " FROM child_links INDEXED BY child_links_pending "
            "WHERE status = 'pending' AND pending_since < ?1 "
            "ORDER BY pending_since, parent_run_seq, parent_step, "
            "parent_task, child_index LIMIT ?2");
// ?1 the new pending_since; rows: (parent run seq, step, task, child index).
inline constexpr std::string_view kRearmChildLinks =
    "UPDATE child_links SET pending_since = ?1 WHERE (parent_run_seq, "
    "parent_step, parent_task, child_index) IN (SELECT c0, c1, c2, c3 FROM "
    "sluice_rows(?2))";
// ?1 limit; in the index's (primary key) order.
inline constexpr auto kFindUncascadedChildLinks =
    JoinSql("SELECT ", kChildLinkColumns.text,
            " FROM child_links INDEXED BY child_links_uncascaded "
            "WHERE status = 'cancelled' AND cascaded = 0 "
            "ORDER BY parent_run_seq, parent_step, parent_task, child_index "
            "LIMIT ?1");
// Rows: (parent run seq, step, task, child index).
inline constexpr std::string_view kMarkChildLinksCascaded =
    "UPDATE child_links SET cascaded = 1 WHERE (parent_run_seq, parent_step, "
    "parent_task, child_index) IN (SELECT c0, c1, c2, c3 FROM "
    "sluice_rows(?1))";
// Deleting runs (rows: (seq, run id)): the links of their tasks, by the
// primary key's prefix.
inline constexpr std::string_view kDeleteRunChildLinks =
    "DELETE FROM child_links WHERE parent_run_seq IN (SELECT c0 FROM "
    "sluice_rows(?1))";

// Rows: kChildReportColumns but report_id. Inserted in batch order, so
// AUTOINCREMENT hands out consecutive ids in that order.
inline constexpr std::string_view kAppendChildReports =
    "INSERT INTO child_reports (parent_store, parent_run_id, parent_step, "
    "parent_task, child_index, child_run_id, outcome, error, created_at, "
    "output) SELECT c0, c1, c2, c3, c4, c5, c6, c7, c8, c9 "
    "FROM sluice_rows(?1) ORDER BY key";
// A range of the rowid: ?1 after, ?2 limit.
inline constexpr auto kPeekChildReports =
    JoinSql("SELECT ", kChildReportColumns,
            " FROM child_reports WHERE report_id > ?1 ORDER BY report_id "
            "LIMIT ?2");
// Rows: (report id).
inline constexpr std::string_view kDeleteChildReports =
    "DELETE FROM child_reports WHERE report_id IN (SELECT c0 FROM "
    "sluice_rows(?1))";
inline constexpr std::string_view kCountChildReports =
    "SELECT count(*) FROM child_reports";

}  // namespace sluice::sqlite_internal::sql

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_SQL_CHILDREN_H_
