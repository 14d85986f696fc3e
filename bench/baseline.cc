#include "baseline.h"

#include <sqlite3.h>

#include <deque>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace sluice::bench {
namespace {

double MemoryBaseline(int jobs, int concurrency) {
  absl::Mutex mu;
  std::deque<std::string> queue;
  int done = 0;
  absl::Time start = absl::Now();
  {
    absl::MutexLock lock(&mu);
    for (int i = 0; i < jobs; ++i)
      queue.push_back("{\"n\":" + std::to_string(i) + "}");
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < concurrency; ++t) {
    threads.emplace_back([&] {
      while (true) {
        std::vector<std::string> batch;
        {
          absl::MutexLock lock(&mu);
          for (int i = 0; i < 10 && !queue.empty(); ++i) {
            batch.push_back(std::move(queue.front()));
            queue.pop_front();
          }
          if (batch.empty()) return;
        }
        absl::MutexLock lock(&mu);
        done += static_cast<int>(batch.size());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return done / absl::ToDoubleSeconds(absl::Now() - start);
}

absl::Status Exec(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown";
    sqlite3_free(error);
    return absl::InternalError(std::string("baseline SQL failed: ") + message);
  }
  return absl::OkStatus();
}

absl::StatusOr<double> SqliteBaseline(const std::string& path, bool full,
                                      int jobs) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    return absl::UnavailableError("baseline: cannot open " + path);
  }
  auto close = [&] { sqlite3_close(db); };
  for (const char* sql :
       {"PRAGMA journal_mode=WAL",
        full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
        "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, payload TEXT "
        "NOT NULL, status INTEGER NOT NULL, attempts INTEGER NOT NULL, output "
        "TEXT)",
        "CREATE INDEX IF NOT EXISTS jobs_queued ON jobs (id) WHERE status = "
        "0"}) {
    if (absl::Status s = Exec(db, sql); !s.ok()) {
      close();
      return s;
    }
  }
  sqlite3_stmt* insert = nullptr;
  sqlite3_stmt* claim = nullptr;
  sqlite3_stmt* complete = nullptr;
  sqlite3_prepare_v2(
      db, "INSERT INTO jobs (payload, status, attempts) VALUES (?, 0, 0)", -1,
      &insert, nullptr);
  sqlite3_prepare_v2(
      db,
      "UPDATE jobs SET status = 1, attempts = attempts + 1 WHERE id "
      "IN (SELECT id FROM jobs WHERE status = 0 ORDER BY id LIMIT 10) "
      "RETURNING id, payload",
      -1, &claim, nullptr);
  sqlite3_prepare_v2(db, "UPDATE jobs SET status = 2, output = ? WHERE id = ?",
                     -1, &complete, nullptr);
  absl::Time start = absl::Now();
  for (int first = 0; first < jobs; first += 500) {
    Exec(db, "BEGIN IMMEDIATE").IgnoreError();
    for (int i = first; i < std::min(jobs, first + 500); ++i) {
      std::string payload = "{\"n\":" + std::to_string(i) + "}";
      sqlite3_bind_text(insert, 1, payload.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_step(insert);
      sqlite3_reset(insert);
    }
    Exec(db, "COMMIT").IgnoreError();
  }
  int done = 0;
  while (true) {
    Exec(db, "BEGIN IMMEDIATE").IgnoreError();
    std::vector<std::pair<int64_t, std::string>> batch;
    while (sqlite3_step(claim) == SQLITE_ROW) {
      batch.emplace_back(
          sqlite3_column_int64(claim, 0),
          reinterpret_cast<const char*>(sqlite3_column_text(claim, 1)));
    }
    sqlite3_reset(claim);
    Exec(db, "COMMIT").IgnoreError();
    if (batch.empty()) break;
    Exec(db, "BEGIN IMMEDIATE").IgnoreError();
    for (auto& [id, payload] : batch) {
      sqlite3_bind_text(complete, 1, payload.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(complete, 2, id);
      sqlite3_step(complete);
      sqlite3_reset(complete);
    }
    Exec(db, "COMMIT").IgnoreError();
    done += static_cast<int>(batch.size());
  }
  double rate = done / absl::ToDoubleSeconds(absl::Now() - start);
  sqlite3_finalize(insert);
  sqlite3_finalize(claim);
  sqlite3_finalize(complete);
  close();
  if (done != jobs) return absl::InternalError("baseline lost jobs");
  return rate;
}

}  // namespace

absl::StatusOr<double> MeasureBaseline(const std::string& url, int jobs,
                                       int concurrency) {
  if (url.rfind("sqlite:", 0) == 0) {
    std::string rest = url.substr(7);
    std::string path = rest.substr(0, rest.find('?'));
    return SqliteBaseline(path, SqliteSynchronousFull(url), jobs);
  }
  if (url.rfind("memory", 0) == 0) return MemoryBaseline(jobs, concurrency);
  return absl::InvalidArgumentError("no baseline for backend " + url);
}

bool SqliteSynchronousFull(const std::string& url) {
  return url.find("synchronous=full") != std::string::npos;
}

std::string BaselineDescription(const std::string& url) {
  if (url.rfind("sqlite:", 0) == 0) {
    return std::string(
               "plain SQLite jobs table, claim 10 + complete 10 per "
               "transaction, synchronous=") +
           (SqliteSynchronousFull(url) ? "FULL" : "NORMAL");
  }
  return "mutex-guarded deque, 10 jobs per batch";
}

std::vector<absl::Duration> InProcessWakeBaseline(int samples) {
  absl::Mutex mu;
  int posted = 0;  // hand-offs set so far
  absl::CondVar changed;
  absl::Time sent;
  std::vector<absl::Duration> latencies;
  std::thread waiter([&] {
    for (int i = 1; i <= samples; ++i) {
      absl::MutexLock lock(&mu);
      while (posted < i) changed.Wait(&mu);
      latencies.push_back(absl::Now() - sent);
    }
  });
  for (int i = 0; i < samples; ++i) {
    absl::SleepFor(absl::Milliseconds(1));  // let the waiter block again
    absl::MutexLock lock(&mu);
    sent = absl::Now();
    ++posted;
    changed.Signal();
  }
  waiter.join();
  return latencies;
}

}  // namespace sluice::bench
