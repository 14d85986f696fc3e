#include "pg_status.h"

#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

absl::StatusCode CodeFor(std::string_view state, bool on_queue) {
  if (state == "40001" || state == "40P01" || state == "55P03") {
    return absl::StatusCode::kAborted;
  }
  if (state.starts_with("08") || state == "57P01" || state == "57P02" ||
      state == "57P03") {
    return absl::StatusCode::kUnavailable;
  }
  if (state == "23505") return absl::StatusCode::kAlreadyExists;
  if (state == "23503" || state == "P0002") return absl::StatusCode::kNotFound;
  if (state == "42P01" && on_queue) return absl::StatusCode::kNotFound;
  if (state == "22003") return absl::StatusCode::kOutOfRange;
  if (state == "42501") return absl::StatusCode::kPermissionDenied;
  // query_canceled: the statement timeout (PostgresOptions) expired.
  if (state == "57014") return absl::StatusCode::kDeadlineExceeded;
  return absl::StatusCode::kInternal;
}

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

absl::Status ConnectionLost(PGconn* connection, std::string_view operation) {
  std::string_view message =
      connection != nullptr ? TrimNewline(PQerrorMessage(connection)) : "";
  return absl::UnavailableError(
      StrCat("postgres ", operation, ": the connection was lost",
             message.empty() ? "" : " (", message, message.empty() ? "" : ")",
             "; retry later"));
}

absl::Status StatusFromResult(const PGresult* result, PGconn* connection,
                              const StatementContext& context) {
  std::string_view state =
      result != nullptr ? Field(result, PG_DIAG_SQLSTATE) : std::string_view();
  if (state.empty() || PQstatus(connection) == CONNECTION_BAD) {
    if (state.empty() || state.starts_with("08") || state.starts_with("57")) {
      return ConnectionLost(connection, context.operation);
    }
  }
  const bool on_queue = !context.queue.empty();
  absl::StatusCode code = CodeFor(state, on_queue);
  if (state == "42P01" && on_queue) {
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

}  // namespace sluice::postgres_internal
