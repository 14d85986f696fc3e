// How the Postgres backend connects: timeouts, keepalives, the statement
// timeout. The silent-server tests need no database; the others need
// SLUICE_TEST_POSTGRES_URL.
#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pg_connect.h"
#include "pg_connection.h"
#include "pg_sql.h"
#include "sluice/backends.h"
#include "sluice/internal/strings.h"
#include "sluice/postgres.h"
#include "support/postgres_test_database.h"

namespace sluice::testing {
namespace {

using postgres_internal::Connect;
using postgres_internal::Connection;
using postgres_internal::ConnectionHandle;
using ::testing::HasSubstr;

// How long a test waits for a connect that should time out, far beyond the
// timeouts it sets, so that a hang fails the test instead of the run.
constexpr absl::Duration kGiveUpAfter = absl::Seconds(60);

// A TCP port on 127.0.0.1 that accepts connections and never answers: the
// kernel completes each handshake into the listen backlog and nobody ever
// reads or writes, like a wedged server or a black-holing proxy.
class SilentServer {
 public:
  SilentServer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (fd_ < 0 ||
        bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
            0 ||
        listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
      return;
    }
    port_ = ntohs(address.sin_port);
  }
  ~SilentServer() {
    if (fd_ >= 0) close(fd_);
  }
  SilentServer(const SilentServer&) = delete;
  SilentServer& operator=(const SilentServer&) = delete;

  std::string Url(std::string_view parameters = "") const {
    return StrCat("postgresql://app:secret@127.0.0.1:", port_, "/app",
                  parameters.empty() ? "" : "?", parameters);
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

struct Outcome {
  absl::Status status;
  absl::Duration took;
};

// Runs `open` on a thread of its own and waits for it up to kGiveUpAfter;
// nullopt if it is still running then (the thread is left behind).
template <typename Open>
std::optional<Outcome> WaitForOpen(Open open) {
  struct Shared {
    absl::Notification done;
    Outcome outcome;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, open] {
    const absl::Time start = absl::Now();
    shared->outcome.status = open();
    shared->outcome.took = absl::Now() - start;
    shared->done.Notify();
  }).detach();
  if (!shared->done.WaitForNotificationWithTimeout(kGiveUpAfter)) {
    return std::nullopt;
  }
  return shared->outcome;
}

TEST(PostgresConnectTest, OpenBackend_ServerNeverAnswers_FailsAtUrlTimeout) {
  SilentServer server;
  const std::string url = server.Url("connect_timeout=1");
  std::optional<Outcome> outcome =
      WaitForOpen([url] { return OpenBackend(url).status(); });
  ASSERT_TRUE(outcome.has_value()) << "OpenBackend hung on a silent server";
  EXPECT_EQ(outcome->status.code(), absl::StatusCode::kUnavailable)
      << outcome->status;
  EXPECT_THAT(outcome->status.message(), HasSubstr("connect_timeout"));
  EXPECT_THAT(outcome->status.message(), HasSubstr("127.0.0.1"));
  EXPECT_GE(outcome->took, absl::Milliseconds(900));
  EXPECT_LT(outcome->took, absl::Seconds(10));
}

TEST(PostgresConnectTest,
     OpenPostgres_ServerNeverAnswers_FailsAtOptionTimeout) {
  SilentServer server;
  const std::string url = server.Url();
  PostgresOptions options;
  options.connect_timeout = absl::Milliseconds(300);
  std::optional<Outcome> outcome = WaitForOpen(
      [url, options] { return OpenPostgres(url, options).status(); });
  ASSERT_TRUE(outcome.has_value()) << "OpenPostgres hung on a silent server";
  EXPECT_EQ(outcome->status.code(), absl::StatusCode::kUnavailable)
      << outcome->status;
  EXPECT_THAT(outcome->status.message(), HasSubstr("within 300ms"));
  EXPECT_LT(outcome->took, absl::Seconds(5));
}

TEST(PostgresConnectTest, UrlConnectTimeout_WinsOverTheOption) {
  SilentServer server;
  const std::string url = server.Url("connect_timeout=1");
  PostgresOptions options;
  options.connect_timeout = absl::Hours(1);
  std::optional<Outcome> outcome = WaitForOpen(
      [url, options] { return OpenPostgres(url, options).status(); });
  ASSERT_TRUE(outcome.has_value()) << "the URL's connect_timeout was ignored";
  EXPECT_EQ(outcome->status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(outcome->status.message(), HasSubstr("within 1s"));
}

TEST(PostgresConnectTest, ConnectTimeoutThatIsNotANumber_IsInvalidArgument) {
  SilentServer server;
  absl::StatusOr<ConnectionHandle> connection =
      Connect(server.Url("connect_timeout=soon"), {});
  EXPECT_EQ(connection.status().code(), absl::StatusCode::kInvalidArgument)
      << connection.status();
  EXPECT_THAT(connection.status().message(), HasSubstr("connect_timeout"));
}

// --- Against the test cluster ----------------------------------------------

class PostgresConnectionSettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
  }

