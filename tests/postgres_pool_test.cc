// The Postgres backend's connection pool: waiters are served in the order
// they came, a closed connection's slot goes to the next waiter, and a
// waiter that gives up leaves the queue. Needs SLUICE_TEST_POSTGRES_URL.
#include <libpq-fe.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "pg_connection.h"
#include "pg_pool.h"
#include "sluice/internal/strings.h"
#include "sluice/postgres.h"
#include "support/postgres_test_database.h"

namespace sluice::testing {
namespace {

using postgres_internal::Connection;
using postgres_internal::ConnectionPool;

constexpr absl::Duration kDeadline = absl::Seconds(30);

class PostgresPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
  }

  static PostgresOptions OneConnection(
      absl::Duration acquire_timeout = kDeadline) {
    PostgresOptions options;
    options.pool_size = 1;
    options.acquire_timeout = acquire_timeout;
    return options;
  }

  // Waits until `count` callers wait in `pool`; false at the deadline.
  static bool AwaitWaiting(ConnectionPool& pool, int count) {
    const absl::Time deadline = absl::Now() + kDeadline;
    while (pool.waiting() < count) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return true;
  }
};

TEST_F(PostgresPoolTest, Waiters_AreServedInTheOrderTheyCame) {
  ConnectionPool pool(PostgresTestUrl(), OneConnection());
  absl::StatusOr<std::unique_ptr<Connection>> held = pool.Acquire();
  ASSERT_TRUE(held.ok()) << held.status();
  absl::Mutex mu;
  std::vector<int> served;  // guarded by mu
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&pool, &mu, &served, i] {
      absl::StatusOr<std::unique_ptr<Connection>> taken = pool.Acquire();
      ASSERT_TRUE(taken.ok()) << taken.status();
      {
        absl::MutexLock lock(&mu);
        served.push_back(i);
      }
      pool.Release(*std::move(taken));
    });
    // Each starts waiting only after the one before it.
    ASSERT_TRUE(AwaitWaiting(pool, i + 1)) << "waiter " << i << " never waited";
  }
  pool.Release(*std::move(held));
  for (std::thread& waiter : waiters) waiter.join();
  EXPECT_EQ(served, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(pool.waiting(), 0);
}

TEST_F(PostgresPoolTest, ABrokenConnectionsSlot_GoesToTheNextWaiter) {
  ConnectionPool pool(PostgresTestUrl(), OneConnection());
  absl::StatusOr<std::unique_ptr<Connection>> held = pool.Acquire();
  ASSERT_TRUE(held.ok()) << held.status();
  absl::StatusOr<postgres_internal::Result> pid =
      (*held)->QueryControl("SELECT pg_backend_pid()", {"Pid", {}});
  ASSERT_TRUE(pid.ok()) << pid.status();
  const std::string backend_pid = PQgetvalue(pid->get(), 0, 0);

  absl::StatusOr<std::string> waiter_pid;
  std::thread waiter([&pool, &waiter_pid] {
    absl::StatusOr<std::unique_ptr<Connection>> taken = pool.Acquire();
    if (!taken.ok()) {
      waiter_pid = taken.status();
      return;
    }
    absl::StatusOr<postgres_internal::Result> own =
        (*taken)->QueryControl("SELECT pg_backend_pid()", {"Pid", {}});
    waiter_pid = own.ok()
                     ? absl::StatusOr<std::string>(PQgetvalue(own->get(), 0, 0))
                     : own.status();
    pool.Release(*std::move(taken));
  });
  ASSERT_TRUE(AwaitWaiting(pool, 1));

  // The held connection's server process ends; a statement finds it gone.
  absl::StatusOr<std::unique_ptr<Connection>> other =
      Connection::Open(PostgresTestUrl(), {});
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE((*other)
                  ->QueryControl(
                      StrCat("SELECT pg_terminate_backend(", backend_pid, ")"),
                      {"Terminate", {}})
                  .ok());
  const absl::Time deadline = absl::Now() + kDeadline;
  while (!(*held)->broken() && absl::Now() < deadline) {
    (void)(*held)->QueryControl("SELECT 1", {"Probe", {}});
  }
  ASSERT_TRUE((*held)->broken());
  pool.Release(*std::move(held));

  waiter.join();
  ASSERT_TRUE(waiter_pid.ok()) << waiter_pid.status();
  EXPECT_NE(*waiter_pid, backend_pid) << "the waiter got the dead connection";
}

TEST_F(PostgresPoolTest, AWaiterThatGivesUp_LeavesTheQueue) {
  ConnectionPool pool(PostgresTestUrl(), OneConnection(absl::Milliseconds(50)));
  absl::StatusOr<std::unique_ptr<Connection>> held = pool.Acquire();
  ASSERT_TRUE(held.ok()) << held.status();
  absl::StatusOr<std::unique_ptr<Connection>> late = pool.Acquire();
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(pool.waiting(), 0);
  // The released connection is idle again, not handed to the one who left.
  pool.Release(*std::move(held));
  absl::StatusOr<std::unique_ptr<Connection>> again = pool.Acquire();
  ASSERT_TRUE(again.ok()) << again.status();
  pool.Release(*std::move(again));
}

}  // namespace
}  // namespace sluice::testing
