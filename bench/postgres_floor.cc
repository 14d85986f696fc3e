#include "postgres_floor.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pg_session.h"
#include "pg_values.h"
#include "postgres_support.h"
#include "sluice/backends.h"
#include "sluice/engine.h"

namespace sluice::bench {
namespace {

using postgres_internal::Session;

constexpr int kStartBatch = 500;  // W1's StartRuns batches
constexpr int kClaimBatch = 100;  // W1's worker batch

// The flow's queue, created with the backend's indexes by deploying it.
absl::Status DeployFloorFlow(const std::string& url) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url);
  if (!backend.ok()) return backend.status();
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**backend);
  if (!engine.ok()) return engine.status();
  Flow flow("floor_w1");
  flow.Step("job", [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
    return in;
  });
  return (*engine)->Deploy(flow).status();
}

// $1, $2: the jobs' numbers, first and last.
std::string StartSql(bool with_tasks) {
  std::string sql =
      "WITH r AS (INSERT INTO sluice.runs (run_id, flow_slug, status, "
      "remaining_steps, error, started_at, input) SELECT gen_random_uuid(), "
      "'floor_w1', 'started', 1, '', now(), json_build_object('n', i) FROM "
      "generate_series($1::int, $2::int) AS i RETURNING run_id, input), "
      "m AS (INSERT INTO pgmq.q_floor_w1 (enqueued_at, vt, message, headers) "
      "SELECT now(), now(), jsonb_build_object('flow_slug', 'floor_w1', "
      "'run_id', run_id, 'step_slug', 'job', 'task_index', 0), "
      "jsonb_build_object('sluice_priority', 0, 'sluice_seq', "
      "nextval('sluice.message_seq')) FROM r RETURNING msg_id, message) ";
  if (!with_tasks) return sql + "SELECT count(*) FROM m";
  return sql +
         "INSERT INTO sluice.tasks (run_id, step_index, task_index, "
         "flow_slug, queue_name, message_id, queued_at, requeued_count, "
         "input, worker_id, attempts, status, error) SELECT r.run_id, 0, 0, "
         "'floor_w1', 'floor_w1', m.msg_id, now(), 0, json_build_object("
         "'run', r.input), '', 0, 'queued', '' FROM m JOIN r ON r.run_id = "
         "(m.message ->> 'run_id')::uuid";
}

// Rows: the claimed message ids.
std::string ClaimSql(bool with_tasks) {
  std::string sql = absl::StrCat(
      "WITH c AS (UPDATE pgmq.q_floor_w1 SET vt = now() + interval '60 s', "
      "read_ct = read_ct + 1 WHERE msg_id IN (SELECT msg_id FROM "
      "pgmq.q_floor_w1 WHERE read_ct = 0 AND vt <= enqueued_at ORDER BY "
      "((headers ->> 'sluice_priority')::integer) DESC NULLS LAST, "
      "((headers ->> 'sluice_seq')::bigint) LIMIT ",
      kClaimBatch, " FOR UPDATE SKIP LOCKED) RETURNING msg_id) ");
  if (!with_tasks) return sql + "SELECT msg_id FROM c";
  return sql +
         "UPDATE sluice.tasks AS t SET status = 'started', attempts = "
         "t.attempts + 1, started_at = now(), stall_at = now() + interval "
         "'60 s', worker_id = 'floor' FROM c WHERE t.queue_name = 'floor_w1' "
         "AND t.message_id = c.msg_id RETURNING t.message_id";
}

// $1: the claimed message ids, as a bigint[] literal.
std::string FinishSql(bool with_tasks) {
  std::string sql =
      "WITH d AS (DELETE FROM pgmq.q_floor_w1 WHERE msg_id = "
      "ANY($1::bigint[]) RETURNING (message ->> 'run_id')::uuid AS run_id) ";
  if (with_tasks) {
    sql +=
        ", t AS (UPDATE sluice.tasks AS t SET status = 'completed', "
        "finished_at = now(), stall_at = NULL, output = t.input -> 'run' "
        "FROM d WHERE t.run_id = d.run_id AND t.step_index = 0 AND "
        "t.task_index = 0) ";
  }
  return sql +
         "UPDATE sluice.runs AS r SET status = 'completed', remaining_steps "
         "= 0, finished_at = now(), output = json_build_object('job', "
         "r.input) FROM d WHERE r.run_id = d.run_id";
}

// The claimed ids of `claimed` as a bigint[] literal, "{1,2,3}".
std::string IdArray(const postgres_internal::Result& claimed) {
  postgres_internal::ArrayLiteral ids;
  for (int i = 0; i < claimed.rows(); ++i) ids.Int(claimed.row(i).Int());
  return std::move(ids).Take();
}

// Starts, claims and finishes every job; the number finished.
absl::StatusOr<int> MoveJobs(Session& db, int jobs, bool with_tasks) {
  const std::string start = StartSql(with_tasks);
  for (int first = 0; first < jobs; first += kStartBatch) {
    const int last = std::min(jobs, first + kStartBatch) - 1;
    absl::StatusOr<postgres_internal::Result> started = db.Query(
        start, {std::to_string(first), std::to_string(last)}, "floor start");
    if (!started.ok()) return started.status();
  }
  const std::string claim = ClaimSql(with_tasks);
  const std::string finish = FinishSql(with_tasks);
  int finished = 0;
  while (true) {
    absl::StatusOr<postgres_internal::Result> claimed =
        db.Query(claim, {}, "floor claim");
    if (!claimed.ok()) return claimed.status();
    if (claimed->rows() == 0) return finished;
    absl::StatusOr<postgres_internal::Result> done =
        db.Query(finish, {IdArray(*claimed)}, "floor finish");
    if (!done.ok()) return done.status();
    finished += claimed->rows();
  }
}

}  // namespace

absl::StatusOr<double> PostgresW1Floor(const std::string& url, int jobs,
                                       bool with_tasks) {
  if (absl::Status s = DeployFloorFlow(url); !s.ok()) return s;
  absl::StatusOr<Session> db = Session::Open(url);
  if (!db.ok()) return db.status();
  absl::StatusOr<int64_t> before = PostgresWalPosition(url);
  if (!before.ok()) return before.status();
  absl::StatusOr<int> finished = MoveJobs(*db, jobs, with_tasks);
  if (!finished.ok()) return finished.status();
  if (*finished != jobs) {
    return absl::InternalError(
        absl::StrCat("W1 floor: finished ", *finished, " of ", jobs, " jobs"));
  }
  absl::StatusOr<int64_t> after = PostgresWalPosition(url);
  if (!after.ok()) return after.status();
  return static_cast<double>(*after - *before) / jobs;
}

}  // namespace sluice::bench