  static std::string With(std::string_view parameter) {
    const std::string url = PostgresTestUrl();
    return StrCat(url, url.find('?') == std::string::npos ? "?" : "&",
                  parameter);
  }

  // libpq's value of `keyword` on a connection made with `options`.
  static std::string Setting(const std::string& url, std::string_view keyword,
                             const PostgresOptions& options = {}) {
    absl::StatusOr<ConnectionHandle> connection = Connect(url, options);
    EXPECT_TRUE(connection.ok()) << connection.status();
    if (!connection.ok()) return "";
    std::string value;
    PQconninfoOption* settings = PQconninfo(connection->get());
    for (PQconninfoOption* s = settings; s->keyword != nullptr; ++s) {
      if (s->keyword == keyword && s->val != nullptr) value = s->val;
    }
    PQconninfoFree(settings);
    return value;
  }

  // What the server says `SHOW name` is on a pool connection.
  static std::string Show(const std::string& url, std::string_view name,
                          const PostgresOptions& options) {
    absl::StatusOr<std::unique_ptr<Connection>> connection =
        Connection::Open(url, options);
    EXPECT_TRUE(connection.ok()) << connection.status();
    if (!connection.ok()) return "";
    absl::StatusOr<postgres_internal::Result> shown =
        (*connection)->QueryControl(StrCat("SHOW ", name), {"Show", {}});
    EXPECT_TRUE(shown.ok()) << shown.status();
    if (!shown.ok() || shown->rows() != 1) return "";
    return PQgetvalue(shown->get(), 0, 0);
  }
};

TEST_F(PostgresConnectionSettingsTest, Keepalives_DefaultToThirtyTenThree) {
  const std::string url = PostgresTestUrl();
  EXPECT_EQ(Setting(url, "keepalives"), "1");
  EXPECT_EQ(Setting(url, "keepalives_idle"), "30");
  EXPECT_EQ(Setting(url, "keepalives_interval"), "10");
  EXPECT_EQ(Setting(url, "keepalives_count"), "3");
}

TEST_F(PostgresConnectionSettingsTest, Keepalives_OptionsSetThem_UrlWins) {
  PostgresOptions options;
  options.keepalives_idle = absl::Seconds(45);
  options.keepalives_count = 5;
  EXPECT_EQ(Setting(PostgresTestUrl(), "keepalives_idle", options), "45");
  EXPECT_EQ(Setting(PostgresTestUrl(), "keepalives_count", options), "5");
  EXPECT_EQ(Setting(With("keepalives_idle=7"), "keepalives_idle", options),
            "7");
  options.tcp_keepalives = false;
  EXPECT_EQ(Setting(PostgresTestUrl(), "keepalives", options), "0");
  EXPECT_EQ(Setting(With("keepalives=1"), "keepalives", options), "1");
}

// The server's default is on; a key lookup must not be compiled.
TEST_F(PostgresConnectionSettingsTest, Jit_IsOff) {
  EXPECT_EQ(Show(PostgresTestUrl(), "jit", {}), "off");
}

TEST_F(PostgresConnectionSettingsTest, StatementTimeout_OffByDefault) {
  EXPECT_EQ(Show(PostgresTestUrl(), "statement_timeout", {}), "0");
}

TEST_F(PostgresConnectionSettingsTest,
       StatementTimeout_CancelsALongStatement_WithDeadlineExceeded) {
  PostgresOptions options;
  options.statement_timeout = absl::Milliseconds(250);
  EXPECT_EQ(Show(PostgresTestUrl(), "statement_timeout", options), "250ms");
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(PostgresTestUrl(), options);
  ASSERT_TRUE(connection.ok()) << connection.status();
  absl::StatusOr<postgres_internal::Result> slept =
      (*connection)->QueryControl("SELECT pg_sleep(30)", {"Sleep", {}});
  EXPECT_EQ(slept.status().code(), absl::StatusCode::kDeadlineExceeded)
      << slept.status();
  EXPECT_THAT(slept.status().message(), HasSubstr("statement timeout"));
}

TEST_F(PostgresConnectionSettingsTest, StatementTimeout_UrlOptionsWin) {
  PostgresOptions options;
  options.statement_timeout = absl::Milliseconds(250);
  EXPECT_EQ(Show(With("options=-c%20statement_timeout%3D7s"),
                 "statement_timeout", options),
            "7s");
}

// The plan mode a statement runs in: the session's settings as that
// statement sees them, marked (sql::kGenericPlan) or not.
std::string ModeSeen(Connection& connection, bool marked) {
  const std::string sql =
      StrCat(marked ? postgres_internal::sql::kGenericPlan : "",
             "SELECT current_setting('plan_cache_mode') || ' ' || "
             "current_setting('enable_seqscan')");
  absl::StatusOr<postgres_internal::Result> seen =
      connection.Query(sql, {}, {"ModeSeen", {}});
  EXPECT_TRUE(seen.ok()) << seen.status();
  if (!seen.ok() || seen->rows() != 1) return "";
  return PQgetvalue(seen->get(), 0, 0);
}

// A pool connection of the test cluster, and the two modes as ModeSeen
// reports them.
class PostgresPlanModeTest : public PostgresConnectionSettingsTest {
 protected:
  void SetUp() override {
    PostgresConnectionSettingsTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    absl::StatusOr<std::unique_ptr<Connection>> opened =
        Connection::Open(PostgresTestUrl(), {});
    ASSERT_TRUE(opened.ok()) << opened.status();
    opened_ = *std::move(opened);
  }

