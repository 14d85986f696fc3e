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
#include "pg_session.h"
#include "pg_status.h"
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

using postgres_internal::Session;

// The first column of the first row `sql` returns, if any.
absl::StatusOr<std::optional<std::string>> Value(
    Session& admin, const std::string& sql,
    const std::vector<std::string>& params = {}) {
  absl::StatusOr<postgres_internal::Result> result =
      admin.Query(sql, params, "test database");
  if (!result.ok()) return result.status();
  if (result->rows() == 0 || PQnfields(result->get()) == 0 ||
      PQgetisnull(result->get(), 0, 0)) {
    return std::nullopt;
  }
  return std::string(PQgetvalue(result->get(), 0, 0));
}

absl::Status Run(Session& admin, const std::string& sql,
                 const std::vector<std::string>& params = {}) {
  return admin.Query(sql, params, "test database").status();
}

// Runs `sql`, retrying while another session is still connected to a
// database it needs to itself.
absl::Status RunWhenUnused(Session& admin, const std::string& sql) {
  const absl::Time deadline = absl::Now() + kInUseTimeout;
  while (true) {
    absl::Status status = Run(admin, sql);
    if (postgres_internal::SqlstateOf(status) != kObjectInUse ||
        absl::Now() >= deadline) {
      return status;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// Makes sure the migrated template exists. The caller holds the lock.
absl::Status EnsureTemplate(Session& admin, const std::string& url,
                            const std::string& name) {
  absl::StatusOr<std::optional<std::string>> found = Value(
      admin, "SELECT datistemplate::text FROM pg_database WHERE datname = $1",
      {name});
  if (!found.ok()) return found.status();
  if (*found == "true") return absl::OkStatus();
  if (found->has_value()) {
    // Left half-built by a process that died.
    absl::Status dropped = RunWhenUnused(
        admin,
        absl::StrCat("DROP DATABASE ", QuoteIdentifier(name), " WITH (FORCE)"));
    if (!dropped.ok()) return dropped;
  }
  absl::Status created = RunWhenUnused(
      admin, absl::StrCat("CREATE DATABASE ", QuoteIdentifier(name)));
  if (!created.ok()) return created;
  if (absl::Status migrated = MigratePostgres(WithDatabase(url, name));
      !migrated.ok()) {
    return absl::Status(migrated.code(),
                        absl::StrCat("migrating the test template ", name, ": ",
                                     migrated.message()));
  }
  return Run(admin, absl::StrCat("ALTER DATABASE ", QuoteIdentifier(name),
                                 " IS_TEMPLATE true"));
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
  absl::StatusOr<Session> admin = Session::Open(admin_url);
  if (!admin.ok()) return admin.status();
  const std::string name =
      absl::StrFormat("sluice_t_%d_%d", getpid(), counter++);

  // Session-level, so it is released with the connection whatever happens.
  absl::Status locked =
      Run(*admin, "SELECT pg_advisory_lock($1::bigint)", {LockKey()});
  if (!locked.ok()) return locked;
  absl::Status status;
  std::string create = absl::StrCat("CREATE DATABASE ", QuoteIdentifier(name));
  if (migrated) {
    const std::string template_name = PostgresTemplateName();
    status = EnsureTemplate(*admin, admin_url, template_name);
    absl::StrAppend(&create, " TEMPLATE ", QuoteIdentifier(template_name));
  }
  if (status.ok()) status = RunWhenUnused(*admin, create);
  Run(*admin, "SELECT pg_advisory_unlock($1::bigint)", {LockKey()})
      .IgnoreError();
  if (!status.ok()) return status;
  return std::unique_ptr<TestDatabase>(
      new TestDatabase(name, WithDatabase(admin_url, name), admin_url));
}

TestDatabase::~TestDatabase() {
  absl::StatusOr<Session> admin = Session::Open(admin_url_);
  absl::Status status = admin.status();
  if (admin.ok()) {
    status = Run(*admin, absl::StrCat("DROP DATABASE IF EXISTS ",
                                      QuoteIdentifier(name_), " WITH (FORCE)"));
  }
  if (!status.ok()) {
    std::fprintf(stderr, "dropping test database %s: %s\n", name_.c_str(),
                 status.ToString().c_str());
  }
}

}  // namespace sluice::testing
