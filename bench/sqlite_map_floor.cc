#include "sqlite_map_floor.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sluice/backends.h"
#include "sluice/engine.h"

namespace sluice::bench {
namespace {

constexpr int kBatch = 100;  // W7's claim batch
constexpr std::string_view kQueue = "bench_w7";

struct CloseDb {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
using Db = std::unique_ptr<sqlite3, CloseDb>;

// One prepared statement: Int and Text bind and chain, Step runs one step.
class Sql {
 public:
  static absl::StatusOr<Sql> Prepare(sqlite3* db, const char* text) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, text, -1, &statement, nullptr) != SQLITE_OK) {
      return absl::InternalError(
          absl::StrCat("map floor: ", sqlite3_errmsg(db), " in ", text));
    }
    return Sql(statement);
  }
  Sql& Int(int index, int64_t value) {
    sqlite3_bind_int64(statement_.get(), index, value);
    return *this;
  }
  // `value` must stay put until the statement is reset.
  Sql& Text(int index, std::string_view value) {
    sqlite3_bind_text(statement_.get(), index, value.data(),
                      static_cast<int>(value.size()), SQLITE_STATIC);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(statement_.get()); }
  int64_t Column(int index) {
    return sqlite3_column_int64(statement_.get(), index);
  }
  void Reset() { sqlite3_reset(statement_.get()); }

 private:
  struct Finalize {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  explicit Sql(sqlite3_stmt* statement) : statement_(statement) {}
  std::unique_ptr<sqlite3_stmt, Finalize> statement_;
};

absl::Status Exec(sqlite3* db, const char* text) {
  if (sqlite3_exec(db, text, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return absl::InternalError(
        absl::StrCat("map floor: ", sqlite3_errmsg(db), " in ", text));
  }
  return absl::OkStatus();
}

// Runs `sql` to its end; fails on an error.
absl::Status Done(sqlite3* db, Sql& sql) {
  int result;
  while ((result = sql.Step()) == SQLITE_ROW) {
  }
  sql.Reset();
  if (result != SQLITE_DONE) {
    return absl::InternalError(absl::StrCat("map floor: ", sqlite3_errmsg(db)));
  }
  return absl::OkStatus();
}

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

// Sluice's schema on `path`, then a plain connection to it with the
// backend's settings.
absl::StatusOr<Db> OpenWithSchema(const std::string& url,
                                  const std::string& path) {
  {
    absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url);
    if (!backend.ok()) return backend.status();
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**backend);
    if (!engine.ok()) return engine.status();
  }
  sqlite3* raw = nullptr;
  int opened = sqlite3_open(path.c_str(), &raw);
  Db db(raw);
  if (opened != SQLITE_OK) return absl::UnavailableError("cannot open " + path);
  for (const char* pragma :
       {"PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL",
        "PRAGMA temp_store = MEMORY", "PRAGMA wal_autocheckpoint = 10000"}) {
    if (absl::Status s = Exec(db.get(), pragma); !s.ok()) return s;
  }
  return db;
}

// Every element's task and message, in one transaction.
absl::Status InsertChildren(sqlite3* db, int elements) {
  absl::StatusOr<Sql> task = Sql::Prepare(
      db,
      "INSERT INTO tasks (run_seq, run_id, step_index, task_index, flow_slug, "
      "status, attempts, error, queue_name, message_id, queued_at, "
      "requeued_count, worker_id, budget_start, cancel_requested, input) "
      "VALUES (1, ?1, 0, ?2, ?3, 'queued', 0, '', ?3, ?4, ?5, 0, '', 0, 0, "
      "?6)");
  absl::StatusOr<Sql> message = Sql::Prepare(
      db,
      "INSERT INTO messages (queue_name, message_id, priority, seq, "
      "read_count, enqueued_at, visible_at, body) "
      "VALUES (?1, ?2, 0, ?2, 0, ?3, ?3, ?4)");
  if (!task.ok()) return task.status();
  if (!message.ok()) return message.status();
  const std::string run_id = "0190b7d4-7c2e-7000-8000-00000000abcd";
  const int64_t now = NowMicros();
  if (absl::Status s = Exec(db, "BEGIN IMMEDIATE"); !s.ok()) return s;
  for (int i = 0; i < elements; ++i) {
    const std::string input = absl::StrCat("{\"n\":", i, "}");
    task->Text(1, run_id).Int(2, i).Text(3, kQueue).Int(4, i + 1).Int(5, now);
    task->Text(6, input);
    if (absl::Status s = Done(db, *task); !s.ok()) return s;
    const std::string body =
        absl::StrCat("{\"flow_slug\":\"bench_w7\",\"run_id\":\"", run_id,
                     "\",\"step_slug\":\"items\",\"task_index\":", i, "}");
    message->Text(1, kQueue).Int(2, i + 1).Int(3, now).Text(4, body);
    if (absl::Status s = Done(db, *message); !s.ok()) return s;
  }
  return Exec(db, "COMMIT");
}

