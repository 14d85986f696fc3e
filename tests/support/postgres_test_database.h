// Fresh Postgres databases for tests, on the cluster named by the
// environment variable SLUICE_TEST_POSTGRES_URL (a superuser's libpq URL,
// e.g. postgresql:///postgres?host=/tmp/pg&port=5499&user=postgres).
//
// A migrated database is a copy of a template database that is migrated
// once per cluster and per set of embedded SQL: the template's name carries
// a 64-bit FNV-1a hash of every migration and of the pgmq-compatible SQL
// the library embeds, so editing a migration makes a new template instead
// of cloning a stale one. Building the template and cloning it are
// serialized across processes by an advisory lock; a template counts as
// complete only once it is marked IS_TEMPLATE, so one left half-built by a
// crashed process is rebuilt. Cloning takes milliseconds.
//
//   if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
//   absl::StatusOr<std::unique_ptr<TestDatabase>> db = TestDatabase::Create();
//   ASSERT_TRUE(db.ok()) << db.status();
//   ... OpenPostgres((*db)->url()) ...
//
// Thread-safety: Create() may be called from several threads and processes
// at once; a TestDatabase itself is immutable.
#ifndef SLUICE_TESTS_SUPPORT_POSTGRES_TEST_DATABASE_H_
#define SLUICE_TESTS_SUPPORT_POSTGRES_TEST_DATABASE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sluice::testing {

inline constexpr char kPostgresSkipMessage[] =
    "set SLUICE_TEST_POSTGRES_URL to a superuser URL of a scratch cluster "
    "(scripts/pg_cluster.sh start DIR PORT prints one) to run the Postgres "
    "tests";

// SLUICE_TEST_POSTGRES_URL, or "" when unset.
std::string PostgresTestUrl();

// `url` (a libpq URI or key=value string) with `dbname` set to `database`.
// The setting is appended, and libpq takes the last setting of a keyword.
std::string WithDatabase(const std::string& url, std::string_view database);

// The name of the migrated template for the SQL this build embeds.
std::string PostgresTemplateName();

// One database, dropped on destruction.
class TestDatabase {
 public:
  // A new database on the SLUICE_TEST_POSTGRES_URL cluster: a copy of the
  // migrated template, or an empty database when `migrated` is false.
  // kFailedPrecondition (with kPostgresSkipMessage) when the variable is
  // unset; the server's error when it can't be reached or migration fails.
  static absl::StatusOr<std::unique_ptr<TestDatabase>> Create(
      bool migrated = true);
  // Drops the database WITH (FORCE), disconnecting whoever is still
  // connected; a failure is printed to stderr.
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;

  // The database's name: sluice_t_<pid>_<counter>.
  const std::string& name() const { return name_; }
  // A superuser URL of this database.
  const std::string& url() const { return url_; }
  // The cluster's superuser URL (SLUICE_TEST_POSTGRES_URL), for work outside
  // this database, such as looking at pg_stat_activity.
  const std::string& admin_url() const { return admin_url_; }

 private:
  TestDatabase(std::string name, std::string url, std::string admin_url)
      : name_(std::move(name)),
        url_(std::move(url)),
        admin_url_(std::move(admin_url)) {}

  std::string name_;
  std::string url_;
  std::string admin_url_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_POSTGRES_TEST_DATABASE_H_
