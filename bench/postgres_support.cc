#include "postgres_support.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "pg_session.h"
#include "pg_values.h"
#include "sluice/postgres.h"

namespace sluice::bench {
namespace {

using postgres_internal::Session;

absl::StatusOr<Session> Connect(const std::string& url) {
  return Session::Open(url);
}

// Runs one statement and returns its result.
absl::StatusOr<postgres_internal::Result> Run(PGconn* c,
                                              const std::string& sql) {
  return postgres_internal::Query(c, sql, {}, "bench");
}

// Runs `sql`, which may hold several statements.
absl::Status Exec(PGconn* c, const std::string& sql) {
  return postgres_internal::Execute(c, sql, "bench");
}

// libpq URLs may name the database again in the query string; the last
// setting wins.
std::string WithDatabase(const std::string& url, const std::string& name) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") +
         "dbname=" + name;
}

}  // namespace

bool IsPostgresUrl(const std::string& url) {
  return url.rfind("postgres://", 0) == 0 || url.rfind("postgresql://", 0) == 0;
}

absl::StatusOr<std::string> FreshPostgresDatabase(const std::string& url,
                                                  const std::string& name) {
  absl::StatusOr<Session> admin = Connect(url);
  if (!admin.ok()) return admin.status();
  if (absl::Status s = Exec(
          admin->get(), "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Exec(admin->get(), "CREATE DATABASE " + name); !s.ok()) {
    return s;
  }
  std::string fresh = WithDatabase(url, name);
  if (absl::Status s = MigratePostgres(fresh); !s.ok()) return s;
  return fresh;
}

absl::StatusOr<double> PostgresJobsBaseline(const std::string& url, int jobs) {
  absl::StatusOr<Session> c = Connect(url);
  if (!c.ok()) return c.status();
  PGconn* db = c->get();
  for (const char* sql :
       {"CREATE TABLE jobs (id bigserial PRIMARY KEY, payload json NOT NULL, "
        "status int NOT NULL, attempts int NOT NULL, output json)",
        "CREATE INDEX jobs_queued ON jobs (id) WHERE status = 0"}) {
    if (absl::Status s = Exec(db, sql); !s.ok()) return s;
  }
  absl::Time start = absl::Now();
  for (int first = 0; first < jobs; first += 500) {
    int last = std::min(jobs, first + 500) - 1;
    if (absl::Status s = Exec(
            db,
            "INSERT INTO jobs (payload, status, attempts) SELECT "
            "json_build_object('n', i), 0, 0 FROM generate_series(" +
                std::to_string(first) + ", " + std::to_string(last) + ") AS i");
        !s.ok()) {
      return s;
    }
  }
  int done = 0;
  while (true) {
    auto claimed =
        Run(db,
            "UPDATE jobs SET status = 1, attempts = attempts + 1 WHERE id IN "
            "(SELECT id FROM jobs WHERE status = 0 ORDER BY id LIMIT 10 FOR "
            "UPDATE SKIP LOCKED) RETURNING id, payload");
    if (!claimed.ok()) return claimed.status();
    int n = PQntuples(claimed->get());
    if (n == 0) break;
    postgres_internal::ArrayLiteral id_array;
    for (int i = 0; i < n; ++i) id_array.Int(claimed->row(i).Int());
    const std::string ids = std::move(id_array).Take();
    if (absl::Status s = Exec(db,
                              "UPDATE jobs SET status = 2, output = "
                              "payload WHERE id = ANY('" +
                                  ids + "'::bigint[])");
        !s.ok()) {
      return s;
    }
    done += n;
  }
  double rate = done / absl::ToDoubleSeconds(absl::Now() - start);
  if (done != jobs) return absl::InternalError("baseline lost jobs");
  return rate;
}

double PgCost::HotRatio() const {
  int64_t updates = 0, hot = 0;
  for (const PgTableUpdates& t : tables) {
    updates += t.updates;
    hot += t.hot;
  }
  return updates == 0 ? 0 : static_cast<double>(hot) / updates;
}

std::string PgCost::TableSummary() const {
  std::string summary;
  for (const PgTableUpdates& t : tables) {
    if (!summary.empty()) summary += ",";
    summary +=
        t.table + ":" + std::to_string(t.hot) + "/" + std::to_string(t.updates);
  }
  return summary.empty() ? "none" : summary;
}

absl::Status AnalyzePostgres(const std::string& url) {
  absl::StatusOr<Session> c = Connect(url);
  if (!c.ok()) return c.status();
  return Exec(c->get(), "ANALYZE");
}

absl::StatusOr<int64_t> PostgresWalPosition(const std::string& url) {
  absl::StatusOr<Session> c = Connect(url);
  if (!c.ok()) return c.status();
  auto position = Run(c->get(),
                      "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), "
                      "'0/0')::bigint");
  if (!position.ok()) return position.status();
  return std::stoll(PQgetvalue(position->get(), 0, 0));
}

namespace {

absl::StatusOr<std::vector<PgTableUpdates>> TableUpdates(PGconn* db) {
  // Each statement is its own transaction, so it reads fresh statistics.
  auto rows = Run(db,
                  "SELECT schemaname || '.' || relname, n_tup_upd, "
                  "n_tup_hot_upd FROM pg_stat_user_tables "
                  "WHERE n_tup_upd > 0 ORDER BY 1");
  if (!rows.ok()) return rows.status();
  std::vector<PgTableUpdates> tables;
  for (int i = 0; i < PQntuples(rows->get()); ++i) {
    tables.push_back({PQgetvalue(rows->get(), i, 0),
                      std::stoll(PQgetvalue(rows->get(), i, 1)),
                      std::stoll(PQgetvalue(rows->get(), i, 2))});
  }
  return tables;
}

bool SameUpdates(const std::vector<PgTableUpdates>& a,
                 const std::vector<PgTableUpdates>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].table != b[i].table || a[i].updates != b[i].updates ||
        a[i].hot != b[i].hot) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status ReadTableUpdates(const std::string& url, PgCost* cost) {
  absl::StatusOr<Session> c = Connect(url);
  if (!c.ok()) return c.status();
  std::vector<PgTableUpdates> last;
  absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (true) {
    absl::StatusOr<std::vector<PgTableUpdates>> now = TableUpdates(c->get());
    if (!now.ok()) return now.status();
    if ((!now->empty() && SameUpdates(*now, last)) || absl::Now() > give_up) {
      cost->tables = std::move(*now);
      return absl::OkStatus();
    }
    last = std::move(*now);
    absl::SleepFor(absl::Milliseconds(700));
  }
}

absl::StatusOr<std::vector<absl::Duration>> PostgresNotifyBaseline(
    const std::string& url, int samples) {
  absl::StatusOr<Session> listener = Connect(url);
  if (!listener.ok()) return listener.status();
  absl::StatusOr<Session> sender = Connect(url);
  if (!sender.ok()) return sender.status();
  PGconn* l = listener->get();
  PGconn* s = sender->get();
  for (const char* sql :
       {"CREATE TABLE wakeups (id bigserial PRIMARY KEY, payload json)",
        "LISTEN bench_wakeups"}) {
    if (absl::Status st = Exec(sql[0] == 'L' ? l : s, sql); !st.ok()) return st;
  }
  std::vector<absl::Duration> latencies;
  for (int i = 0; i < samples; ++i) {
    absl::Time sent = absl::Now();
    if (absl::Status st = Exec(s,
                               "BEGIN; INSERT INTO wakeups (payload) VALUES "
                               "('{}'); NOTIFY bench_wakeups; COMMIT");
        !st.ok()) {
      return st;
    }
    while (true) {
      PQconsumeInput(l);
      PGnotify* note = PQnotifies(l);
      if (note != nullptr) {
        PQfreemem(note);
        break;
      }
      pollfd fd{PQsocket(l), POLLIN, 0};
      if (poll(&fd, 1, 5000) <= 0) {
        return absl::DeadlineExceededError("bench: no notification in 5 s");
      }
    }
    auto row = Run(l, "SELECT payload FROM wakeups ORDER BY id DESC LIMIT 1");
    if (!row.ok()) return row.status();
    latencies.push_back(absl::Now() - sent);
  }
  return latencies;
}

}  // namespace sluice::bench
