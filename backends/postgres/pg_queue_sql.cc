#include "pg_queue_sql.h"

#include "absl/strings/ascii.h"
#include "pg_sql.h"
#include "pg_sql_tasks.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {

namespace {

// `text` between two `quote`s, each `quote` inside it doubled: SQL's form of
// an identifier (") and of a string literal (').
std::string Quoted(std::string_view text, char quote) {
  std::string quoted(1, quote);
  for (char c : text) {
    if (c == quote) quoted.push_back(quote);
    quoted.push_back(c);
  }
  quoted.push_back(quote);
  return quoted;
}

// The table of `queue`'s messages, live ("q_") or archived ("a_").
std::string QueueTable(std::string_view prefix, std::string_view queue) {
  return StrCat(
      "pgmq.",
      Quoted(StrCat(prefix, absl::AsciiStrToLower(ToAbsl(queue))), '"'));
}

// A message's claim priority and FIFO number, from `headers` of the row
// `alias` names ("" or "q.").
std::string PriorityOf(std::string_view alias) {
  return StrCat("((", alias, "headers ->> 'sluice_priority')::integer)");
}
std::string SeqOf(std::string_view alias) {
  return StrCat("((", alias, "headers ->> 'sluice_seq')::bigint)");
}

// pgmq's send of a batch, its parameters numbered from `first`: enqueued_at,
// visible_at[], message text[] (JSON), priority[]. Rows: (msg_id).
std::string Send(std::string_view live, int first) {
  return StrCat("INSERT INTO ", live,
                " (enqueued_at, vt, message, headers) SELECT $", first,
                "::timestamptz, m.vt, m.message::jsonb, jsonb_build_object("
                "'sluice_priority', m.priority, 'sluice_seq', "
                "nextval('sluice.message_seq')) FROM unnest($",
                first + 1, "::timestamptz[], $", first + 2, "::text[], $",
                first + 3,
                "::int[]) WITH ORDINALITY AS m(vt, message, priority, ord) "
                "ORDER BY m.ord RETURNING msg_id");
}

// The predicates of a queue's three partial indexes (migration 0017), as
// statements must spell them for the planner to use each index: every
// message is in exactly one. Ready: never read, sent visible; delayed:
// never read, sent for later; read: claimed at least once.
constexpr std::string_view kReady = "read_ct = 0 AND vt <= enqueued_at";
constexpr std::string_view kDelayed = "read_ct = 0 AND vt > enqueued_at";
constexpr std::string_view kRead = "read_ct > 0";

// The most due delayed or read messages one claim considers, the earliest
// due first (decision 0079): a storm of due retries or of jobs scheduled for
// one moment costs each claim this many lookups, not a sort of them all.
constexpr int kDueConsidered = 10000;

// The messages visible at $`now` that a claim takes, at most $`limit`,
// locked (skipping those another transaction holds), in claim order:
// (msg_id, priority, seq). Migration 0017 puts each message in one of three
// partial indexes, and each has one branch here: the ready ones walked in
// claim order; the delayed and the read ones that are due (usually none),
// up to kDueConsidered of each, the earliest due first, then sorted. Every
// branch has one index that serves it, so a generic plan serves them all.
// A ready message was sent visible, so its branch needs no time. A due
// branch's time is repeated where it locks, so the lock rechecks it on the
// latest row (a message claimed meanwhile is hidden). A paused queue (the
// registry row named $`name`) yields nothing: a one-time filter in each branch.
std::string ChooseMessages(std::string_view live, int now, int limit,
                           int name) {
  // Claim order: the ready index's, kept in pgmq's `headers` (migration
  // 0003).
  const std::string order =
      StrCat(PriorityOf(""), " DESC NULLS LAST, ", SeqOf(""));
  const auto branch = [&](std::string_view where) {
    return StrCat("SELECT * FROM (SELECT msg_id, ", PriorityOf(""),
                  " AS claim_priority, ", SeqOf(""), " AS claim_seq FROM ",
                  live, " WHERE ", where,
                  " AND NOT EXISTS (SELECT 1 FROM sluice.queues WHERE name = $",
                  name, " AND paused) ORDER BY ", order, " LIMIT $", limit,
                  " FOR UPDATE SKIP LOCKED)");
  };
  // The lookup by id names only the time: the index's condition there would
  // let a plan read the whole due range again instead of the key.
  const std::string visible = StrCat("vt <= $", now, "::timestamptz");
  const auto due = [&](std::string_view condition) {
    return branch(StrCat("msg_id = ANY(ARRAY(SELECT msg_id FROM ", live,
                         " WHERE ", condition, " AND ", visible,
                         " ORDER BY vt LIMIT ", kDueConsidered, ")) AND ",
                         visible));
  };
  return StrCat(
      "SELECT msg_id, claim_priority, claim_seq FROM (", branch(kReady),
      " AS ready UNION ALL ", due(kDelayed), " AS delayed UNION ALL ",
      due(kRead),
      " AS read) AS chosen ORDER BY claim_priority DESC NULLS LAST, claim_seq, "
      "msg_id LIMIT $",
      limit);
}

// QueueSql::claim. `m` is the messages it chooses and locks, as a read
// would (ChooseMessages); `j` pairs each with its task and says whether the
// engine would simply claim it (a timeout override is found by its key in the
// stored text, which is never parsed, so a row the engine can't read can't fail
// the statement). Every write is conditional on all of `j` being plain: an
// unplain read changes nothing, and the engine claims that batch itself. `l` is
// the claim's compare-and-set: it locks the tasks still queued in the attempt
// `j` read (the lock rechecks that on the latest row), skipping (never waiting
// for) those another transaction holds, and names each row version it locked.
// `c` updates exactly those versions. A task another transaction changed
// after the statement began is then not updated, since the statement cannot
// see that version: the claim loses it, as it loses a held one. The
// messages are then hidden for the lease, or briefly where the task was
// lost. The statement keeps a generic plan, made once per connection and
// perhaps on empty tables, so every scan of a table is by key: each
// `= ANY(...)` and the lateral lookups (the LIMIT keeps the planner from
// flattening the first into a join that filters the queue's tasks, and the
// row lock keeps it from flattening the second: without the lock, a plan
// made on a small table walked every task for each message) are
// index or TID conditions; and what passes between the parts is arrays,
// not joins (a generic plan joins CTEs in nested loops, which once
// compared every claimed task with every locked one).
std::string ClaimSql(std::string_view live) {
  return StrCat(
      sql::kGenericPlan, "WITH m AS MATERIALIZED (",
      ChooseMessages(live, 1, 9, 8),
      "), "
      "s AS (SELECT * FROM unnest($3::text[], $4::int[], $5::timestamptz[], "
      "$6::timestamptz[]) AS s(flow_slug, step_index, stall_at, vt)), "
      "j AS MATERIALIZED (SELECT m.msg_id, m.claim_priority, m.claim_seq, "
      "coalesce(t.status = 'queued' AND s.flow_slug IS NOT NULL AND "
      "strpos(coalesce(t.options::text, ''), '\"timeout_ms\"') = 0, false) "
      "AS plain, t.* FROM m LEFT JOIN LATERAL (SELECT * FROM sluice.tasks "
      "AS t WHERE t.queue_name = $8 AND t.message_id = m.msg_id LIMIT 1) AS "
      "t ON true LEFT JOIN s ON "
      "s.flow_slug = t.flow_slug AND s.step_index = t.step_index), "
      "go AS (SELECT bool_and(plain) AS ok FROM j), "
      "l AS MATERIALIZED (SELECT x.task FROM j CROSS JOIN LATERAL (SELECT "
      "t.ctid AS task FROM sluice.tasks AS t WHERE t.run_id = j.run_id AND "
      "t.step_index = j.step_index AND t.task_index = j.task_index AND "
      "t.status = 'queued' AND t.attempts = j.attempts FOR NO KEY UPDATE OF "
      "t SKIP LOCKED) AS x WHERE (SELECT ok FROM go)), "
      "c AS (UPDATE sluice.tasks AS t SET status = 'started', attempts = "
      "t.attempts + 1, started_at = $1::timestamptz, finished_at = NULL, "
      "stall_at = (SELECT s.stall_at FROM s WHERE s.flow_slug = t.flow_slug "
      "AND s.step_index = t.step_index LIMIT 1), worker_id = $7, "
      "output = NULL, cancel_requested = false WHERE t.ctid = "
      "ANY(ARRAY(SELECT task FROM l)) RETURNING t.message_id AS msg_id, "
      "(SELECT s.vt FROM s WHERE s.flow_slug = t.flow_slug AND s.step_index "
      "= t.step_index LIMIT 1) AS lease_vt), "
      "q AS (UPDATE ",
      live,
      " AS q SET vt = coalesce((ARRAY(SELECT lease_vt FROM c ORDER BY "
      "msg_id))[array_position(ARRAY(SELECT msg_id FROM c ORDER BY msg_id), "
      "q.msg_id)], $2::timestamptz), read_ct = q.read_ct + 1 WHERE q.msg_id "
      "= ANY(ARRAY(SELECT msg_id FROM m)) AND (SELECT ok FROM go)) "
      "SELECT (SELECT ok FROM go), t.msg_id = ANY(ARRAY(SELECT msg_id FROM "
      "c)), t.msg_id, ",
      sql::kTaskAll.view(),
      " FROM j AS t ORDER BY "
      "t.claim_priority DESC NULLS LAST, t.claim_seq NULLS LAST, t.msg_id");
}

}  // namespace

