#include "pg_queue_sql.h"

#include "absl/strings/ascii.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {

std::string QuoteIdentifier(std::string_view name) {
  std::string quoted = "\"";
  for (char c : name) {
    if (c == '"') quoted.push_back('"');
    quoted.push_back(c);
  }
  quoted.push_back('"');
  return quoted;
}

std::string QueueChannel(std::string_view queue) {
  return StrCat("sluice_q_", queue);
}

QueueSql::QueueSql(std::string_view queue) {
  std::string lower = absl::AsciiStrToLower(ToAbsl(queue));
  const std::string live = StrCat("pgmq.", QuoteIdentifier("q_" + lower));
  const std::string archived = StrCat("pgmq.", QuoteIdentifier("a_" + lower));
  send = StrCat(
      "INSERT INTO ", live,
      " (enqueued_at, vt, message) SELECT $1::timestamptz, m.vt, m.message "
      "FROM unnest($2::timestamptz[], $3::jsonb[]) WITH ORDINALITY AS m(vt, "
      "message, ord) ORDER BY m.ord RETURNING msg_id");
  // The subquery walks the primary key from the lowest id and skips rows
  // other transactions hold, like pgmq.read. `= ANY(ARRAY(...))` makes the
  // ids it locks an index condition, so the update never scans the table
  // (IN could be planned as a semi-join over the whole queue).
  const std::string read = StrCat(
      "UPDATE ", live,
      " AS q SET vt = $2::timestamptz, read_ct = q.read_ct + 1 WHERE q.msg_id "
      "= ANY(ARRAY(SELECT msg_id FROM ",
      live,
      " WHERE vt <= $1::timestamptz ORDER BY msg_id LIMIT $3 FOR UPDATE SKIP "
      "LOCKED)) RETURNING q.msg_id, q.read_ct, q.enqueued_at, q.vt");
  read_all = StrCat(read, ", q.message");
  read_no_payloads = read;
  set_visibility = StrCat(
      "UPDATE ", live,
      " AS q SET vt = u.vt FROM unnest($1::bigint[], $2::timestamptz[]) AS "
      "u(msg_id, vt) WHERE q.msg_id = u.msg_id "
      "AND q.msg_id = ANY($1::bigint[])");
  archive = StrCat(
      "WITH moved AS (DELETE FROM ", live,
      " WHERE msg_id = ANY($1::bigint[]) RETURNING msg_id, read_ct, "
      "enqueued_at, vt, message, headers) INSERT INTO ",
      archived,
      " (msg_id, read_ct, enqueued_at, archived_at, vt, message, headers) "
      "SELECT msg_id, read_ct, enqueued_at, $2::timestamptz, vt, message, "
      "headers FROM moved");
  lookup = StrCat(
      "SELECT false, NULL::timestamptz, msg_id, read_ct, enqueued_at, vt, "
      "message FROM ",
      live,
      " WHERE msg_id = $1 UNION ALL SELECT true, archived_at, msg_id, "
      "read_ct, enqueued_at, vt, message FROM ",
      archived, " WHERE msg_id = $1");
  const std::string of_runs =
      " WHERE msg_id IN (SELECT message_id FROM sluice.tasks WHERE run_id = "
      "ANY($1::uuid[]) AND queue_name = $2)";
  delete_run_messages = StrCat("DELETE FROM ", live, of_runs);
  delete_run_archived = StrCat("DELETE FROM ", archived, of_runs);
  channel = QueueChannel(queue);
}

}  // namespace sluice::postgres_internal