// A batch's statements, one per table and phase, in kBatchSql's order.
enum Phase { kChoose, kHide, kStart, kFinish, kRemove };
constexpr const char* kBatchSql[] = {
    "SELECT message_id FROM messages INDEXED BY messages_ready WHERE "
    "queue_name = ?1 AND read_count = 0 AND visible_at <= enqueued_at "
    "ORDER BY priority DESC, seq LIMIT ?2",
    "UPDATE messages SET read_count = read_count + 1, visible_at = ?2 "
    "WHERE queue_name = ?1 AND message_id BETWEEN ?3 AND ?4",
    "UPDATE tasks SET status = 'started', attempts = attempts + 1, "
    "started_at = ?2, stall_at = ?3, worker_id = 'floor' WHERE "
    "queue_name = ?1 AND message_id BETWEEN ?4 AND ?5",
    "UPDATE tasks SET status = 'completed', finished_at = ?2, stall_at = "
    "NULL, output = '{\"n\":' || task_index || '}' WHERE queue_name = ?1 "
    "AND message_id BETWEEN ?3 AND ?4",
    "DELETE FROM messages WHERE queue_name = ?1 AND message_id BETWEEN ?2 "
    "AND ?3",
};

absl::StatusOr<std::vector<Sql>> PrepareBatchSql(sqlite3* db) {
  std::vector<Sql> prepared;
  for (const char* text : kBatchSql) {
    absl::StatusOr<Sql> sql = Sql::Prepare(db, text);
    if (!sql.ok()) return sql.status();
    prepared.push_back(std::move(*sql));
  }
  return prepared;
}

// The message ids a claim chose, [low, high]; empty (high < low) when
// none was left. The map's messages were sent in claim order, so a batch
// is a range.
struct Claimed {
  int64_t low = 1, high = 0;
};

// One claim's transaction: choose up to kBatch ready messages, hide them,
// start their tasks.
absl::StatusOr<Claimed> Claim(sqlite3* db, std::vector<Sql>& sql) {
  if (absl::Status s = Exec(db, "BEGIN IMMEDIATE"); !s.ok()) return s;
  const int64_t now = NowMicros();
  const int64_t hidden_until = now + 60'000'000;
  Sql& choose = sql[kChoose].Text(1, kQueue).Int(2, kBatch);
  Claimed c{.low = INT64_MAX, .high = 0};
  int64_t count = 0;
  for (; choose.Step() == SQLITE_ROW; ++count) {
    c.low = std::min(c.low, choose.Column(0));
    c.high = std::max(c.high, choose.Column(0));
  }
  choose.Reset();
  if (count == 0) c = Claimed{};
  if (c.high - c.low + 1 != count) {
    return absl::InternalError("map floor: a claim's messages had a gap");
  }
  if (count > 0) {
    sql[kHide].Text(1, kQueue).Int(2, hidden_until).Int(3, c.low);
    if (absl::Status s = Done(db, sql[kHide].Int(4, c.high)); !s.ok()) return s;
    sql[kStart].Text(1, kQueue).Int(2, now).Int(3, hidden_until);
    sql[kStart].Int(4, c.low).Int(5, c.high);
    if (absl::Status s = Done(db, sql[kStart]); !s.ok()) return s;
  }
  if (absl::Status s = Exec(db, "COMMIT"); !s.ok()) return s;
  return c;
}

// One finish's transaction: the claimed tasks completed with their
// outputs, their messages deleted.
absl::Status Finish(sqlite3* db, std::vector<Sql>& sql, const Claimed& c) {
  if (absl::Status s = Exec(db, "BEGIN IMMEDIATE"); !s.ok()) return s;
  sql[kFinish].Text(1, kQueue).Int(2, NowMicros()).Int(3, c.low);
  if (absl::Status s = Done(db, sql[kFinish].Int(4, c.high)); !s.ok()) return s;
  sql[kRemove].Text(1, kQueue).Int(2, c.low).Int(3, c.high);
  if (absl::Status s = Done(db, sql[kRemove]); !s.ok()) return s;
  return Exec(db, "COMMIT");
}

// The claims and finishes, kBatch children at a time; the number finished.
absl::StatusOr<int64_t> ClaimAndFinish(sqlite3* db) {
  absl::StatusOr<std::vector<Sql>> sql = PrepareBatchSql(db);
  if (!sql.ok()) return sql.status();
  int64_t finished = 0;
  while (true) {
    absl::StatusOr<Claimed> claimed = Claim(db, *sql);
    if (!claimed.ok()) return claimed.status();
    if (claimed->high < claimed->low) return finished;
    if (absl::Status s = Finish(db, *sql, *claimed); !s.ok()) return s;
    finished += claimed->high - claimed->low + 1;
  }
}

}  // namespace

absl::StatusOr<absl::Duration> SqliteMapRowsFloor(const std::string& url,
                                                  int elements) {
  std::string rest = url.substr(url.find(':') + 1);
  absl::StatusOr<Db> db = OpenWithSchema(url, rest.substr(0, rest.find('?')));
  if (!db.ok()) return db.status();
  const absl::Time start = absl::Now();
  if (absl::Status s = InsertChildren(db->get(), elements); !s.ok()) return s;
  absl::StatusOr<int64_t> finished = ClaimAndFinish(db->get());
  if (!finished.ok()) return finished.status();
  const absl::Duration took = absl::Now() - start;
  if (*finished != elements) {
    return absl::InternalError(absl::StrCat("map floor: finished ", *finished,
                                            " of ", elements, " children"));
  }
  return took;
}

}  // namespace sluice::bench
