#include "sqlite_schema.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_join.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_backend.h"
#include "sqlite_schema_parts.h"
#include "sqlite_status.h"

namespace sluice::sqlite_internal {
namespace {

absl::Status Execute(sqlite3* db, const char* sql, std::string_view what) {
  return ExecuteSchemaSql(db, sql, what);
}

// The first column of the first row `sql` returns, as an integer.
absl::StatusOr<int64_t> QueryInt(sqlite3* db, const char* sql,
                                 std::string_view what) {
  sqlite3_stmt* statement = nullptr;
  int result = sqlite3_prepare_v2(db, sql, -1, &statement, nullptr);
  if (result != SQLITE_OK) return StatusFromSqlite(result, db, what);
  result = sqlite3_step(statement);
  int64_t value = result == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : 0;
  sqlite3_finalize(statement);
  if (result != SQLITE_ROW && result != SQLITE_DONE) {
    return StatusFromSqlite(result, db, what);
  }
  return value;
}

// The names of `db`'s tables or indexes (`type`), SQLite's own left out,
// in order.
absl::StatusOr<std::vector<std::string>> ObjectNames(sqlite3* db,
                                                     std::string_view type) {
  sqlite3_stmt* statement = nullptr;
  int result = sqlite3_prepare_v2(
      db,
      "SELECT name FROM sqlite_schema WHERE type = ?1 AND name NOT LIKE "
      "'sqlite\\_%' ESCAPE '\\' ORDER BY name",
      -1, &statement, nullptr);
  if (result != SQLITE_OK) return StatusFromSqlite(result, db, "read schema");
  sqlite3_bind_text(statement, 1, type.data(), static_cast<int>(type.size()),
                    SQLITE_TRANSIENT);
  std::vector<std::string> names;
  while ((result = sqlite3_step(statement)) == SQLITE_ROW) {
    names.emplace_back(
        reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)));
  }
  sqlite3_finalize(statement);
  if (result != SQLITE_DONE) return StatusFromSqlite(result, db, "read schema");
  return names;
}

// What `names` lacks of `expected` (both sorted), comma-separated.
std::string Missing(const std::vector<std::string>& expected,
                    const std::vector<std::string>& names) {
  std::vector<std::string> missing;
  std::set_difference(expected.begin(), expected.end(), names.begin(),
                      names.end(), std::back_inserter(missing));
  return absl::StrJoin(missing, ", ");
}

// Creates every table and index of this version's schema.
absl::Status CreateSchema(sqlite3* db, std::string_view what) {
  for (const TableSchema* table : kSchema) {
    SLUICE_RETURN_IF_ERROR(Execute(db, table->create, what));
    SLUICE_RETURN_IF_ERROR(Execute(db, table->indexes, what));
  }
  return absl::OkStatus();
}

// The tables and indexes of this version's schema, read from a private
// in-memory database, so the list can't drift from the schema.
struct SchemaObjects {
  std::vector<std::string> tables;
  std::vector<std::string> indexes;
};
absl::StatusOr<SchemaObjects> ExpectedObjects() {
  sqlite3* scratch = nullptr;
  int result = sqlite3_open(":memory:", &scratch);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> owned(scratch, &sqlite3_close);
  if (result != SQLITE_OK) {
    return StatusFromSqlite(result, scratch, "create scratch schema");
  }
  SLUICE_RETURN_IF_ERROR(CreateSchema(scratch, "create scratch schema"));
  SchemaObjects objects;
  SLUICE_ASSIGN_OR_RETURN(objects.tables, ObjectNames(scratch, "table"));
  SLUICE_ASSIGN_OR_RETURN(objects.indexes, ObjectNames(scratch, "index"));
  return objects;
}

