// The Postgres backend's fan-out statements (child links and child
// reports), kept beside pg_sql.h under its rules: numbered parameters, one
// array per batch column read with unnest(...) WITH ORDINALITY. See
// docs/decisions/0036-fan-out-storage.md and migrations/0005_children.sql.
//
// Lock order: a transaction that settles links locks them (in key order)
// before it locks their parent task, as every writer of links does
// (effect-mq's rows-then-parent order).
#ifndef SLUICE_BACKENDS_POSTGRES_PG_SQL_CHILDREN_H_
#define SLUICE_BACKENDS_POSTGRES_PG_SQL_CHILDREN_H_

#include <string_view>

#include "pg_sql.h"

namespace sluice::postgres_internal::sql {

// Alias c: child_links. The payloads (output, spec) come last.
inline constexpr char kChildLinkState[] =
    "c.parent_run_id, c.parent_step, c.parent_task, c.child_index, "
    "c.child_store, c.child_run_id, c.status, c.error, c.cascaded, "
    "c.pending_since";
inline constexpr auto kChildLinkAll =
    Join(kChildLinkState, ", c.output, c.spec");
inline constexpr char kChildReport[] =
    "report_id, parent_store, parent_run_id, parent_step, parent_task, "
    "child_index, child_run_id, outcome, error, created_at, output";

// The foreign key to the parent task fails a link whose task does not exist
// (23503, kNotFound); the primary key a repeat (23505, kAlreadyExists).
inline constexpr std::string_view kInsertChildLinks =
    "INSERT INTO sluice.child_links (parent_run_id, parent_step, "
    "parent_task, child_index, child_store, child_run_id, status, error, "
    "cascaded, pending_since, output, spec) SELECT i.parent_run_id, "
    "i.parent_step, i.parent_task, i.child_index, i.child_store, "
    "i.child_run_id, i.status, i.error, i.cascaded, i.pending_since, "
    "i.output, i.spec FROM unnest($1::uuid[], $2::int[], $3::int[], "
    "$4::int[], $5::text[], $6::uuid[], $7::text[], $8::text[], $9::bool[], "
    "$10::timestamptz[], $11::json[], $12::json[]) WITH ORDINALITY AS "
    "i(parent_run_id, parent_step, parent_task, child_index, child_store, "
    "child_run_id, status, error, cascaded, pending_since, output, spec, "
    "ord) ORDER BY i.ord";

// $1..$3: the parent (run id, step, task). The primary key's order.
inline constexpr char kLinksOfParent[] =
    " FROM sluice.child_links AS c WHERE c.parent_run_id = $1::uuid "
    "AND c.parent_step = $2 AND c.parent_task = $3 ORDER BY c.child_index";
inline constexpr auto kGetChildLinksAll =
    Join("SELECT ", kChildLinkAll.text, kLinksOfParent);
inline constexpr auto kGetChildLinksState =
    Join("SELECT ", kChildLinkState, kLinksOfParent);
inline constexpr ByFields kGetChildLinks{kGetChildLinksAll,
                                         kGetChildLinksState};
// Per status, a seek into child_links_by_status (an index-only scan once
// vacuumed) and at most $4 entries: a parent's 10,000 pending links cost
// what one does.
inline constexpr char kCountLinksWith[] =
    "(SELECT count(*) FROM (SELECT FROM sluice.child_links WHERE "
    "parent_run_id = $1::uuid AND parent_step = $2 AND parent_task = $3 AND "
    "status = '";
inline constexpr char kCountLinksUpTo[] = "' LIMIT $4) AS l)";
inline constexpr auto kCountChildLinks =
    Join("SELECT ", kCountLinksWith, "pending", kCountLinksUpTo, ", ",
         kCountLinksWith, "completed", kCountLinksUpTo, ", ", kCountLinksWith,
         "failed", kCountLinksUpTo, ", ", kCountLinksWith, "cancelled",
         kCountLinksUpTo);

// One statement for the whole batch. `u` keeps only the first occurrence
// (lowest ord) of each link, sorted by key; `l` locks each still-pending
// link with a primary-key lookup, in that order, so concurrent batches lock
// shared links in one order; the UPDATE finds each by key (not by the ctid
// the lock returned, which after a wait names a version this statement's
// snapshot cannot see; see kUpdateTasks) and re-checks pending. Rows: (ord)
// of each settlement that applied.
inline constexpr std::string_view kSettleChildLinks =
    "WITH u AS (SELECT DISTINCT ON (s.parent_run_id, s.parent_step, "
    "s.parent_task, s.child_index) s.* FROM unnest($1::uuid[], $2::int[], "
    "$3::int[], $4::int[], $5::text[], $6::json[], $7::text[], $8::bool[]) "
    "WITH ORDINALITY AS s(parent_run_id, parent_step, parent_task, "
    "child_index, status, output, error, cascaded, ord) ORDER BY "
    "s.parent_run_id, s.parent_step, s.parent_task, s.child_index, s.ord), "
    "l AS MATERIALIZED (SELECT u.* FROM u CROSS JOIN LATERAL "
    "(SELECT 1 AS locked FROM sluice.child_links AS c WHERE "
    "c.parent_run_id = u.parent_run_id AND c.parent_step = u.parent_step "
    "AND c.parent_task = u.parent_task AND c.child_index = u.child_index "
    "AND c.status = 'pending' FOR NO KEY UPDATE OF c) AS k) "
    "UPDATE sluice.child_links AS c SET status = l.status, output = "
    "l.output, error = l.error, cascaded = l.cascaded FROM l "
    "WHERE c.parent_run_id = l.parent_run_id AND c.parent_step = "
    "l.parent_step AND c.parent_task = l.parent_task AND c.child_index = "
    "l.child_index AND c.parent_run_id = ANY($1::uuid[]) AND "
    "c.status = 'pending' RETURNING l.ord";
// $4 is the error. Rows: one, how many.
inline constexpr std::string_view kCancelPendingChildLinks =
    "WITH c AS (UPDATE sluice.child_links SET status = 'cancelled', "
    "cascaded = false, error = $4 WHERE parent_run_id = $1::uuid "
    "AND parent_step = $2 AND parent_task = $3 AND status = 'pending' "
    "RETURNING 1) SELECT count(*) FROM c";

// Up to $3 pending links older than $1, oldest first, from
// child_links_pending; links other transactions hold are skipped; their
// pending_since becomes $2 in the same statement. Rows: the old
// pending_since (RETURNING promises no order), then kChildLinkAll.
inline constexpr auto kTakeStaleChildLinks = Join(
    "WITH taken AS (SELECT parent_run_id, parent_step, parent_task, "
    "child_index, pending_since AS old_since FROM sluice.child_links "
    "WHERE status = 'pending' AND pending_since < $1::timestamptz "
    "ORDER BY pending_since, parent_run_id, parent_step, parent_task, "
    "child_index LIMIT $3 FOR UPDATE SKIP LOCKED) "
    "UPDATE sluice.child_links AS c SET pending_since = $2::timestamptz "
    "FROM taken WHERE c.parent_run_id = taken.parent_run_id "
    "AND c.parent_step = taken.parent_step AND c.parent_task = "
    "taken.parent_task AND c.child_index = taken.child_index "
    "RETURNING taken.old_since, ",
    kChildLinkAll.text);
// From child_links_uncascaded, in its (key) order. $1 is the limit.
inline constexpr auto kFindUncascadedChildLinks =
    Join("SELECT ", kChildLinkAll.text,
         " FROM sluice.child_links AS c WHERE c.status = 'cancelled' "
         "AND NOT c.cascaded ORDER BY c.parent_run_id, c.parent_step, "
         "c.parent_task, c.child_index LIMIT $1");
inline constexpr std::string_view kMarkChildLinksCascaded =
    "UPDATE sluice.child_links AS c SET cascaded = true FROM "
    "unnest($1::uuid[], $2::int[], $3::int[], $4::int[]) AS u(parent_run_id, "
    "parent_step, parent_task, child_index) WHERE c.parent_run_id = "
    "u.parent_run_id AND c.parent_step = u.parent_step AND c.parent_task = "
    "u.parent_task AND c.child_index = u.child_index AND NOT c.cascaded";
// Deleting runs ($1: their ids): their links as parents, before their
// tasks (the foreign key).
inline constexpr std::string_view kDeleteRunChildLinks =
    "DELETE FROM sluice.child_links WHERE parent_run_id = ANY($1::uuid[])";

// Rows: (report id), inserted in batch order.
inline constexpr std::string_view kAppendChildReports =
    "INSERT INTO sluice.child_reports (parent_store, parent_run_id, "
    "parent_step, parent_task, child_index, child_run_id, outcome, error, "
    "created_at, output) SELECT i.parent_store, i.parent_run_id, "
    "i.parent_step, i.parent_task, i.child_index, i.child_run_id, i.outcome, "
    "i.error, i.created_at, i.output FROM unnest($1::text[], $2::uuid[], "
    "$3::int[], $4::int[], $5::int[], $6::uuid[], $7::text[], $8::text[], "
    "$9::timestamptz[], $10::json[]) WITH ORDINALITY AS i(parent_store, "
    "parent_run_id, parent_step, parent_task, child_index, child_run_id, "
    "outcome, error, created_at, output, ord) ORDER BY i.ord "
    "RETURNING report_id";
// A range of the primary key: $1 after, $2 limit.
inline constexpr auto kPeekChildReports =
    Join("SELECT ", kChildReport,
         " FROM sluice.child_reports WHERE report_id > $1 ORDER BY report_id "
         "LIMIT $2");
inline constexpr std::string_view kDeleteChildReports =
    "DELETE FROM sluice.child_reports WHERE report_id = ANY($1::bigint[])";
inline constexpr std::string_view kCountChildReports =
    "SELECT count(*) FROM sluice.child_reports";

}  // namespace sluice::postgres_internal::sql

#endif  // SLUICE_BACKENDS_POSTGRES_PG_SQL_CHILDREN_H_
