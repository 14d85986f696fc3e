#include "postgres_floor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "pg_session.h"
#include "pg_values.h"
#include "postgres_support.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "sluice/ids.h"

namespace sluice::bench {
namespace {

using postgres_internal::Session;

constexpr int kStartBatch = 500;  // W1's StartRuns batches
constexpr int kClaimBatch = 100;  // W1's worker batch
constexpr int kWorkers = 2;       // beside the producer: W1's three connections

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

// $1: the runs' ids, a uuid[] literal; $2: the first job's number.
std::string StartSql(bool with_tasks) {
  std::string sql =
      "WITH r AS (INSERT INTO sluice.runs (run_id, flow_slug, status, "
      "remaining_steps, error, started_at, input) SELECT u.id, 'floor_w1', "
      "'started', 1, '', now(), json_build_object('n', $2::int + u.i - 1) "
      "FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, i) RETURNING run_id, "
      "input), "
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
         "'60 s', worker_id = 'floor' WHERE t.queue_name = 'floor_w1' AND "
         "t.message_id = ANY(ARRAY(SELECT msg_id FROM c)) RETURNING "
         "t.message_id";
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
        "WHERE t.run_id = ANY(ARRAY(SELECT run_id FROM d)) AND t.step_index "
        "= 0 AND t.task_index = 0) ";
  }
  return sql +
         "UPDATE sluice.runs AS r SET status = 'completed', remaining_steps "
         "= 0, finished_at = now(), output = json_build_object('job', "
         "r.input) WHERE r.run_id = ANY(ARRAY(SELECT run_id FROM d))";
}

// The claimed ids of `claimed` as a bigint[] literal, "{1,2,3}".
std::string IdArray(const postgres_internal::Result& claimed) {
  postgres_internal::ArrayLiteral ids;
  for (int i = 0; i < claimed.rows(); ++i) ids.Int(claimed.row(i).Int());
  return std::move(ids).Take();
}

// What the floor's three connections share.
struct Progress {
  std::atomic<bool> started_all{false};
  std::atomic<bool> failed{false};
  std::atomic<int> finished{0};
};

// The producer: every job started, kStartBatch a statement, as W1's
// StartRuns does while its worker runs.
absl::Status StartJobs(Session& db, int jobs, bool with_tasks,
                       Progress& progress) {
  const std::string start = StartSql(with_tasks);
  for (int first = 0; first < jobs && !progress.failed; first += kStartBatch) {
    // Sluice's own run ids, which sort by time (RunId::Random).
    postgres_internal::ArrayLiteral ids;
    for (int i = first; i < std::min(jobs, first + kStartBatch); ++i) {
      ids.Text(RunId::Random().ToString());
    }
    absl::StatusOr<postgres_internal::Result> started = db.Query(
        start, {std::move(ids).Take(), std::to_string(first)}, "floor start");
    if (!started.ok()) return started.status();
  }
  progress.started_all = true;
  return absl::OkStatus();
}

// A worker: claims and finishes until every job is started and none is
// left to claim. An empty claim before then waits briefly for the producer.
absl::Status WorkJobs(Session& db, bool with_tasks, Progress& progress) {
  const std::string claim = ClaimSql(with_tasks);
  const std::string finish = FinishSql(with_tasks);
  while (!progress.failed) {
    const bool started_all = progress.started_all;
    absl::StatusOr<postgres_internal::Result> claimed =
        db.Query(claim, {}, "floor claim");
    if (!claimed.ok()) return claimed.status();
    if (claimed->rows() == 0) {
      if (started_all) return absl::OkStatus();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    absl::StatusOr<postgres_internal::Result> done =
        db.Query(finish, {IdArray(*claimed)}, "floor finish");
    if (!done.ok()) return done.status();
    progress.finished += claimed->rows();
  }
  return absl::OkStatus();
}

// Starts, claims and finishes every job on `sessions`: the first starts
// them, the others (kWorkers) claim and finish them. The number finished.
absl::StatusOr<int> MoveJobs(std::vector<Session>& sessions, int jobs,
                             bool with_tasks) {
  Progress progress;
  std::vector<absl::Status> statuses(sessions.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < sessions.size(); ++i) {
    threads.emplace_back([&, i] {
      statuses[i] = i == 0 ? StartJobs(sessions[i], jobs, with_tasks, progress)
                           : WorkJobs(sessions[i], with_tasks, progress);
      if (!statuses[i].ok()) progress.failed = true;  // stops the others
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return progress.finished.load();
}

}  // namespace

absl::StatusOr<PostgresFloor> PostgresW1Floor(const std::string& url, int jobs,
                                              bool with_tasks) {
  if (absl::Status s = DeployFloorFlow(url); !s.ok()) return s;
  std::vector<Session> sessions;
  for (int i = 0; i < 1 + kWorkers; ++i) {
    absl::StatusOr<Session> db = Session::Open(url);
    if (!db.ok()) return db.status();
    // Every row here is reached by key (each `= ANY(ARRAY(...))`), or in
    // order along the ready index. Planned on the statistics of tables that
    // grow and drain, a statement would otherwise sometimes scan a table
    // whole, or read every ready message and sort them, as Sluice's generic
    // plans never do (pg_queue_sql.cc).
    if (absl::Status s = db->Execute(
            "SET enable_seqscan = off; SET enable_bitmapscan = off; "
            "SET enable_hashjoin = off; SET jit = off",
            "floor session");
        !s.ok()) {
      return s;
    }
    sessions.push_back(*std::move(db));
  }
  absl::StatusOr<int64_t> before = PostgresWalPosition(url);
  if (!before.ok()) return before.status();
  const absl::Time began = absl::Now();
  absl::StatusOr<int> finished = MoveJobs(sessions, jobs, with_tasks);
  const absl::Duration took = absl::Now() - began;
  if (!finished.ok()) return finished.status();
  if (*finished != jobs) {
    return absl::InternalError(
        absl::StrCat("W1 floor: finished ", *finished, " of ", jobs, " jobs"));
  }
  absl::StatusOr<int64_t> after = PostgresWalPosition(url);
  if (!after.ok()) return after.status();
  return PostgresFloor{
      .wal_per_job = static_cast<double>(*after - *before) / jobs,
      .jobs_per_s = jobs / absl::ToDoubleSeconds(took)};
}

}  // namespace sluice::bench
