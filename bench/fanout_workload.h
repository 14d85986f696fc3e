// W5: fan-out of 10,000 children from one handler, next to the same 10,000
// jobs through EnqueueMany (issue 10: a child's cost within 2x of a plain
// EnqueueMany job).
//
// Both sides run the same one-step child job on one worker (concurrency
// 10, claim batches of 100) on fresh storage:
//   fan-out:      a parent job whose handler returns a FanOut of the
//                 children; timed from enqueuing the parent to its run
//                 completing (children created in the parent's ack, run,
//                 reported, and the parent settled with every result).
//   EnqueueMany:  the children's payloads in one EnqueueMany call (the
//                 fan-out writes its children in one transaction too);
//                 timed from the call to the last job completing.
// ratio = fan-out time / EnqueueMany time (per child over per job; lower is
// better, target <= 2.0).
#ifndef SLUICE_BENCH_FANOUT_WORKLOAD_H_
#define SLUICE_BENCH_FANOUT_WORKLOAD_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sluice::bench {

struct FanOutTiming {
  absl::Duration total;        // start to the last completion / settlement
  absl::Duration first_start;  // start to the first child's handler
};

// The fan-out side on the storage at `url`.
absl::StatusOr<FanOutTiming> RunFanOutWorkload(const std::string& url,
                                               int children);
// The EnqueueMany side on the storage at `url`.
absl::StatusOr<FanOutTiming> RunEnqueueManyWorkload(const std::string& url,
                                                    int jobs);

// W7: one run of a flow whose root step maps over `elements` small objects,
// on the same worker; compared with the EnqueueMany side for as many jobs.
struct MapTiming {
  absl::Duration start_run;  // StartRun: every element's task written
  // StartRun to the run completing, as its own record shows (ListRuns).
  FanOutTiming run;
  // The process's peak resident memory above what it held just before
  // StartRun (the input array already built), in bytes per element: during
  // StartRun, and until every task's result is recorded and applied (the
  // map's output gathered included; nothing the bench reads back).
  double start_peak_bytes_per_element = 0;
  double run_peak_bytes_per_element = 0;
};
absl::StatusOr<MapTiming> RunMapWorkload(const std::string& url, int elements);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_FANOUT_WORKLOAD_H_
