// The statements on one queue's pgmq tables, pgmq.q_<queue> (live) and
// pgmq.a_<queue> (archive). They are pgmq's own operations written with the
// caller's times instead of now(), so a manual clock drives them; every row
// they write is one pgmq itself would write. A message's claim priority and
// FIFO number are kept in its `headers` ({"sluice_priority": int,
// "sluice_seq": bigint}; migration 0003 says why not in columns).
// Identifiers are quoted, though the engine already allows only [a-z0-9_].
#ifndef SLUICE_BACKENDS_POSTGRES_PG_QUEUE_SQL_H_
#define SLUICE_BACKENDS_POSTGRES_PG_QUEUE_SQL_H_

#include <span>
#include <string>
#include <string_view>

#include "sluice/backend.h"

namespace sluice::postgres_internal {

struct QueueSql {
  explicit QueueSql(std::string_view queue);

  // $1 enqueued_at, $2 visible_at[], $3 message text[] (JSON), $4
  // priority[];
  // rows: (msg_id), in send order.
  std::string send;
  // send's messages ($21..$24) and pg_sql.h kInsertTasks's tasks ($1..$20,
  // one per message, in the same order), each task taking its message's
  // id: one statement, whose result nobody needs to wait for.
  std::string send_with_tasks;
  // send_with_tasks for tasks whose runs the transaction inserted: without
  // the check that each run exists (pg_sql.h ByRunCheck).
  std::string send_with_tasks_of_new_runs;
  // $1 now, $2 visible_until, $3 limit, $4 the queue's registered name.
  // Rows: the claim priority and seq as stored (NULL for a message sent
  // without Sluice's headers), msg_id, read_ct, enqueued_at, vt, priority,
  // then message for kAll.
  std::string read_all;
  std::string read_no_payloads;
  // The claim's read: read_no_payloads's update, then each message's task
  // (a left join: NULL task columns where none exists). Rows: read's,
  // then the task's columns (pg_sql.h kTaskAll or kTaskState).
  std::string read_with_tasks_all;
  std::string read_with_tasks_state;
  // OneTripClaims::ClaimAndCommit's statement: $1 now, $2 the lost
  // messages' vt, $3..$6 the claimable steps (flow_slug text[], step_index
  // int[], stall_at and vt timestamptz[]), $7 worker_id, $8 the queue's
  // registered name, $9 limit. Chooses and locks the messages a read would
  // take. Rows, in claim order: plain, claimed, msg_id, then the task's
  // kTaskAll columns as read (NULL if none).
  std::string claim;
  // $1 msg_id[], $2 vt[], $3 to_tail bool[] (one entry per message).
  std::string set_visibility;
  // $1 now. Rows: one (the earliest vt after $1, NULL if none).
  std::string next_visible;
  // $1 queue name, $2 now. Rows: (task status, queued tasks whose message
  // is not yet visible, tasks, the earliest visible message's vt).
  // count_in_flight: the same for queued and started tasks, from the
  // queue's live messages, so ended tasks cost nothing.
  std::string count_tasks;
  std::string count_in_flight;
  // $1 msg_id[], $2 archived_at.
  std::string archive;
  // $1 msg_id[]: pgmq's delete.
  std::string delete_messages;
  // $1 msg_id. Rows: archived, archived_at, msg_id, read_ct, enqueued_at,
  // vt, priority, message.
  std::string lookup;
  // $1 run ids, $2 the queue name: the runs' tasks' messages.
  std::string delete_run_messages;
  std::string delete_run_archived;
  // pg_notify channel: "sluice_q_<queue>" (at most 56 bytes).
  std::string channel;

  const std::string& Read(Fields fields) const {
    return fields == Fields::kAll ? read_all : read_no_payloads;
  }
  const std::string& ReadWithTasks(Fields task_fields) const {
    return task_fields == Fields::kAll ? read_with_tasks_all
                                       : read_with_tasks_state;
  }
};

// The quoted identifier `name` ("q_x" -> "\"q_x\"").
std::string QuoteIdentifier(std::string_view name);
// FindStalledTasks's statement over the registered `queues` (not empty):
// each queue's messages that StalledQuery promises (read at least once,
// visible at $2 at the latest; each queue's _sluice_read index, migration
// 0012), their started tasks stalled before $1, earliest first, at most $3,
// locked.
std::string FindStalledSql(std::span<const std::string> queues, Fields fields);
// The channel WatchQueue listens on for `queue`.
std::string QueueChannel(std::string_view queue);

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_QUEUE_SQL_H_
