// What the SQLite backend's own tests share: a fixture with a fresh file per
// test, a plain connection to look at that file from outside the backend,
// and record builders.
#ifndef SLUICE_TESTS_SUPPORT_SQLITE_TEST_SUPPORT_H_
#define SLUICE_TESTS_SUPPORT_SQLITE_TEST_SUPPORT_H_

#include <sqlite3.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sluice/records.h"
#include "sqlite_backend.h"
#include "sqlite_bound_rows.h"

namespace sluice::sqlite_testing {

inline const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

inline Json J(std::string_view text) {
  absl::StatusOr<Json> value = ParseJson(text, "test JSON");
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *value : Json();
}

// A plain SQLite connection of the test's own, to look at the file from
// outside the backend (or to hold its write lock). It knows `sluice_rows`,
// so it can explain the backend's statements.
class RawDatabase {
 public:
  explicit RawDatabase(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    EXPECT_TRUE(sqlite_internal::RegisterBoundRows(db_).ok());
  }
  ~RawDatabase() { sqlite3_close(db_); }
  RawDatabase(const RawDatabase&) = delete;
  RawDatabase& operator=(const RawDatabase&) = delete;

  void Exec(const std::string& sql) {
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error),
              SQLITE_OK)
        << sql << ": " << (error ? error : "");
    sqlite3_free(error);
  }

  // Every row's columns, joined by '|'.
  std::vector<std::string> Rows(const std::string& sql) {
    std::vector<std::string> rows;
    sqlite3_stmt* statement = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr),
              SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db_);
    while (statement != nullptr && sqlite3_step(statement) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < sqlite3_column_count(statement); ++i) {
        const unsigned char* text = sqlite3_column_text(statement, i);
        StrAppend(&row, i > 0 ? "|" : "",
                  text ? reinterpret_cast<const char*>(text) : "NULL");
      }
      rows.push_back(row);
    }
    sqlite3_finalize(statement);
    return rows;
  }

  std::string Value(const std::string& sql) {
    std::vector<std::string> rows = Rows(sql);
    return rows.empty() ? "" : rows[0];
  }

 private:
  sqlite3* db_ = nullptr;
};

class SqliteBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "sluice_sqlite_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/sluice.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<SqliteBackend> Open(SqliteOptions options = {}) {
    absl::StatusOr<std::unique_ptr<SqliteBackend>> backend =
        SqliteBackend::Open(path_, options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? std::move(*backend) : nullptr;
  }

  static std::unique_ptr<Transaction> Begin(Backend& backend) {
    absl::StatusOr<std::unique_ptr<Transaction>> transaction = backend.Begin();
    EXPECT_TRUE(transaction.ok()) << transaction.status();
    return transaction.ok() ? std::move(*transaction) : nullptr;
  }

  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

inline RunRecord MakeRun(RunId run_id, std::string flow_slug,
                         absl::Time started_at) {
  RunRecord run;
  run.run_id = run_id;
  run.flow_slug = std::move(flow_slug);
  run.input = J(R"({"n":1})");
  run.remaining_steps = 1;
  run.started_at = started_at;
  return run;
}

inline StepStateRecord MakeStep(RunId run_id, int step_index) {
  StepStateRecord step;
  step.run_id = run_id;
  step.step_index = step_index;
  step.step_slug = StrCat("step", step_index);
  return step;
}

inline TaskRecord MakeTask(RunId run_id, int task_index, int64_t message_id) {
  TaskRecord task;
  task.key = TaskKey{run_id, 0, task_index};
  task.flow_slug = "flow";
  task.input = J("[1,2]");
  task.queue_name = "flow";
  task.message_id = message_id;
  task.queued_at = kT0;
  return task;
}

inline QueueRecord MakeQueue(std::string name) {
  return QueueRecord{std::move(name), "flow", kT0};
}

// The value of `result`; fails the test (and returns T{}) on an error.
template <typename T>
T ValueOf(absl::StatusOr<T> result) {
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? std::move(*result) : T{};
}

// The one run GetRuns finds for `run_id` (nullopt if none); fails the test
// on an error.
inline std::optional<RunRecord> GetRun(Transaction& txn, const RunId& run_id,
                                       Fields fields = Fields::kAll) {
  absl::StatusOr<std::vector<std::optional<RunRecord>>> runs =
      txn.GetRuns({&run_id, 1}, LockMode::kNone, fields);
  EXPECT_TRUE(runs.ok()) << runs.status();
  return runs.ok() ? std::move((*runs)[0]) : std::nullopt;
}

}  // namespace sluice::sqlite_testing

#endif  // SLUICE_TESTS_SUPPORT_SQLITE_TEST_SUPPORT_H_
