// Postgres helpers for sluice-bench: a fresh, migrated database per
// measurement, and the baselines measured on the same server.
//
// W1/W2 baseline: one plain jobs table; enqueue in transactions of 500, then
// claim 10 (FOR UPDATE SKIP LOCKED) and complete 10 per transaction, on one
// connection, with the server's default durability.
// W3 baseline: the bare wake-up path Sluice's worker rides on: one connection
// LISTENs, another inserts a row and NOTIFYs in one transaction, and the
// listener reads the row; latency is from the insert to the read.
#ifndef SLUICE_BENCH_POSTGRES_SUPPORT_H_
#define SLUICE_BENCH_POSTGRES_SUPPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sluice::bench {

bool IsPostgresUrl(const std::string& url);

// Drops and recreates the database `name` on the server `url` points at,
// migrates it, and returns a URL for it.
absl::StatusOr<std::string> FreshPostgresDatabase(const std::string& url,
                                                  const std::string& name);

absl::StatusOr<double> PostgresJobsBaseline(const std::string& url, int jobs);

// Wake-up latencies of `samples` insert+NOTIFY round trips.
absl::StatusOr<std::vector<absl::Duration>> PostgresNotifyBaseline(
    const std::string& url, int samples);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_POSTGRES_SUPPORT_H_