std::string QuoteIdentifier(std::string_view name) { return Quoted(name, '"'); }

std::string FindStalledSql(std::span<const std::string> queues, Fields fields) {
  std::string sql = "WITH m (queue_name, msg_id) AS (";
  for (size_t i = 0; i < queues.size(); ++i) {
    StrAppend(&sql, i == 0 ? "" : " UNION ALL ", "SELECT ",
              Quoted(queues[i], '\''), "::text, msg_id FROM ",
              QueueTable("q_", queues[i]), " WHERE ", kRead,
              " AND vt <= $2::timestamptz");
  }
  // Ties go by run insertion, then key, like the other backends.
  StrAppend(&sql, ") SELECT ",
            fields == Fields::kAll ? sql::kTaskAll.view()
                                   : std::string_view(sql::kTaskState),
            " FROM m JOIN sluice.tasks AS t ON t.queue_name = m.queue_name "
            "AND t.message_id = m.msg_id JOIN sluice.runs AS r ON r.run_id = "
            "t.run_id WHERE t.status = 'started' AND t.stall_at < "
            "$1::timestamptz ORDER BY t.stall_at, r.insert_seq, t.step_index, "
            "t.task_index LIMIT $3 FOR NO KEY UPDATE OF t SKIP LOCKED");
  return sql;
}

