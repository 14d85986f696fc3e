#include "sqlite_map_floor.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sqlite_schema_parts.h"
#include "sqlite_statement.h"

namespace sluice::bench {
namespace {

using sqlite_internal::ExecuteSchemaSql;
using sqlite_internal::Statement;
using sqlite_internal::StatementCache;

constexpr int kBatch = 100;  // W7's claim batch
constexpr std::string_view kQueue = "bench_w7";
constexpr char kRunId[] = "0190b7d4-7c2e-7000-8000-00000000abcd";

constexpr std::string_view kInsertTask =
    "INSERT INTO tasks (run_seq, run_id, step_index, task_index, flow_slug, "
    "status, attempts, error, queue_name, message_id, queued_at, "
    "requeued_count, worker_id, budget_start, cancel_requested, input) "
    "VALUES (1, ?1, 0, ?2, ?3, 'queued', 0, '', ?3, ?4, ?5, 0, '', 0, 0, ?6)";
constexpr std::string_view kInsertMessage =
    "INSERT INTO messages (queue_name, message_id, priority, seq, "
    "read_count, enqueued_at, visible_at, body) "
    "VALUES (?1, ?2, 0, ?2, 0, ?3, ?3, ?4)";
// A batch's statements, one per table and phase.
constexpr std::string_view kChoose =
    "SELECT message_id FROM messages INDEXED BY messages_ready WHERE "
    "queue_name = ?1 AND read_count = 0 AND visible_at <= enqueued_at "
    "ORDER BY priority DESC, seq LIMIT ?2";
constexpr std::string_view kHide =
    "UPDATE messages SET read_count = read_count + 1, visible_at = ?2 "
    "WHERE queue_name = ?1 AND message_id BETWEEN ?3 AND ?4";
constexpr std::string_view kStart =
    "UPDATE tasks SET status = 'started', attempts = attempts + 1, "
    "started_at = ?2, stall_at = ?2 + 60000000, worker_id = 'floor' WHERE "
    "queue_name = ?1 AND message_id BETWEEN ?3 AND ?4";
constexpr std::string_view kFinish =
    "UPDATE tasks SET status = 'completed', finished_at = ?2, stall_at = "
    "NULL, output = '{\"n\":' || task_index || '}' WHERE queue_name = ?1 "
    "AND message_id BETWEEN ?3 AND ?4";
constexpr std::string_view kRemove =
    "DELETE FROM messages WHERE queue_name = ?1 AND message_id BETWEEN ?2 "
    "AND ?3";

struct CloseDb {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
using Db = std::unique_ptr<sqlite3, CloseDb>;

absl::Status Exec(sqlite3* db, const char* sql) {
  return ExecuteSchemaSql(db, sql, "map floor");
}

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

// Sluice's schema on `path`, then a plain connection to it with the
// backend's settings.
absl::StatusOr<Db> OpenWithSchema(const std::string& url,
                                  const std::string& path) {
  {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, OpenBackend(url));
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                            Engine::Create(*backend));
  }
  sqlite3* raw = nullptr;
  int opened = sqlite3_open(path.c_str(), &raw);
  Db db(raw);
  if (opened != SQLITE_OK) return absl::UnavailableError("cannot open " + path);
  for (const char* pragma :
       {"PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL",
        "PRAGMA temp_store = MEMORY", "PRAGMA wal_autocheckpoint = 10000"}) {
    SLUICE_RETURN_IF_ERROR(Exec(db.get(), pragma));
  }
  return db;
}

void Bind(Statement& statement, int index, int64_t value) {
  statement.BindInt(index, value);
}
// Borrowed: `value` must outlive the execution.
void Bind(Statement& statement, int index, std::string_view value) {
  statement.BindBorrowedText(index, value);
}

// Binds `values` to ?1, ?2, ..., runs `statement` and readies it for the
// next row.
template <typename... Values>
absl::Status RunWith(Statement& statement, const Values&... values) {
  int index = 0;
  (Bind(statement, ++index, values), ...);
  absl::Status run = statement.Run();
  statement.Reset();
  return run;
}

// `sql` (`what` names it) run once with `values`.
template <typename... Values>
absl::Status RunPrepared(StatementCache& cache, std::string_view sql,
                         std::string_view what, const Values&... values) {
  SLUICE_ASSIGN_OR_RETURN(Statement statement, cache.Prepare(sql, what));
  return RunWith(statement, values...);
}

// Every element's task and message, in one transaction.
absl::Status InsertChildren(sqlite3* db, StatementCache& cache, int elements) {
  SLUICE_ASSIGN_OR_RETURN(Statement task,
                          cache.Prepare(kInsertTask, "map floor task"));
  SLUICE_ASSIGN_OR_RETURN(Statement message,
                          cache.Prepare(kInsertMessage, "map floor message"));
  const int64_t now = NowMicros();
  SLUICE_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE"));
  for (int64_t i = 0; i < elements; ++i) {
    const std::string input = absl::StrCat("{\"n\":", i, "}");
    SLUICE_RETURN_IF_ERROR(RunWith(task, kRunId, i, kQueue, i + 1, now, input));
    const std::string body =
        absl::StrCat("{\"flow_slug\":\"bench_w7\",\"run_id\":\"", kRunId,
                     "\",\"step_slug\":\"items\",\"task_index\":", i, "}");
    SLUICE_RETURN_IF_ERROR(RunWith(message, kQueue, i + 1, now, body));
  }
  return Exec(db, "COMMIT");
}

// The message ids a claim chose, [low, high]; empty (high < low) when
// none was left. The map's messages were sent in claim order, so a batch
// is a range.
struct Claimed {
  int64_t low = 1, high = 0;
};

// Up to kBatch ready messages, in claim order.
absl::StatusOr<Claimed> Choose(StatementCache& cache) {
  SLUICE_ASSIGN_OR_RETURN(Statement choose,
                          cache.Prepare(kChoose, "map floor choose"));
  choose.BindBorrowedText(1, kQueue);
  choose.BindInt(2, kBatch);
  Claimed c{.low = INT64_MAX, .high = 0};
  int64_t count = 0;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, choose.Step());
    if (!row) break;
    c.low = std::min(c.low, choose.Int(0));
    c.high = std::max(c.high, choose.Int(0));
    ++count;
  }
  if (count == 0) return Claimed{};
  if (c.high - c.low + 1 != count) {
    return absl::InternalError("map floor: a claim's messages had a gap");
  }
  return c;
}

