// The floor of a Postgres W1 job's WAL under the backend's schema, with no
// engine.
//
// PostgresW1Floor moves `jobs` one-step jobs through Sluice's own tables on
// the fresh database `url` names, by plain SQL on one connection, and
// reports the WAL the server wrote for them (pg_current_wal_lsn() before and
// after, cluster-wide). It deploys a one-step flow first, so that its queue
// has the indexes the backend gives every queue. Then:
//   start:  500 jobs a statement: each job's run, its pgmq message and
//           (with_tasks) its task, as one INSERT ... RETURNING chain;
//   claim:  100 a statement: the ready messages in claim order, locked and
//           hidden, and (with_tasks) their tasks started;
//   finish: the claimed messages deleted, (with_tasks) their tasks
//           completed with their outputs, their runs completed.
// No outbox report, ledger row, event, worker row or check: only the rows
// DESIGN.md's model writes for a job, so the WAL is what they alone log
// (docs/benchmarks.md).
#ifndef SLUICE_BENCH_POSTGRES_FLOOR_H_
#define SLUICE_BENCH_POSTGRES_FLOOR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace sluice::bench {

// WAL bytes a job; `jobs` > 0. Without `with_tasks`, a job is a run and a
// message only: less than the model allows, a floor below the floor.
absl::StatusOr<double> PostgresW1Floor(const std::string& url, int jobs,
                                       bool with_tasks);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_POSTGRES_FLOOR_H_
