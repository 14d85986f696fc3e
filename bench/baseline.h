// The baseline each sluice-bench figure is compared with: the simplest loop
// that moves the same number of jobs through the same storage, measured in
// the same process a moment before.
//
// memory:  a mutex-guarded deque drained by `concurrency` threads, 10 at a time
// sqlite:  one jobs table in WAL mode (synchronous=NORMAL, as the backend);
//          enqueue in transactions of 500, then claim 10 and complete 10 per
//          transaction until done; synchronous=FULL when the URL asks for
//          it (sqlite:PATH?synchronous=full)
// W3 on memory and SQLite: a bare in-process wake-up, a thread woken by a
//          condition another thread sets (InProcessWakeBaseline).
#ifndef SLUICE_BENCH_BASELINE_H_
#define SLUICE_BENCH_BASELINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sluice::bench {

absl::StatusOr<double> MeasureBaseline(const std::string& url, int jobs,
                                       int concurrency);
std::string BaselineDescription(const std::string& url);
// True when a sqlite: URL asks for synchronous=full.
bool SqliteSynchronousFull(const std::string& url);

// Wake-up latencies of `samples` bare in-process hand-offs: the time from
// setting a condition under a mutex to the waiting thread running.
std::vector<absl::Duration> InProcessWakeBaseline(int samples);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_BASELINE_H_
