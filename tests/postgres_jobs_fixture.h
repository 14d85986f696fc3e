// A fixture for the Postgres backend's job operations (interface v4): a
// fresh migrated database, a backend on it, and records to store.
// Needs SLUICE_TEST_POSTGRES_URL; every test skips without it.
#ifndef SLUICE_TESTS_POSTGRES_JOBS_FIXTURE_H_
#define SLUICE_TESTS_POSTGRES_JOBS_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "pg_session.h"
#include "sluice/backend.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sluice/postgres.h"
#include "support/postgres_test_database.h"

namespace sluice::testing {

inline const absl::Time kJobsT0 = absl::FromUnixSeconds(1'800'000'000);

inline absl::Time At(int seconds) { return kJobsT0 + absl::Seconds(seconds); }

inline Json J(std::string_view text) {
  absl::StatusOr<Json> value = ParseJson(text, "test JSON");
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *value : Json();
}

inline RunId RunNo(uint64_t n) {
  return RunId(0x0190'0000'0000'7000, 0x8000'0000'0000'0000 | n);
}

inline RunRecord MakeRun(uint64_t n, std::string flow = "jobs",
                         absl::Time started_at = kJobsT0) {
  RunRecord run;
  run.run_id = RunNo(n);
  run.flow_slug = std::move(flow);
  run.input = J("{}");
  run.remaining_steps = 1;
  run.started_at = started_at;
  return run;
}

inline TaskRecord MakeTask(uint64_t run, int task_index,
                           std::string queue = "jobs_q") {
  TaskRecord task;
  task.key = {RunNo(run), 0, task_index};
  task.flow_slug = "jobs";
  task.queue_name = std::move(queue);
  task.message_id = 1000 * static_cast<int64_t>(run) + task_index;
  task.queued_at = kJobsT0;
  task.input = J("1");
  return task;
}

template <typename T>
T ValueOf(absl::StatusOr<T> value) {
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? std::move(*value) : T();
}

inline std::vector<RunId> IdsOf(const std::vector<RunRecord>& runs) {
  std::vector<RunId> ids;
  for (const RunRecord& run : runs) ids.push_back(run.run_id);
  return ids;
}

class PostgresJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
    absl::StatusOr<std::unique_ptr<TestDatabase>> db = TestDatabase::Create();
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    absl::StatusOr<std::unique_ptr<Backend>> backend = OpenPostgres(db_->url());
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
  }

  std::unique_ptr<Transaction> Begin() {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    return tx.ok() ? std::move(*tx) : nullptr;
  }

  // Runs `work` in a transaction and commits it; returns the commit's
  // status (or the first failure `work` returned).
  absl::Status InTransaction(
      const std::function<absl::Status(Transaction&)>& work) {
    std::unique_ptr<Transaction> tx = Begin();
    if (tx == nullptr) return absl::InternalError("no transaction");
    if (absl::Status status = work(*tx); !status.ok()) return status;
    return tx->Commit();
  }

  absl::Status Insert(std::vector<RunRecord> runs) {
    return InTransaction(
        [&](Transaction& tx) { return tx.InsertRuns(std::span(runs)); });
  }

  void CreateQueue(std::string name) {
    ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                  return tx.CreateQueue({.name = name, .created_at = kJobsT0});
                }).ok());
  }

  // Sends one message per priority, each visible at `visible_at`; returns
  // their ids in send order.
  std::vector<int64_t> Send(std::string_view queue,
                            const std::vector<int>& priorities,
                            absl::Time visible_at = kJobsT0) {
    std::vector<OutgoingMessage> messages;
    for (int priority : priorities) {
      messages.push_back({.body = J(StrCat(priority)),
                          .visible_at = visible_at,
                          .priority = priority});
    }
    std::unique_ptr<Transaction> tx = Begin();
    if (tx == nullptr) return {};
    std::vector<int64_t> ids =
        ValueOf(tx->SendMessages(queue, std::span(messages), kJobsT0));
    EXPECT_TRUE(tx->Commit().ok());
    return ids;
  }

  // Reads (claims) up to `limit` messages at `now`, committed.
  std::vector<int64_t> Read(std::string_view queue, int limit,
                            absl::Time now = kJobsT0) {
    std::unique_ptr<Transaction> tx = Begin();
    if (tx == nullptr) return {};
    std::vector<MessageRecord> messages = ValueOf(tx->ReadMessages(
        queue, now, limit, now + absl::Minutes(1), Fields::kAll));
    EXPECT_TRUE(tx->Commit().ok());
    std::vector<int64_t> ids;
    for (const MessageRecord& message : messages) {
      ids.push_back(message.message_id);
    }
    return ids;
  }

  void Execute(const std::string& sql) {
    absl::StatusOr<postgres_internal::Session> session =
        postgres_internal::Session::Open(db_->url());
    ASSERT_TRUE(session.ok()) << session.status();
    absl::Status status = session->Execute(sql, "test");
    ASSERT_TRUE(status.ok()) << status;
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<Backend> backend_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_POSTGRES_JOBS_FIXTURE_H_
