// The baseline each sluice-bench figure is compared with: the simplest loop
// that moves the same number of jobs through the same storage, measured in
// the same process a moment before.
//
// memory:  a mutex-guarded deque drained by `concurrency` threads, 10 at a time
// sqlite:  one jobs table in WAL mode (synchronous=NORMAL, as the backend);
//          enqueue in transactions of 500, then claim 10 and complete 10 per
//          transaction until done
#ifndef SLUICE_BENCH_BASELINE_H_
#define SLUICE_BENCH_BASELINE_H_

#include <string>

#include "absl/status/statusor.h"

namespace sluice::bench {

absl::StatusOr<double> MeasureBaseline(const std::string& url, int jobs,
                                       int concurrency);
std::string BaselineDescription(const std::string& url);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_BASELINE_H_
