#include "bench_report.h"

#include <cstdio>
#include <filesystem>

namespace sluice::bench {
namespace {

void PrintCost(const char* what, const std::optional<PgCost>& cost, int jobs) {
  if (!cost.has_value() || jobs == 0) return;
  std::printf("postgres %s: WAL %.0f bytes/job, HOT updates (HOT/all) %s\n",
              what, static_cast<double>(cost->wal_bytes) / jobs,
              cost->TableSummary().c_str());
}

}  // namespace

std::string BackendName(const std::string& url) {
  if (IsPostgresUrl(url)) return "postgres";
  return url.substr(0, url.find(':'));
}

// A fresh SQLite file or Postgres database per measurement. A sqlite: URL
// keeps its options (?synchronous=...) after the new path.
absl::StatusOr<std::string> FreshUrl(const std::string& url,
                                     const std::string& suffix) {
  if (IsPostgresUrl(url)) {
    std::string name = "sluice_bench";
    if (!suffix.empty()) name += "_" + suffix.substr(1);
    return FreshPostgresDatabase(url, name);
  }
  if (url.rfind("sqlite:", 0) != 0) return url;
  std::string rest = url.substr(7);
  size_t query = rest.find('?');
  std::string path = rest.substr(0, query) + suffix;
  for (const char* ext : {"", "-wal", "-shm"}) {
    std::filesystem::remove(path + ext);
  }
  return "sqlite:" + path +
         (query == std::string::npos ? "" : rest.substr(query));
}

// Runs `measure` on the fresh storage `url`; on Postgres, records in
// `cost` the WAL it wrote and its tables' updates.
absl::StatusOr<double> Metered(
    const std::string& url, std::optional<PgCost>& cost,
    const std::function<absl::StatusOr<double>()>& measure) {
  if (!IsPostgresUrl(url)) return measure();
  absl::StatusOr<int64_t> before = PostgresWalPosition(url);
  if (!before.ok()) return before.status();
  absl::StatusOr<double> figure = measure();
  if (!figure.ok()) return figure;
  absl::StatusOr<int64_t> after = PostgresWalPosition(url);
  if (!after.ok()) return after.status();
  cost.emplace();
  cost->wal_bytes = *after - *before;
  if (absl::Status s = ReadTableUpdates(url, &*cost); !s.ok()) return s;
  return figure;
}

void PrintResult(const Outcome& o) {
  PrintCost("sluice", o.cost, o.jobs);
  PrintCost("baseline", o.baseline_cost, o.baseline_jobs);
  // Rates in whole jobs per second, latencies (W3) in milliseconds.
  const int digits = o.workload == "W3" ? 3 : o.workload == "W7" ? 1 : 0;
  std::printf("RESULT workload=%s backend=%s value=%.*f", o.workload.c_str(),
              o.backend.c_str(), digits, o.value);
  if (o.baseline.has_value()) {
    std::printf(" baseline=%.*f ratio=%.2f", digits, *o.baseline,
                *o.baseline > 0 ? o.value / *o.baseline : 0.0);
  } else {
    std::printf(" baseline=none ratio=none");
  }
  std::printf("%s", o.fields.c_str());
  if (o.cost.has_value() && o.jobs > 0) {
    std::printf(" wal_per_job=%.0f hot=%.2f",
                static_cast<double>(o.cost->wal_bytes) / o.jobs,
                o.cost->HotRatio());
  }
  if (o.baseline_cost.has_value() && o.baseline_jobs > 0) {
    std::printf(
        " baseline_wal_per_job=%.0f baseline_hot=%.2f",
        static_cast<double>(o.baseline_cost->wal_bytes) / o.baseline_jobs,
        o.baseline_cost->HotRatio());
  }
  std::printf("\n");
}

}  // namespace sluice::bench
