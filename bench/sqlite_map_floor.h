// The floor of a SQLite map (W7) under the backend's schema, with no engine.
//
// SqliteMapRowsFloor writes and moves the rows a map of `elements` children
// needs in Sluice's own tables and indexes (created by opening the backend
// on the file), by plain SQL on one connection with the backend's settings
// (WAL, synchronous=NORMAL, temp_store=MEMORY, checkpoints every 10,000
// pages): one transaction inserts every child's task and message, then,
// 100 at a time, one transaction claims (one UPDATE of the messages chosen
// through `messages_ready`, one of their tasks) and one finishes (one
// UPDATE of the tasks with their outputs, one DELETE of the messages),
// each statement over the whole batch. No run, step state, report, ledger
// row or handler: only the tasks and messages, the rows a map writes per
// element, so the time is what SQLite takes for them alone on this machine
// (docs/benchmarks.md).
#ifndef SLUICE_BENCH_SQLITE_MAP_FLOOR_H_
#define SLUICE_BENCH_SQLITE_MAP_FLOOR_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sluice::bench {

// The whole floor's time on the fresh SQLite file that `url` names (a
// sqlite: URL); `elements` > 0.
absl::StatusOr<absl::Duration> SqliteMapRowsFloor(const std::string& url,
                                                  int elements);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_SQLITE_MAP_FLOOR_H_
