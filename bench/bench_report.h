// What sluice-bench prints and where it measures: fresh storage per
// measurement, the Postgres cost of a run, and the RESULT line.
#ifndef SLUICE_BENCH_BENCH_REPORT_H_
#define SLUICE_BENCH_BENCH_REPORT_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "postgres_support.h"

namespace sluice::bench {

// The backend's name in a RESULT line: postgres, sqlite or memory.
std::string BackendName(const std::string& url);

// A fresh SQLite file or Postgres database per measurement. A sqlite: URL
// keeps its options (?synchronous=...) after the new path.
absl::StatusOr<std::string> FreshUrl(const std::string& url,
                                     const std::string& suffix);

// Runs `measure` on the fresh storage `url`; on Postgres, records in
// `cost` the WAL it wrote and its tables' updates.
absl::StatusOr<double> Metered(
    const std::string& url, std::optional<PgCost>& cost,
    const std::function<absl::StatusOr<double>()>& measure);

// One workload's outcome, for the RESULT line.
struct Outcome {
  std::string workload;
  std::string backend;
  double value = 0;
  std::optional<double> baseline;
  std::string fields;  // the workload's own fields, " name=value ..."
  int jobs = 0;        // jobs (tasks) the measured run moved
  int baseline_jobs = 0;
  std::optional<PgCost> cost, baseline_cost;
};

// Prints the Postgres cost lines, if any, then the RESULT line.
void PrintResult(const Outcome& o);

// `run()` (a StatusOr-returning workload) on the fresh storage `url`,
// metered into `cost` as Metered does.
template <typename Run>
auto MeteredRun(const std::string& url, std::optional<PgCost>& cost, Run run)
    -> decltype(run()) {
  decltype(run()) result = absl::UnknownError("not run");
  absl::StatusOr<double> metered =
      Metered(url, cost, [&]() -> absl::StatusOr<double> {
        result = run();
        if (!result.ok()) return result.status();
        return 0.0;
      });
  if (!metered.ok()) return metered.status();
  return result;
}

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_BENCH_REPORT_H_
