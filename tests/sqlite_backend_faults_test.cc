// SQLite files that are not what the backend expects: not a database, a
// Sluice schema with tables missing, another application's tables, a full
// disk, a read-only file. Each gives a clear error naming the cause and
// loses nothing.
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/backends.h"
#include "sluice/internal/strings.h"
#include "sqlite_backend.h"
#include "support/sqlite_test_support.h"

namespace sluice {
namespace {

using ::sluice::sqlite_testing::GetRun;
using ::sluice::sqlite_testing::J;
using ::sluice::sqlite_testing::kT0;
using ::sluice::sqlite_testing::MakeRun;
using ::sluice::sqlite_testing::RawDatabase;
using ::sluice::sqlite_testing::SqliteBackendTest;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

using SqliteFaultsTest = SqliteBackendTest;

std::string FileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The user tables of the file at `path`.
std::vector<std::string> Tables(const std::string& path) {
  return RawDatabase(path).Rows(
      "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE "
      "'sqlite_%' ORDER BY name");
}

absl::Status InsertRun(Backend& backend, RunRecord run) {
  absl::StatusOr<std::unique_ptr<Transaction>> txn = backend.Begin();
  if (!txn.ok()) return txn.status();
  absl::Status status = (*txn)->InsertRuns({&run, 1});
  return status.ok() ? (*txn)->Commit() : status;
}

TEST_F(SqliteFaultsTest, FileThatIsNotADatabase_IsFailedPrecondition) {
  const std::string junk(8192, 'x');
  std::ofstream(path()) << junk;

  absl::Status status = SqliteBackend::Open(path()).status();

  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(path()), HasSubstr("not a database")));
  EXPECT_EQ(FileText(path()), junk);
}

TEST_F(SqliteFaultsTest, EmptyFile_IsCreatedAndMigrated) {
  std::ofstream(path()).flush();
  ASSERT_EQ(std::filesystem::file_size(path()), 0u);

  ASSERT_NE(Open(), nullptr);

  EXPECT_EQ(RawDatabase(path()).Value("PRAGMA user_version"),
            StrCat(SqliteBackend::kSchemaVersion));
  EXPECT_THAT(Tables(path()), testing::Contains("runs"));
}

TEST_F(SqliteFaultsTest, SluiceTablesDropped_FailsAtOpenNamingThem) {
  ASSERT_NE(Open(), nullptr);
  RawDatabase(path()).Exec("DROP TABLE tasks; DROP INDEX runs_by_flow");
  const std::vector<std::string> tables = Tables(path());

  absl::Status status = SqliteBackend::Open(path()).status();

  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(
      status.message(),
      AllOf(HasSubstr(path()), HasSubstr("tables tasks"),
            HasSubstr("indexes runs_by_flow"), Not(HasSubstr("step_states"))));
  EXPECT_EQ(Tables(path()), tables);  // nothing recreated behind our back
}

TEST_F(SqliteFaultsTest, ForeignSchemaWithSluiceVersion_FailsNamingTables) {
  RawDatabase(path()).Exec(
      StrCat("CREATE TABLE invoices (id INTEGER); PRAGMA user_version = ",
             SqliteBackend::kSchemaVersion));

  absl::Status status = OpenBackend(StrCat("sqlite:", path())).status();

  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(path()), HasSubstr("runs"), HasSubstr("tasks")));
  EXPECT_THAT(Tables(path()), ElementsAre("invoices"));
}

TEST_F(SqliteFaultsTest, DiskFull_IsResourceExhausted_AndLosesNothing) {
  ASSERT_NE(Open(), nullptr);
  const int64_t pages =
      std::stoll(RawDatabase(path()).Value("PRAGMA page_count"));
  const Json big = J(StrCat(R"({"blob":")", std::string(20'000, 'x'), "\"}"));

  std::vector<RunRecord> committed;
  std::optional<RunRecord> refused;
  absl::Status full;
  {
    std::unique_ptr<SqliteBackend> backend = Open({.max_pages = pages + 20});
    ASSERT_NE(backend, nullptr);
    for (int i = 0; i < 100 && !refused.has_value(); ++i) {
      RunRecord run = MakeRun(RunId::Random(), "flow", kT0);
      run.input = big;
      full = InsertRun(*backend, run);
      if (full.ok()) {
        committed.push_back(run);
      } else {
        refused = run;
      }
    }
  }
  ASSERT_TRUE(refused.has_value()) << "the file never filled up";
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_THAT(full.message(), HasSubstr("full"));
  EXPECT_GT(committed.size(), 0u);

  std::unique_ptr<SqliteBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  {
    absl::StatusOr<std::unique_ptr<Transaction>> txn = backend->Begin();
    ASSERT_TRUE(txn.ok()) << txn.status();
    for (const RunRecord& run : committed) {
      std::optional<RunRecord> stored = GetRun(**txn, run.run_id);
      ASSERT_TRUE(stored.has_value());
      EXPECT_EQ(stored->input, big);
    }
    EXPECT_FALSE(GetRun(**txn, refused->run_id).has_value());
  }
  // With room again, the refused write goes through.
  EXPECT_TRUE(InsertRun(*backend, *refused).ok());
}

// Makes a file read-only even to root (the immutable attribute), else by
// its mode, and undoes that when destroyed.
class ReadOnlyFile {
 public:
  explicit ReadOnlyFile(std::string path) : path_(std::move(path)) {
    if (geteuid() == 0) {
      immutable_ = SetImmutable(true);
    } else {
      chmod(path_.c_str(), 0444);
    }
  }
  ~ReadOnlyFile() {
    if (immutable_) SetImmutable(false);
    chmod(path_.c_str(), 0644);
  }
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  // Whether writing the file really fails now.
  bool read_only() const {
    const int fd = open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) close(fd);
    return fd < 0;
  }

 private:
  bool SetImmutable(bool on) {
    const int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    int flags = 0;
    bool done = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
    flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
    done = done && ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
    close(fd);
    return done;
  }

  std::string path_;
  bool immutable_ = false;
};

TEST_F(SqliteFaultsTest, ReadOnlyFile_IsFailedPrecondition_AndLosesNothing) {
  RunRecord run = MakeRun(RunId::Random(), "flow", kT0);
  {
    std::unique_ptr<SqliteBackend> backend = Open();
    ASSERT_NE(backend, nullptr);
    ASSERT_TRUE(InsertRun(*backend, run).ok());
  }
  const std::string before = FileText(path());
  {
    ReadOnlyFile read_only(path());
    if (!read_only.read_only()) {
      GTEST_SKIP() << "cannot make " << path() << " read-only here";
    }

    absl::Status status = SqliteBackend::Open(path()).status();

    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(status.message(),
                AllOf(HasSubstr(path()), HasSubstr("read-only")));
    EXPECT_EQ(FileText(path()), before);
  }
  std::unique_ptr<SqliteBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  absl::StatusOr<std::unique_ptr<Transaction>> txn = backend->Begin();
  ASSERT_TRUE(txn.ok()) << txn.status();
  std::optional<RunRecord> stored = GetRun(**txn, run.run_id);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->input, run.input);
}

}  // namespace
}  // namespace sluice