// One claim's transaction: choose up to kBatch ready messages, hide them,
// start their tasks.
absl::StatusOr<Claimed> Claim(sqlite3* db, StatementCache& cache) {
  SLUICE_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE"));
  const int64_t now = NowMicros();
  SLUICE_ASSIGN_OR_RETURN(Claimed c, Choose(cache));
  if (c.high >= c.low) {
    SLUICE_RETURN_IF_ERROR(RunPrepared(cache, kHide, "map floor hide", kQueue,
                                       now + 60'000'000, c.low, c.high));
    SLUICE_RETURN_IF_ERROR(RunPrepared(cache, kStart, "map floor start", kQueue,
                                       now, c.low, c.high));
  }
  SLUICE_RETURN_IF_ERROR(Exec(db, "COMMIT"));
  return c;
}

// One finish's transaction: the claimed tasks completed with their
// outputs, their messages deleted.
absl::Status Finish(sqlite3* db, StatementCache& cache, const Claimed& c) {
  SLUICE_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE"));
  SLUICE_RETURN_IF_ERROR(RunPrepared(cache, kFinish, "map floor finish", kQueue,
                                     NowMicros(), c.low, c.high));
  SLUICE_RETURN_IF_ERROR(
      RunPrepared(cache, kRemove, "map floor remove", kQueue, c.low, c.high));
  return Exec(db, "COMMIT");
}

// The claims and finishes, kBatch children at a time; the number finished.
absl::StatusOr<int64_t> ClaimAndFinish(sqlite3* db, StatementCache& cache) {
  int64_t finished = 0;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(Claimed claimed, Claim(db, cache));
    if (claimed.high < claimed.low) return finished;
    SLUICE_RETURN_IF_ERROR(Finish(db, cache, claimed));
    finished += claimed.high - claimed.low + 1;
  }
}

}  // namespace

absl::StatusOr<absl::Duration> SqliteMapRowsFloor(const std::string& url,
                                                  int elements) {
  std::string rest = url.substr(url.find(':') + 1);
  SLUICE_ASSIGN_OR_RETURN(Db db,
                          OpenWithSchema(url, rest.substr(0, rest.find('?'))));
  StatementCache cache(db.get());  // destroyed before the connection closes
  const absl::Time start = absl::Now();
  SLUICE_RETURN_IF_ERROR(InsertChildren(db.get(), cache, elements));
  SLUICE_ASSIGN_OR_RETURN(int64_t finished, ClaimAndFinish(db.get(), cache));
  const absl::Duration took = absl::Now() - start;
  if (finished != elements) {
    return absl::InternalError(absl::StrCat("map floor: finished ", finished,
                                            " of ", elements, " children"));
  }
  return took;
}

}  // namespace sluice::bench
