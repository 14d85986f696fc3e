// MigratePostgres() and CheckPostgresSchema() (sluice/postgres.h).
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "pg_embedded_sql.h"
#include "pg_session.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sluice/postgres.h"

namespace sluice {
namespace {

using postgres_internal::kEmbeddedMigrationCount;
using postgres_internal::kEmbeddedMigrations;
using postgres_internal::kPgmqCompatSql;
using postgres_internal::Result;
using postgres_internal::Session;

// Session advisory lock key for migrations ("sluice" in ASCII).
constexpr char kMigrationLock[] = "SELECT pg_advisory_lock(126943215970661)";
constexpr char kMigrationUnlock[] =
    "SELECT pg_advisory_unlock(126943215970661)";

constexpr char kBootstrap[] =
    "BEGIN; CREATE SCHEMA IF NOT EXISTS sluice; "
    "CREATE TABLE IF NOT EXISTS sluice.schema_migrations ("
    "version integer PRIMARY KEY, name text NOT NULL, "
    "applied_at timestamptz NOT NULL DEFAULT now()); COMMIT";

// The tables a migrated database has, and the runtime role's rights on
// them (pgmq.meta comes from pgmq or its compatible SQL).
struct ExpectedTable {
  const char* name;
  const char* runtime_privileges;  // comma-separated
};
constexpr ExpectedTable kTables[] = {
    {"sluice.schema_migrations", "SELECT"},
    {"sluice.flows", "SELECT,INSERT,UPDATE,DELETE"},
    {"sluice.queues", "SELECT,INSERT,UPDATE,DELETE"},
    {"sluice.runs", "SELECT,INSERT,UPDATE,DELETE"},
    {"sluice.step_states", "SELECT,INSERT,UPDATE,DELETE"},
    {"sluice.tasks", "SELECT,INSERT,UPDATE,DELETE"},
    {"sluice.outbox", "SELECT,INSERT,UPDATE,DELETE"},
    {"sluice.workers", "SELECT,INSERT,UPDATE,DELETE"},
    {"sluice.attempts", "SELECT,INSERT,UPDATE,DELETE"},
    {"sluice.dedupe", "SELECT,INSERT,UPDATE,DELETE"},
    {"sluice.aliases", "SELECT,INSERT,UPDATE,DELETE"},
    {"sluice.child_links", "SELECT,INSERT,UPDATE,DELETE"},
    {"sluice.child_reports", "SELECT,INSERT,UPDATE,DELETE"},
    {"pgmq.meta", "SELECT"},
};
// Functions, and whether the runtime role must be able to call them.
struct ExpectedFunction {
  const char* signature;
  bool runtime_executes;
};
constexpr ExpectedFunction kFunctions[] = {
    {"sluice.require_found(text,text)", true},
    {"sluice.create_queue(text)", true},
    {"sluice.drop_queue(text)", true},
    {"sluice.add_claim_index(text)", false},
    {"pgmq.create(text)", false},
    {"pgmq.drop_queue(text)", false},
};
constexpr char kRuntimeRole[] = "sluice_runtime";

absl::Status ApplyMigration(Session& session,
                            const postgres_internal::EmbeddedMigration& m) {
  SLUICE_RETURN_IF_ERROR(session.Execute("BEGIN", m.name));
  absl::Status status = absl::OkStatus();
  if (m.version == 1) {
    // pgmq itself (the extension, or an earlier install) is used as is.
    absl::StatusOr<std::string> has_pgmq = session.QueryText(
        "SELECT count(*) FROM pg_namespace WHERE nspname = 'pgmq'", {}, m.name);
    status = has_pgmq.status();
    if (status.ok() && *has_pgmq == "0") {
      status = session.Execute(kPgmqCompatSql, "pgmq_compat.sql");
    }
  }
  if (status.ok()) status = session.Execute(m.sql, m.name);
  if (status.ok()) {
    status = session
                 .Query(
                     "INSERT INTO sluice.schema_migrations (version, name) "
                     "VALUES ($1, $2)",
                     {StrCat(m.version), m.name}, m.name)
                 .status();
  }
  if (status.ok()) status = session.Execute("COMMIT", m.name);
  if (!status.ok()) {
    session.Execute("ROLLBACK", m.name).IgnoreError();
    return absl::Status(status.code(), StrCat("migration ", m.name,
                                              " failed: ", status.message()));
  }
  return absl::OkStatus();
}

// Applies the migrations up to `target` (at most the latest).
absl::Status MigrateLocked(Session& session, int target) {
  SLUICE_RETURN_IF_ERROR(session.Execute(kBootstrap, "create sluice schema"));
  SLUICE_ASSIGN_OR_RETURN(int installed,
                          postgres_internal::InstalledSchemaVersion(session));
  if (installed > kEmbeddedMigrationCount) {
    return absl::FailedPreconditionError(
        StrCat("the database has Sluice schema version ", installed,
               ", newer than version ", kEmbeddedMigrationCount,
               " that this build knows; migrate with a newer Sluice"));
  }
  for (int i = installed; i < target; ++i) {
    SLUICE_RETURN_IF_ERROR(ApplyMigration(session, kEmbeddedMigrations[i]));
  }
  return absl::OkStatus();
}

// Whether `sql` (one boolean) answers true.
absl::StatusOr<bool> Holds(Session& session, std::string_view sql,
                           const std::vector<std::string>& params) {
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          session.Query(sql, params, "check schema"));
  return result.rows() == 1 && result.row(0).Bool();
}

absl::Status CheckTables(Session& session, bool has_role,
                         SchemaReport& report) {
  std::vector<ExpectedTable> tables(std::begin(kTables), std::end(kTables));
  // Each registered queue's pgmq tables.
  std::vector<std::string> queue_tables;
  SLUICE_ASSIGN_OR_RETURN(bool has_queues,
                          Holds(session,
                                "SELECT to_regclass('sluice.queues') IS NOT "
                                "NULL",
                                {}));
  if (has_queues) {
    SLUICE_ASSIGN_OR_RETURN(
        Result queues,
        session.Query("SELECT 'pgmq.' || quote_ident('q_' || name), 'pgmq.' "
                      "|| quote_ident('a_' || name) FROM sluice.queues "
                      "ORDER BY name",
                      {}, "check schema"));
    for (int i = 0; i < queues.rows(); ++i) {
      for (int column : {0, 1}) {
        queue_tables.emplace_back(PQgetvalue(queues.get(), i, column));
      }
    }
  }
  for (const std::string& name : queue_tables) {
    tables.push_back({name.c_str(), "SELECT,INSERT,UPDATE,DELETE"});
  }
  for (const ExpectedTable& table : tables) {
    SLUICE_ASSIGN_OR_RETURN(
        bool exists,
        Holds(session, "SELECT to_regclass($1) IS NOT NULL", {table.name}));
    if (!exists) {
      report.missing_tables.push_back(table.name);
      continue;
    }
    if (!has_role) continue;
    for (absl::string_view privilege :
         absl::StrSplit(table.runtime_privileges, ',')) {
      SLUICE_ASSIGN_OR_RETURN(
          bool granted,
          Holds(session, "SELECT has_table_privilege($1, $2, $3)",
                {kRuntimeRole, table.name, std::string(privilege)}));
      if (!granted) {
        report.missing_privileges.push_back(
            StrCat(kRuntimeRole, ": ", privilege, " on ", table.name));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFunctionsAndSchemas(Session& session, bool has_role,
                                      SchemaReport& report) {
  for (const ExpectedFunction& function : kFunctions) {
    SLUICE_ASSIGN_OR_RETURN(
        bool exists, Holds(session, "SELECT to_regprocedure($1) IS NOT NULL",
                           {function.signature}));
    if (!exists) {
      report.missing_functions.push_back(function.signature);
      continue;
    }
    if (!has_role || !function.runtime_executes) continue;
    SLUICE_ASSIGN_OR_RETURN(
        bool granted,
        Holds(session, "SELECT has_function_privilege($1, $2, 'EXECUTE')",
              {kRuntimeRole, function.signature}));
    if (!granted) {
      report.missing_privileges.push_back(
          StrCat(kRuntimeRole, ": EXECUTE on ", function.signature));
    }
  }
  if (!has_role) return absl::OkStatus();
  // Sending a message draws its FIFO number from this sequence.
  SLUICE_ASSIGN_OR_RETURN(
      bool has_sequence,
      Holds(session, "SELECT to_regclass('sluice.message_seq') IS NOT NULL",
            {}));
  if (has_sequence) {
    SLUICE_ASSIGN_OR_RETURN(
        bool granted,
        Holds(session,
              "SELECT has_sequence_privilege($1, 'sluice.message_seq', "
              "'USAGE')",
              {kRuntimeRole}));
    if (!granted) {
      report.missing_privileges.push_back(
          StrCat(kRuntimeRole, ": USAGE on sequence sluice.message_seq"));
    }
  }
  for (const char* schema : {"sluice", "pgmq"}) {
    SLUICE_ASSIGN_OR_RETURN(
        bool exists,
        Holds(session, "SELECT to_regnamespace($1) IS NOT NULL", {schema}));
    if (!exists) continue;
    SLUICE_ASSIGN_OR_RETURN(
        bool granted,
        Holds(session, "SELECT has_schema_privilege($1, $2, 'USAGE')",
              {kRuntimeRole, schema}));
    if (!granted) {
      report.missing_privileges.push_back(
          StrCat(kRuntimeRole, ": USAGE on schema ", schema));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int LatestPostgresSchemaVersion() { return kEmbeddedMigrationCount; }

namespace postgres_internal {

absl::Status MigratePostgresTo(const std::string& url, int version) {
  if (version < 0 || version > kEmbeddedMigrationCount) {
    return absl::InvalidArgumentError(StrCat("schema version ", version,
                                             " is not between 0 and ",
                                             kEmbeddedMigrationCount));
  }
  SLUICE_ASSIGN_OR_RETURN(Session session, Session::Open(url));
  SLUICE_RETURN_IF_ERROR(session.Execute("SET client_min_messages = warning",
                                         "configure session"));
  // Concurrent migrators wait here; each then sees the others' work.
  SLUICE_RETURN_IF_ERROR(
      session.Execute(kMigrationLock, "take migration lock"));
  absl::Status status = MigrateLocked(session, version);
  session.Execute(kMigrationUnlock, "release migration lock").IgnoreError();
  return status;
}

}  // namespace postgres_internal

absl::Status MigratePostgres(const std::string& url) {
  return postgres_internal::MigratePostgresTo(url, kEmbeddedMigrationCount);
}

absl::StatusOr<SchemaReport> CheckPostgresSchema(const std::string& url) {
  SLUICE_ASSIGN_OR_RETURN(Session session, Session::Open(url));
  SchemaReport report;
  report.latest_version = kEmbeddedMigrationCount;
  SLUICE_ASSIGN_OR_RETURN(report.installed_version,
                          postgres_internal::InstalledSchemaVersion(session));
  SLUICE_ASSIGN_OR_RETURN(
      bool has_role,
      Holds(session,
            "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)",
            {kRuntimeRole}));
  if (!has_role) {
    report.missing_privileges.push_back(
        StrCat("role ", kRuntimeRole, " does not exist"));
  }
  SLUICE_RETURN_IF_ERROR(CheckTables(session, has_role, report));
  SLUICE_RETURN_IF_ERROR(CheckFunctionsAndSchemas(session, has_role, report));
  return report;
}

std::string SchemaReport::ToString() const {
  std::string text = StrCat("schema version ", installed_version, " of ",
                            latest_version, "\n");
  for (const std::string& table : missing_tables) {
    StrAppend(&text, "missing table ", table, "\n");
  }
  for (const std::string& function : missing_functions) {
    StrAppend(&text, "missing function ", function, "\n");
  }
  for (const std::string& privilege : missing_privileges) {
    StrAppend(&text, "missing privilege ", privilege, "\n");
  }
  if (ok()) StrAppend(&text, "ok\n");
  return text;
}

}  // namespace sluice
