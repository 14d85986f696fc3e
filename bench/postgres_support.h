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

#include <cstdint>
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

// What a Postgres measurement cost the server: WAL written (cluster-wide,
// pg_current_wal_lsn() before and after) and, per table of the measured
// database, updates and how many of them were HOT.
struct PgTableUpdates {
  std::string table;
  int64_t updates = 0;
  int64_t hot = 0;
};
struct PgCost {
  int64_t wal_bytes = 0;
  std::vector<PgTableUpdates> tables;  // only tables with updates
  // HOT updates over all updates (0 when nothing was updated).
  double HotRatio() const;
  // "runs:12/40,tasks:0/40" (HOT/updates per table).
  std::string TableSummary() const;
};

// Runs ANALYZE on the database `url` names: the statistics autovacuum
// gathers within a minute of a table filling, which a benchmark that
// queries right after filling would otherwise run without.
absl::Status AnalyzePostgres(const std::string& url);

// The server's current WAL position, in bytes.
absl::StatusOr<int64_t> PostgresWalPosition(const std::string& url);
// Fills `cost->tables` from pg_stat_user_tables of the database `url`
// names, once the statistics of the sessions that did the work have
// arrived (they are sent when a session ends or goes idle; this waits until
// two readings agree, at most a few seconds).
absl::Status ReadTableUpdates(const std::string& url, PgCost* cost);

// Wake-up latencies of `samples` insert+NOTIFY round trips.
absl::StatusOr<std::vector<absl::Duration>> PostgresNotifyBaseline(
    const std::string& url, int samples);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_POSTGRES_SUPPORT_H_