std::string QueueChannel(std::string_view queue) {
  return StrCat("sluice_q_", queue);
}

QueueSql::QueueSql(std::string_view queue) {
  const std::string live = QueueTable("q_", queue);
  const std::string archived = QueueTable("a_", queue);
  // Message columns: msg_id, read_ct, enqueued_at, vt, priority.
  const std::string columns =
      StrCat("q.msg_id, q.read_ct, q.enqueued_at, q.vt, coalesce(",
             PriorityOf("q."), ", 0)");
  // The bodies come as text[] and are cast one by one: parsing a jsonb[]
  // literal took twice as long in the server (100,000 bodies: 1.9 s
  // against 0.9 s; docs/decisions/0047).
  send = StrCat(sql::kGenericPlan, Send(live, 1));
  // The messages are inserted in send order, so the queue's identity hands
  // out increasing ids in it: numbering them by id pairs each with its
  // task.
  const std::string sent_then_tasks = StrCat(
      "sent AS (", Send(live, 21),
      "), ids AS (SELECT msg_id, row_number() OVER (ORDER BY msg_id) AS ord "
      "FROM sent) ",
      sql::kInsertTasksHead, "ids.msg_id", sql::kInsertTasksTail,
      " JOIN ids ON ids.ord = i.ord");
  send_with_tasks = StrCat(sql::kRunsMustExist.view(), ", ", sent_then_tasks,
                           sql::kCheckedRowsInOrder);
  send_with_tasks_of_new_runs =
      StrCat(sql::kGenericPlan, "WITH ", sent_then_tasks, sql::kRowsInOrder);
  // The subquery chooses as a claim does (ChooseMessages), like pgmq.read
  // it skips rows other transactions hold. `= ANY(ARRAY(...))` makes the
  // ids it locks an index condition, so the update never scans the table
  // (IN could be planned as a semi-join over the whole queue).
  const std::string read = StrCat(
      "UPDATE ", live,
      " AS q SET vt = $2::timestamptz, read_ct = q.read_ct + 1 WHERE q.msg_id "
      "= ANY(ARRAY(SELECT msg_id FROM (",
      ChooseMessages(live, 1, 3, 4), ") AS c)) RETURNING ", PriorityOf("q."),
      ", ", SeqOf("q."), ", ", columns);
  read_all = StrCat(sql::kGenericPlan, read, ", q.message");
  read_no_payloads = StrCat(sql::kGenericPlan, read);
  // The tasks table is not written by the update, so the join sees them as
  // GetTasksByMessage would; tasks_by_message finds each message's task.
  const std::string with_tasks = StrCat(
      sql::kGenericPlan,
      "WITH m (claim_priority, claim_seq, msg_id, read_ct, enqueued_at, vt, "
      "priority) AS (",
      read,
      ") SELECT m.claim_priority, m.claim_seq, m.msg_id, m.read_ct, "
      "m.enqueued_at, m.vt, m.priority, ");
  const std::string tasks_join =
      " FROM m LEFT JOIN sluice.tasks AS t ON t.queue_name = $4 AND "
      "t.message_id = m.msg_id";
  read_with_tasks_all = StrCat(with_tasks, sql::kTaskAll.view(), tasks_join);
  read_with_tasks_state = StrCat(with_tasks, sql::kTaskState, tasks_join);
  claim = ClaimSql(live);
  // to_tail takes a new sequence number; otherwise the message keeps its
  // place.
  set_visibility = StrCat(
      sql::kGenericPlan, "UPDATE ", live,
      " AS q SET vt = u.vt, headers = CASE WHEN u.to_tail THEN "
      "coalesce(q.headers, '{}'::jsonb) || jsonb_build_object('sluice_seq', "
      "nextval('sluice.message_seq')) ELSE q.headers END "
      "FROM unnest($1::bigint[], $2::timestamptz[], $3::bool[]) AS "
      "u(msg_id, vt, to_tail) WHERE q.msg_id = u.msg_id "
      "AND q.msg_id = ANY($1::bigint[])");
  // The earlier of one probe into each partial vt index (migration 0017):
  // only they serve both a branch's condition and its order, so a generic
  // plan walks them whatever the statistics said (decisions 0072, 0079).
  // A ready message was visible when sent.
  const auto earliest = [&](std::string_view which) {
    return StrCat("(SELECT vt FROM ", live, " WHERE ", which,
                  " AND vt > $1::timestamptz ORDER BY vt LIMIT 1)");
  };
  next_visible = StrCat(sql::kGenericPlan, "SELECT least(", earliest(kDelayed),
                        ", ", earliest(kRead), ")");
  archive = StrCat(
      sql::kGenericPlan, "WITH moved AS (DELETE FROM ", live,
      " WHERE msg_id = ANY($1::bigint[]) RETURNING msg_id, read_ct, "
      "enqueued_at, vt, message, headers) INSERT INTO ",
      archived,
      " (msg_id, read_ct, enqueued_at, archived_at, vt, message, headers) "
      "SELECT msg_id, read_ct, enqueued_at, $2::timestamptz, vt, message, "
      "headers FROM moved");
  delete_messages = StrCat(sql::kGenericPlan, "DELETE FROM ", live,
                           " WHERE msg_id = ANY($1::bigint[])");
  lookup = StrCat(
      "SELECT false, NULL::timestamptz, ", columns, ", q.message FROM ", live,
      " AS q WHERE q.msg_id = $1 UNION ALL SELECT true, "
      "q.archived_at, ",
      columns, ", q.message FROM ", archived, " AS q WHERE q.msg_id = $1");
  // A queued task is delayed while its message is not yet visible. Both
  // counts give the same columns, read by PgTables::CountTasks.
  constexpr std::string_view kCounts =
      "SELECT t.status, count(*) FILTER (WHERE m.vt > $2::timestamptz), "
      "count(*), min(m.vt) FILTER (WHERE m.vt <= $2::timestamptz) FROM ";
  count_tasks =
      StrCat(kCounts, "sluice.tasks AS t LEFT JOIN ", live,
             " AS m ON t.status = 'queued' AND m.msg_id = t.message_id "
             "WHERE t.queue_name = $1 GROUP BY t.status");
  // LIMIT keeps the lateral lookup a per-message index probe: a plain join
  // could walk every task of the queue when statistics call it small.
  count_in_flight = StrCat(
      kCounts, live,
      " AS m CROSS JOIN LATERAL (SELECT status FROM sluice.tasks "
      "WHERE queue_name = $1 AND message_id = m.msg_id "
      "AND status IN ('queued', 'started') LIMIT 1) AS t GROUP BY t.status");
  const std::string of_runs =
      " WHERE msg_id IN (SELECT message_id FROM sluice.tasks WHERE run_id = "
      "ANY($1::uuid[]) AND queue_name = $2)";
  delete_run_messages = StrCat("DELETE FROM ", live, of_runs);
  delete_run_archived = StrCat("DELETE FROM ", archived, of_runs);
  channel = QueueChannel(queue);
}

}  // namespace sluice::postgres_internal
