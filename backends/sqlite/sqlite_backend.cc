#include "sqlite_backend.h"

#include <sqlite3.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_bound_rows.h"
#include "sqlite_connection.h"
#include "sqlite_schema.h"
#include "sqlite_status.h"
#include "sqlite_transaction.h"

namespace sluice {
namespace {

using sqlite_internal::StatusFromSqlite;

// The wait before busy retry `attempt` (0-based): 50 us doubling to a 2 ms
// cap. SQLite's own busy timeout never waits under 1 ms, too coarse for
// processes that hand the write lock back and forth every few microseconds.
constexpr int kBusyDoublings = 6;  // 50 us << 6 = 3.2 ms, past the cap
absl::Duration BusyDelay(int attempt) {
  return std::min(absl::Microseconds(50 << std::min(attempt, kBusyDoublings)),
                  absl::Milliseconds(2));
}

// The time waited before retry `attempt`: the sum of the earlier delays.
absl::Duration BusyWaited(int attempt) {
  absl::Duration waited;
  for (int i = 0; i < std::min(attempt, kBusyDoublings); ++i) {
    waited += BusyDelay(i);
  }
  if (attempt > kBusyDoublings) {
    waited += BusyDelay(kBusyDoublings) * (attempt - kBusyDoublings);
  }
  return waited;
}

// sqlite3_busy_handler callback: nonzero means "retry", zero gives up and
// the statement fails with SQLITE_BUSY.
int WaitForWriteLock(void* busy_timeout, int attempt) {
  const auto& timeout = *static_cast<const absl::Duration*>(busy_timeout);
  if (BusyWaited(attempt) >= timeout) return 0;
  absl::SleepFor(BusyDelay(attempt));
  return 1;
}

absl::Status Execute(sqlite3* db, const char* sql, std::string_view what) {
  int result = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (result != SQLITE_OK) return StatusFromSqlite(result, db, what);
  return absl::OkStatus();
}

// The text of the first column of the first row `sql` returns.
absl::StatusOr<std::string> QueryText(sqlite3* db, const char* sql,
                                      std::string_view what) {
  sqlite3_stmt* statement = nullptr;
  int result = sqlite3_prepare_v2(db, sql, -1, &statement, nullptr);
  if (result != SQLITE_OK) return StatusFromSqlite(result, db, what);
  result = sqlite3_step(statement);
  std::string text;
  if (result == SQLITE_ROW) {
    const unsigned char* value = sqlite3_column_text(statement, 0);
    if (value != nullptr) text = reinterpret_cast<const char*>(value);
  }
  sqlite3_finalize(statement);
  if (result != SQLITE_ROW && result != SQLITE_DONE) {
    return StatusFromSqlite(result, db, what);
  }
  return text;
}

absl::Status Configure(SqliteBackend::Connection& connection,
                       const SqliteOptions& options) {
  sqlite3* db = connection.db.get();
  sqlite3_busy_handler(db, WaitForWriteLock,
                       const_cast<absl::Duration*>(&connection.busy_timeout));
  absl::StatusOr<std::string> journal_mode =
      QueryText(db, "PRAGMA journal_mode = WAL", "enable WAL");
  if (!journal_mode.ok()) return journal_mode.status();
  // Private databases (":memory:", "") can't use WAL, and needn't: no other
  // process can open them.
  const char* file = sqlite3_db_filename(db, "main");
  bool is_private = file == nullptr || file[0] == '\0';
  if (*journal_mode != "wal" && !is_private) {
    return absl::FailedPreconditionError(
        StrCat("the file can't use WAL mode (journal_mode is \"", *journal_mode,
               "\"); put it on a local file system"));
  }
  // Statement journals (which SQLite opens for every UPDATE ... RETURNING or
  // multi-row write inside a transaction) then live in memory in small
  // chunks. With file temp storage each one allocated a 64 KiB chunk, and
  // freeing it made malloc hand memory back to the kernel every statement:
  // a third of all time in a batch benchmark.
  SLUICE_RETURN_IF_ERROR(
      Execute(db, "PRAGMA temp_store = MEMORY", "set temp_store"));
  // A checkpoint copies the WAL back into the database file and syncs both,
  // inside the COMMIT that crossed the threshold; every other transaction
  // of the process waits meanwhile. The syncs cost the same however many
  // pages are copied, and a page rewritten many times is copied once, so
  // fewer, larger checkpoints cost far less per commit than SQLite's
  // default of one per 1,000 pages.
  SLUICE_RETURN_IF_ERROR(Execute(
      db,
      StrCat("PRAGMA wal_autocheckpoint = ", options.checkpoint_pages).c_str(),
      "set wal_autocheckpoint"));
  if (options.max_pages > 0) {
    SLUICE_RETURN_IF_ERROR(Execute(
        db, StrCat("PRAGMA max_page_count = ", options.max_pages).c_str(),
        "set max_page_count"));
  }
  return Execute(db,
                 options.synchronous_full ? "PRAGMA synchronous = FULL"
                                          : "PRAGMA synchronous = NORMAL",
                 "set synchronous");
}

}  // namespace

absl::StatusOr<SqliteUrl> ParseSqliteUrl(std::string_view rest) {
  const size_t query = rest.find('?');
  SqliteUrl url{.path = std::string(rest.substr(0, query))};
  if (url.path.empty()) {
    return absl::InvalidArgumentError(
        "backend URL \"sqlite:\" has no path; use sqlite:PATH");
  }
  if (query == std::string_view::npos) return url;
  for (absl::string_view option :
       absl::StrSplit(ToAbsl(rest.substr(query + 1)), '&')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(option, absl::MaxSplits('=', 1));
    if (kv.first != "synchronous") {
      return absl::InvalidArgumentError(
          StrCat("sqlite URL option \"", option,
                 "\" is not recognized; the one option is "
                 "synchronous=normal|full"));
    }
    const std::string value = absl::AsciiStrToLower(kv.second);
    if (value == "normal") {
      url.options.synchronous_full = false;
    } else if (value == "full") {
      url.options.synchronous_full = true;
    } else {
      return absl::InvalidArgumentError(
          StrCat("sqlite URL option synchronous=\"", kv.second,
                 "\" is not recognized; use synchronous=normal or "
                 "synchronous=full"));
    }
  }
  return url;
}

SqliteBackend::SqliteBackend(std::unique_ptr<Connection> connection)
    : connection_(std::move(connection)) {}

SqliteBackend::~SqliteBackend() = default;

absl::StatusOr<std::unique_ptr<SqliteBackend>> SqliteBackend::Open(
    const std::string& path, SqliteOptions options) {
  auto naming_file = [&path](const absl::Status& status) {
    return absl::Status(status.code(), StrCat("sqlite database \"", path,
                                              "\": ", status.message()));
  };
  sqlite3* db = nullptr;
  // NOMUTEX: the connection's own mutex already keeps threads apart.
  int result = sqlite3_open_v2(path.c_str(), &db,
                               SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                   SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
                               nullptr);
  // Owns `db` from here, even when opening failed.
  auto connection = std::make_unique<Connection>(db, options.busy_timeout);
  if (result != SQLITE_OK) {
    return naming_file(StatusFromSqlite(result, db, "open"));
  }
  // SQLite quietly opens a file it may not write read-only; every write
  // would fail later, so say so now.
  if (sqlite3_db_readonly(db, "main") == 1) {
    return naming_file(absl::FailedPreconditionError(
        "the file is read-only to this process (its permissions, or a "
        "read-only file system); Sluice must write it, so make it writable"));
  }
  absl::Status status = Configure(*connection, options);
  if (status.ok()) status = sqlite_internal::RegisterBoundRows(db);
  if (status.ok()) status = sqlite_internal::EnsureSchema(db);
  if (!status.ok()) return naming_file(status);
  return std::unique_ptr<SqliteBackend>(
      new SqliteBackend(std::move(connection)));
}

absl::StatusOr<std::unique_ptr<SqliteBackend>> SqliteBackend::Borrow(
    sqlite3* db) {
  if (db == nullptr) {
    return absl::InvalidArgumentError(
        "BorrowSqlite: the connection is null; pass the host's open sqlite3* "
        "with a transaction begun on it");
  }
  if (sqlite3_get_autocommit(db)) {
    return absl::FailedPreconditionError(
        "BorrowSqlite: the host's connection has no open transaction; run "
        "BEGIN IMMEDIATE on it first, so Sluice's writes commit with the "
        "host's");
  }
  if (absl::Status schema = sqlite_internal::CheckSchema(db); !schema.ok()) {
    return absl::Status(schema.code(),
                        StrCat("BorrowSqlite: ", schema.message()));
  }
  SLUICE_RETURN_IF_ERROR(sqlite_internal::RegisterBoundRows(db));
  auto connection = std::make_unique<Connection>(db, absl::ZeroDuration(),
                                                 /*borrowed=*/true);
  return std::unique_ptr<SqliteBackend>(
      new SqliteBackend(std::move(connection)));
}

absl::StatusOr<std::unique_ptr<Backend>> BorrowSqlite(sqlite3* db) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<SqliteBackend> backend,
                          SqliteBackend::Borrow(db));
  return std::unique_ptr<Backend>(std::move(backend));
}

sqlite3* SqliteHandle(const NativeConnection& connection) {
  if (connection.backend != "sqlite") return nullptr;
  return static_cast<sqlite3*>(connection.handle);
}

absl::StatusOr<std::unique_ptr<Transaction>> SqliteBackend::Begin() {
  return sqlite_internal::SqliteTransaction::Begin(*connection_);
}

}  // namespace sluice
