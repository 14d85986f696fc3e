// The floor of a Postgres W1 job under the backend's schema, with no engine:
// its WAL and its throughput.
//
// PostgresW1Floor moves `jobs` one-step jobs through Sluice's own tables on
// the fresh database `url` names, by plain SQL on three connections, as W1
// uses three: a producer starts them while two workers claim and finish
// them. It reports the WAL the server wrote for them (pg_current_wal_lsn()
// before and after, cluster-wide) and the jobs a second from the first
// start to the last finish. It deploys a one-step flow first, so that its
// queue has the indexes the backend gives every queue. Then:
//   start:  500 jobs a statement: each job's run, its pgmq message and
//           (with_tasks) its task, as one INSERT ... RETURNING chain;
//   claim:  100 a statement: the ready messages in claim order, locked and
//           hidden, and (with_tasks) their tasks started;
//   finish: the claimed messages deleted, (with_tasks) their tasks
//           completed with their outputs, their runs completed.
// No outbox report, ledger row, event, worker row or check: only the rows
// DESIGN.md's model writes for a job, so the WAL is what they alone log and
// the throughput what they alone allow on this server (docs/benchmarks.md).
#ifndef SLUICE_BENCH_POSTGRES_FLOOR_H_
#define SLUICE_BENCH_POSTGRES_FLOOR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace sluice::bench {

struct PostgresFloor {
  double wal_per_job = 0;  // bytes
  double jobs_per_s = 0;
};

// `jobs` > 0. Without `with_tasks`, a job is a run and a message only: less
// than the model allows, a floor below the floor.
absl::StatusOr<PostgresFloor> PostgresW1Floor(const std::string& url, int jobs,
                                              bool with_tasks);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_POSTGRES_FLOOR_H_
