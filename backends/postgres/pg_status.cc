#include "pg_status.h"

#include "absl/strings/cord.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

std::string_view Field(const PGresult* result, int field) {
  const char* value = PQresultErrorField(result, field);
  return value == nullptr ? std::string_view() : std::string_view(value);
}

std::string_view TrimNewline(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

absl::StatusCode CodeForSqlstate(std::string_view state) {
  if (state == "40001" || state == "40P01" || state == "55P03") {
    return absl::StatusCode::kAborted;
  }
  // Connection failures, a server shutting down or starting up, and too
  // many connections all pass.
  if (state.starts_with("08") || state == "57P01" || state == "57P02" ||
      state == "57P03" || state == "53300") {
    return absl::StatusCode::kUnavailable;
  }
  if (state == "23505") return absl::StatusCode::kAlreadyExists;
  // 3D000: the URL names a database that does not exist.
  if (state == "23503" || state == "P0002" || state == "3D000") {
    return absl::StatusCode::kNotFound;
  }
  if (state == "22003") return absl::StatusCode::kOutOfRange;
  // Class 28 (28P01 wrong password, 28000 unknown role or no pg_hba.conf
  // entry): retrying with the same URL can't help.
  if (state == "42501" || state.starts_with("28")) {
    return absl::StatusCode::kPermissionDenied;
  }
  // query_canceled: the statement timeout (PostgresOptions) expired.
  if (state == "57014") return absl::StatusCode::kDeadlineExceeded;
  return absl::StatusCode::kInternal;
}

absl::Status ConnectionLost(PGconn* connection, std::string_view operation) {
  std::string_view message =
      connection != nullptr ? TrimNewline(PQerrorMessage(connection)) : "";
  return absl::UnavailableError(
      StrCat("postgres ", operation, ": the connection was lost",
             message.empty() ? "" : " (", message, message.empty() ? "" : ")",
             "; retry later"));
}

namespace {

constexpr char kSqlstatePayload[] = "type.sluice/postgres.sqlstate";

absl::Status StatusFor(const PGresult* result, PGconn* connection,
                       const StatementContext& context,
                       std::string_view state) {
  if (state.empty() || PQstatus(connection) == CONNECTION_BAD) {
    if (state.empty() || state.starts_with("08") || state.starts_with("57")) {
      return ConnectionLost(connection, context.operation);
    }
  }
  const absl::StatusCode code = CodeForSqlstate(state);
  if (state == "42P01" && !context.queue.empty()) {
    return absl::NotFoundError(StrCat(context.operation, ": queue \"",
                                      context.queue, "\" does not exist"));
  }
  if (state == "P0002") {  // sluice.require_found's message says it all
    return absl::NotFoundError(StrCat(context.operation, ": ",
                                      Field(result, PG_DIAG_MESSAGE_PRIMARY)));
  }
  std::string message =
      StrCat("postgres ", context.operation, ": ",
             Field(result, PG_DIAG_MESSAGE_PRIMARY), " (SQLSTATE ", state, ")");
  if (std::string_view detail = Field(result, PG_DIAG_MESSAGE_DETAIL);
      !detail.empty()) {
    StrAppend(&message, ": ", detail);
  }
  if (code == absl::StatusCode::kAborted) {
    StrAppend(&message, "; retry the transaction");
  }
  return absl::Status(code, message);
}

}  // namespace

absl::Status StatusFromResult(const PGresult* result, PGconn* connection,
                              const StatementContext& context) {
  std::string_view state =
      result != nullptr ? Field(result, PG_DIAG_SQLSTATE) : std::string_view();
  absl::Status status = StatusFor(result, connection, context, state);
  if (!state.empty()) {
    status.SetPayload(kSqlstatePayload, absl::Cord(absl::string_view(
                                            state.data(), state.size())));
  }
  return status;
}

std::string SqlstateOf(const absl::Status& status) {
  auto state = status.GetPayload(kSqlstatePayload);  // absl::optional
  return state.has_value() ? std::string(*state) : std::string();
}

}  // namespace sluice::postgres_internal