// kFailedPrecondition naming each table and index of this version's schema
// that the file lacks (dropped by hand, or a damaged copy).
absl::Status CheckObjects(sqlite3* db) {
  SLUICE_ASSIGN_OR_RETURN(SchemaObjects expected, ExpectedObjects());
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> tables,
                          ObjectNames(db, "table"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> indexes,
                          ObjectNames(db, "index"));
  const std::string missing_tables = Missing(expected.tables, tables);
  const std::string missing_indexes = Missing(expected.indexes, indexes);
  if (missing_tables.empty() && missing_indexes.empty()) {
    return absl::OkStatus();
  }
  std::string message = StrCat("the file has Sluice schema version ",
                               SqliteBackend::kSchemaVersion, " but lacks");
  if (!missing_tables.empty()) StrAppend(&message, " tables ", missing_tables);
  if (!missing_tables.empty() && !missing_indexes.empty()) {
    StrAppend(&message, " and");
  }
  if (!missing_indexes.empty()) {
    StrAppend(&message, " indexes ", missing_indexes);
  }
  StrAppend(&message,
            "; restore it from a backup, or start a new file (nothing was "
            "changed)");
  return absl::FailedPreconditionError(message);
}

absl::Status CreateOrCheck(sqlite3* db) {
  constexpr int kVersion = SqliteBackend::kSchemaVersion;
  static_assert(kVersion == 10, "add the migration to the new version");
  SLUICE_ASSIGN_OR_RETURN(int64_t version, QueryInt(db, "PRAGMA user_version",
                                                    "read schema version"));
  if (version == kVersion) return CheckObjects(db);
  if (version > kVersion) {
    return absl::FailedPreconditionError(
        StrCat("schema version ", version, " is newer than version ", kVersion,
               " that this build supports; open it with a newer Sluice"));
  }
  if (version >= 1) {
    if (absl::Status migrated = UpgradeSchema(db, version); !migrated.ok()) {
      return absl::FailedPreconditionError(StrCat(
          "could not upgrade the file from schema version ", version, " to ",
          kVersion, " (nothing was changed): ", migrated.message()));
    }
    SLUICE_RETURN_IF_ERROR(
        Execute(db, StrCat("PRAGMA user_version = ", kVersion).c_str(),
                "set schema version"));
    return CheckObjects(db);
  }
  // Only version 0 (never initialised) remains. Refuse to mix our tables
  // into another application's database.
  SLUICE_ASSIGN_OR_RETURN(
      int64_t objects,
      QueryInt(db, "SELECT count(*) FROM sqlite_schema", "inspect schema"));
  if (objects != 0) {
    return absl::FailedPreconditionError(
        StrCat("the file holds tables but no Sluice schema version "
               "(user_version 0, expected ",
               kVersion, "); use a new file for Sluice"));
  }
  SLUICE_RETURN_IF_ERROR(CreateSchema(db, "create schema"));
  return Execute(db, StrCat("PRAGMA user_version = ", kVersion).c_str(),
                 "set schema version");
}

}  // namespace

absl::Status ExecuteSchemaSql(sqlite3* db, const char* sql,
                              std::string_view what) {
  int result = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (result != SQLITE_OK) return StatusFromSqlite(result, db, what);
  return absl::OkStatus();
}

absl::Status CheckSchema(sqlite3* db) {
  constexpr int kVersion = SqliteBackend::kSchemaVersion;
  SLUICE_ASSIGN_OR_RETURN(int64_t version, QueryInt(db, "PRAGMA user_version",
                                                    "read schema version"));
  if (version == 0) {
    return absl::FailedPreconditionError(
        StrCat("the database has no Sluice schema (user_version 0, expected ",
               kVersion,
               "); open the file once with SqliteBackend::Open (or "
               "OpenBackend(\"sqlite:PATH\")) to create it"));
  }
  if (version != kVersion) {
    return absl::FailedPreconditionError(
        StrCat("the database has Sluice schema version ", version,
               " but this build needs version ", kVersion,
               "; open it once with SqliteBackend::Open of this build to ",
               version < kVersion ? "upgrade it" : "check it"));
  }
  return CheckObjects(db);
}

absl::Status EnsureSchema(sqlite3* db) {
  SLUICE_RETURN_IF_ERROR(
      Execute(db, "BEGIN IMMEDIATE", "begin schema transaction"));
  absl::Status status = CreateOrCheck(db);
  if (status.ok()) status = Execute(db, "COMMIT", "commit schema");
  if (!status.ok() && !sqlite3_get_autocommit(db)) {
    Execute(db, "ROLLBACK", "roll back schema").IgnoreError();
  }
  return status;
}

}  // namespace sluice::sqlite_internal
