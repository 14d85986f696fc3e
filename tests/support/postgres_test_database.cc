#include "support/postgres_test_database.h"

#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "pg_embedded_sql.h"
#include "sluice/postgres.h"

namespace sluice::testing {
namespace {

// SQLSTATE object_in_use: CREATE DATABASE ... TEMPLATE while a session is
// still connected to the template (the server ends a closed session's
// backend asynchronously).
constexpr std::string_view kObjectInUse = "55006";
constexpr absl::Duration kInUseTimeout = absl::Seconds(30);

uint64_t Fnv1a(uint64_t hash, std::string_view bytes) {
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}
constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;

std::string QuoteIdentifier(std::string_view name) {
  std::string quoted = "\"";
  for (char c : name) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

// The advisory lock key every test process agrees on.
std::string LockKey() {
  return absl::StrCat(
      static_cast<int64_t>(Fnv1a(kFnvOffsetBasis, "sluice test databases")));
}

// A plain libpq connection for administrative statements.
class AdminConnection {
 public:
  struct Outcome {
    absl::Status status;
    std::string sqlstate;  // when !status.ok() and the server answered
    std::optional<std::string> value;  // first column of the first row
  };

  static absl::StatusOr<AdminConnection> Open(const std::string& url) {
    PGconn* connection = PQconnectdb(url.c_str());
    if (PQstatus(connection) != CONNECTION_OK) {
      absl::Status status = absl::UnavailableError(absl::StrCat(
          "cannot connect to the test cluster: ", PQerrorMessage(connection)));
      PQfinish(connection);
      return status;
    }
    PQsetNoticeProcessor(
        connection, [](void*, const char*) {}, nullptr);
    return AdminConnection(connection);
  }

  Outcome Run(const std::string& sql,
              const std::vector<std::string>& params = {}) {
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    PGresult* result = PQexecParams(connection_.get(), sql.c_str(),
                                    static_cast<int>(values.size()), nullptr,
                                    values.data(), nullptr, nullptr, 0);
    Outcome outcome;
    ExecStatusType status = PQresultStatus(result);
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
      if (PQntuples(result) > 0 && PQnfields(result) > 0 &&
          !PQgetisnull(result, 0, 0)) {
        outcome.value = PQgetvalue(result, 0, 0);
      }
    } else {
      const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
      outcome.sqlstate = state == nullptr ? "" : state;
      outcome.status = absl::InternalError(
          absl::StrCat("test database: ", sql, ": ",
                       result == nullptr ? PQerrorMessage(connection_.get())
                                         : PQresultErrorMessage(result)));
    }
    PQclear(result);
    return outcome;
  }

  // Runs `sql`, retrying while another session is still connected to a
  // database it needs to itself.
  absl::Status RunWhenUnused(const std::string& sql) {
    const absl::Time deadline = absl::Now() + kInUseTimeout;
    while (true) {
      Outcome outcome = Run(sql);
      if (outcome.sqlstate != kObjectInUse || absl::Now() >= deadline) {
        return outcome.status;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

 private:
  explicit AdminConnection(PGconn* connection)
      : connection_(connection, &PQfinish) {}
  std::unique_ptr<PGconn, decltype(&PQfinish)> connection_;
};

// Makes sure the migrated template exists. The caller holds the lock.
absl::Status EnsureTemplate(AdminConnection& admin, const std::string& url,
                            const std::string& name) {
  AdminConnection::Outcome found = admin.Run(
      "SELECT datistemplate::text FROM pg_database WHERE datname = $1", {name});
  if (!found.status.ok()) return found.status;
  if (found.value == "true") return absl::OkStatus();
  if (found.value.has_value()) {
    // Left half-built by a process that died.
    absl::Status dropped = admin.RunWhenUnused(
        absl::StrCat("DROP DATABASE ", QuoteIdentifier(name), " WITH (FORCE)"));
    if (!dropped.ok()) return dropped;
  }
  absl::Status created = admin.RunWhenUnused(
      absl::StrCat("CREATE DATABASE ", QuoteIdentifier(name)));
  if (!created.ok()) return created;
  if (absl::Status migrated = MigratePostgres(WithDatabase(url, name));
      !migrated.ok()) {
    return absl::Status(migrated.code(),
                        absl::StrCat("migrating the test template ", name, ": ",
                                     migrated.message()));
  }
  return admin
      .Run(absl::StrCat("ALTER DATABASE ", QuoteIdentifier(name),
                        " IS_TEMPLATE true"))
      .status;
}

}  // namespace

std::string PostgresTestUrl() {
  const char* url = std::getenv("SLUICE_TEST_POSTGRES_URL");
  return url == nullptr ? "" : url;
}

std::string WithDatabase(const std::string& url, std::string_view database) {
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) {
    std::string encoded;
    for (unsigned char c : database) {
      if (std::isalnum(c) || c == '_' || c == '-' || c == '.') {
        encoded += static_cast<char>(c);
      } else {
        encoded += absl::StrFormat("%%%02X", c);
      }
    }
    return absl::StrCat(url, url.find('?') == std::string::npos ? "?" : "&",
                        "dbname=", encoded);
  }
  std::string quoted = "'";
  for (char c : database) {
    if (c == '\'' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return absl::StrCat(url, url.empty() ? "" : " ", "dbname=", quoted, "'");
}

std::string PostgresTemplateName() {
  uint64_t hash = kFnvOffsetBasis;
  for (int i = 0; i < postgres_internal::kEmbeddedMigrationCount; ++i) {
    const postgres_internal::EmbeddedMigration& m =
        postgres_internal::kEmbeddedMigrations[i];
    hash = Fnv1a(hash, m.name);
    hash = Fnv1a(hash, std::string_view("\0", 1));
    hash = Fnv1a(hash, m.sql);
    hash = Fnv1a(hash, std::string_view("\0", 1));
  }
  hash = Fnv1a(hash, postgres_internal::kPgmqCompatSql);
  return absl::StrFormat("sluice_tpl_%016x", hash);
}

absl::StatusOr<std::unique_ptr<TestDatabase>> TestDatabase::Create(
    bool migrated) {
  static std::atomic<int> counter{0};
  const std::string admin_url = PostgresTestUrl();
  if (admin_url.empty()) {
    return absl::FailedPreconditionError(kPostgresSkipMessage);
  }
  absl::StatusOr<AdminConnection> admin = AdminConnection::Open(admin_url);
  if (!admin.ok()) return admin.status();
  const std::string name =
      absl::StrFormat("sluice_t_%d_%d", getpid(), counter++);

  // Session-level, so it is released with the connection whatever happens.
  AdminConnection::Outcome locked =
      admin->Run("SELECT pg_advisory_lock($1::bigint)", {LockKey()});
  if (!locked.status.ok()) return locked.status;
  absl::Status status;
  std::string create = absl::StrCat("CREATE DATABASE ", QuoteIdentifier(name));
  if (migrated) {
    const std::string template_name = PostgresTemplateName();
    status = EnsureTemplate(*admin, admin_url, template_name);
    absl::StrAppend(&create, " TEMPLATE ", QuoteIdentifier(template_name));
  }
  if (status.ok()) status = admin->RunWhenUnused(create);
  admin->Run("SELECT pg_advisory_unlock($1::bigint)", {LockKey()})
      .status.IgnoreError();
  if (!status.ok()) return status;
  return std::unique_ptr<TestDatabase>(
      new TestDatabase(name, WithDatabase(admin_url, name), admin_url));
}

TestDatabase::~TestDatabase() {
  absl::StatusOr<AdminConnection> admin = AdminConnection::Open(admin_url_);
  absl::Status status = admin.status();
  if (admin.ok()) {
    status = admin
                 ->Run(absl::StrCat("DROP DATABASE IF EXISTS ",
                                    QuoteIdentifier(name_), " WITH (FORCE)"))
                 .status;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "dropping test database %s: %s\n", name_.c_str(),
                 status.ToString().c_str());
  }
}

}  // namespace sluice::testing
