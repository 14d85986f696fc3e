#include "pg_connect.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "pg_connect_errors.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

using SteadyClock = std::chrono::steady_clock;

// libpq takes keepalive settings in whole seconds.
std::string WholeSeconds(absl::Duration duration) {
  const int64_t seconds =
      absl::ToInt64Seconds(absl::Ceil(duration, absl::Seconds(1)));
  return StrCat(std::max<int64_t>(seconds, 1));
}

// The connection's value for `keyword` (from the URL, the environment or
// what Connect() passed), if set and not empty.
std::optional<std::string> Setting(PGconn* connection,
                                   std::string_view keyword) {
  PQconninfoOption* options = PQconninfo(connection);
  if (options == nullptr) return std::nullopt;
  std::optional<std::string> value;
  for (PQconninfoOption* option = options; option->keyword != nullptr;
       ++option) {
    if (option->keyword == keyword && option->val != nullptr &&
        option->val[0] != '\0') {
      value = option->val;
    }
  }
  PQconninfoFree(options);
  return value;
}

// How long one address attempt may take; InfiniteDuration for no limit.
absl::StatusOr<absl::Duration> AttemptTimeout(PGconn* connection,
                                              const PostgresOptions& options) {
  std::optional<std::string> setting = Setting(connection, "connect_timeout");
  if (!setting.has_value()) {
    return options.connect_timeout <= absl::ZeroDuration()
               ? absl::InfiniteDuration()
               : options.connect_timeout;
  }
  int seconds = 0;
  const char* end = setting->data() + setting->size();
  if (std::from_chars(setting->data(), end, seconds).ptr != end) {
    return absl::InvalidArgumentError(
        StrCat("postgres connect: connect_timeout \"", *setting,
               "\" is not a whole number of seconds"));
  }
  // libpq's meaning: zero or less waits forever.
  return seconds <= 0 ? absl::InfiniteDuration() : absl::Seconds(seconds);
}

// Which address the current attempt goes to; libpq moves on to the next
// host or address after a failure, and each attempt gets the full timeout.
std::string AttemptTarget(PGconn* connection) {
  auto text = [](const char* value) { return value == nullptr ? "" : value; };
  return StrCat(text(PQhost(connection)), "\n", text(PQport(connection)), "\n",
                text(PQhostaddr(connection)));
}

absl::Status TimedOut(PGconn* connection, absl::Duration timeout) {
  const char* host = PQhost(connection);
  const char* port = PQport(connection);
  return absl::UnavailableError(StrCat(
      "postgres connect: no answer from the server at \"",
      host == nullptr ? "" : host, "\" port ", port == nullptr ? "" : port,
      " within ", absl::FormatDuration(timeout),
      " (connect_timeout); check that it is up and reachable, or raise "
      "connect_timeout in the URL or PostgresOptions"));
}

int PollMilliseconds(SteadyClock::duration left) {
  const auto milliseconds =
      std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(
      std::min<int64_t>(milliseconds, std::numeric_limits<int>::max()));
}

SteadyClock::time_point DeadlineAfter(absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration())
    return SteadyClock::time_point::max();
  return SteadyClock::now() + absl::ToChronoNanoseconds(timeout);
}

// Drives libpq's non-blocking connect to the end, giving each address
// attempt `timeout`.
absl::Status WaitUntilConnected(PGconn* connection, absl::Duration timeout) {
  PostgresPollingStatusType polling = PGRES_POLLING_WRITING;
  std::string target = AttemptTarget(connection);
  SteadyClock::time_point deadline = DeadlineAfter(timeout);
  while (polling != PGRES_POLLING_OK) {
    if (polling == PGRES_POLLING_FAILED) {
      return ConnectFailure(connection);
    }
    if (std::string now_target = AttemptTarget(connection);
        now_target != target) {
      target = std::move(now_target);
      deadline = DeadlineAfter(timeout);
    }
    pollfd socket{
        PQsocket(connection),
        static_cast<short>(polling == PGRES_POLLING_READING ? POLLIN : POLLOUT),
        0};
    if (socket.fd < 0) return ConnectFailure(connection);
    const SteadyClock::time_point now = SteadyClock::now();
    if (now >= deadline) return TimedOut(connection, timeout);
    const int ready = poll(&socket, 1,
                           deadline == SteadyClock::time_point::max()
                               ? -1
                               : PollMilliseconds(deadline - now));
    if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
    polling = PQconnectPoll(connection);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ConnectionHandle> Connect(const std::string& url,
                                         const PostgresOptions& options) {
  SLUICE_RETURN_IF_ERROR(CheckConnectionUrl(url));
  const std::string idle = WholeSeconds(options.keepalives_idle);
  const std::string interval = WholeSeconds(options.keepalives_interval);
  const std::string count = StrCat(std::max(options.keepalives_count, 1));
  std::vector<const char*> keys;
  std::vector<const char*> values;
  auto add = [&](const char* key, const char* value) {
    keys.push_back(key);
    values.push_back(value);
  };
  add("keepalives", options.tcp_keepalives ? "1" : "0");
  if (options.tcp_keepalives) {
    add("keepalives_idle", idle.c_str());
    add("keepalives_interval", interval.c_str());
    add("keepalives_count", count.c_str());
  }
  // Last, so that what the URL sets wins over the settings before it.
  add("dbname", url.c_str());
  add(nullptr, nullptr);
  ConnectionHandle connection(
      PQconnectStartParams(keys.data(), values.data(), /*expand_dbname=*/1),
      &PQfinish);
  if (connection == nullptr) {
    return absl::ResourceExhaustedError(
        "libpq could not allocate a connection");
  }
  // Verbose errors carry the SQLSTATE of a refusal (ConnectFailure).
  PQsetErrorVerbosity(connection.get(), PQERRORS_VERBOSE);
  if (PQstatus(connection.get()) == CONNECTION_BAD) {
    return ConnectFailure(connection.get());
  }
  SLUICE_ASSIGN_OR_RETURN(absl::Duration timeout,
                          AttemptTimeout(connection.get(), options));
  SLUICE_RETURN_IF_ERROR(WaitUntilConnected(connection.get(), timeout));
  PQsetErrorVerbosity(connection.get(), PQERRORS_DEFAULT);
  // Notices (a ROLLBACK with nothing to roll back warns) are not errors.
  PQsetNoticeProcessor(
      connection.get(), [](void*, const char*) {}, nullptr);
  return connection;
}

std::string StatementTimeoutSql(PGconn* connection,
                                const PostgresOptions& options) {
  if (options.statement_timeout <= absl::ZeroDuration() ||
      options.statement_timeout == absl::InfiniteDuration()) {
    return "";
  }
  std::optional<std::string> server_options = Setting(connection, "options");
  if (server_options.has_value() &&
      server_options->find("statement_timeout") != std::string::npos) {
    return "";
  }
  const int64_t milliseconds = absl::ToInt64Milliseconds(
      absl::Ceil(options.statement_timeout, absl::Milliseconds(1)));
  return StrCat("SET statement_timeout = ", std::max<int64_t>(milliseconds, 1));
}

}  // namespace sluice::postgres_internal