  std::unique_ptr<Connection> opened_;
  const std::string custom = "force_custom_plan on";
  const std::string generic = "force_generic_plan off";
};

TEST_F(PostgresPlanModeTest,
       GenericPlanStatements_SwitchTheSession_AlsoAfterARollbackOrAFailure) {
  Connection& connection = *opened_;
  EXPECT_EQ(ModeSeen(connection, false), custom);
  EXPECT_EQ(ModeSeen(connection, true), generic);
  EXPECT_EQ(ModeSeen(connection, true), generic);
  EXPECT_EQ(ModeSeen(connection, false), custom);

  // A rollback undoes the switch made in its transaction.
  ASSERT_TRUE(connection.QueryControl("BEGIN", {"Begin", {}}).ok());
  EXPECT_EQ(ModeSeen(connection, true), generic);
  connection.Rollback();
  EXPECT_EQ(ModeSeen(connection, false), custom);
  ASSERT_TRUE(connection.QueryControl("BEGIN", {"Begin", {}}).ok());
  EXPECT_EQ(ModeSeen(connection, true), generic);
  connection.Rollback();
  EXPECT_EQ(ModeSeen(connection, true), generic);

  // So does a failed statement, and the switch queued behind it is skipped.
  connection.Send("SELECT 1 / 0", {}, {"Fail", {}});
  EXPECT_FALSE(connection.Drain().ok());
  EXPECT_EQ(ModeSeen(connection, false), custom);
  connection.Send("SELECT 1 / 0", {}, {"Fail", {}});
  EXPECT_FALSE(
      connection
          .Query(StrCat(postgres_internal::sql::kGenericPlan, "SELECT 1"), {},
                 {"Skipped", {}})
          .ok());
  EXPECT_EQ(ModeSeen(connection, true), generic);
}

// How many times this session ran the switch to generic plans (PostgreSQL
// counts each execution of a prepared statement's generic plan).
int64_t GenericSwitches(Connection& connection) {
  absl::StatusOr<postgres_internal::Result> counted = connection.QueryControl(
      "SELECT coalesce(sum(generic_plans), 0) FROM pg_prepared_statements "
      "WHERE statement LIKE 'SELECT set_config(''plan_cache_mode'', "
      "''force_generic_plan''%'",
      {"GenericSwitches", {}});
  EXPECT_TRUE(counted.ok()) << counted.status();
  if (!counted.ok() || counted->rows() != 1) return -1;
  return std::stoll(PQgetvalue(counted->get(), 0, 0));
}

TEST_F(PostgresPlanModeTest,
       GenericPlanStatements_SwitchOnlyWhenTheModeChanges) {
  Connection& connection = *opened_;
  EXPECT_EQ(ModeSeen(connection, true), generic);
  EXPECT_EQ(ModeSeen(connection, true), generic);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(connection.QueryControl("BEGIN", {"Begin", {}}).ok());
    EXPECT_EQ(ModeSeen(connection, true), generic);
    ASSERT_TRUE(connection.QueryControl("COMMIT", {"Commit", {}}).ok());
  }
  EXPECT_EQ(GenericSwitches(connection), 1);

  EXPECT_EQ(ModeSeen(connection, false), custom);
  EXPECT_EQ(ModeSeen(connection, true), generic);
  EXPECT_EQ(GenericSwitches(connection), 2);
}

}  // namespace
}  // namespace sluice::testing
