#include "pg_connection.h"

#include <poll.h>

#include <charconv>
#include <utility>

#include "pg_one_row.h"
#include "pg_session.h"
#include "pg_sql.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

// Every session reads and writes times as UTC ISO text (pg_values.h) and
// uses READ COMMITTED (docs/decisions/0011-postgres-backend.md). Prepared
// statements are planned for each execution's parameters: a generic plan
// made while a table looked empty would keep scanning it whole as it grows.
// JIT is off: every statement here reaches a few rows by key, and a cost
// estimate from skewed statistics would otherwise compile one, each
// execution, for longer than it runs (decision 0058).
constexpr char kSessionSetup[] =
    "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; "
    "SET IntervalStyle = 'postgres'; SET client_encoding = 'UTF8'; "
    "SET default_transaction_isolation = 'read committed'; "
    "SET plan_cache_mode = force_custom_plan; SET jit = off";

}  // namespace

int64_t Result::affected() const {
  if (!result_) return 0;
  std::string_view text = PQcmdTuples(result_.get());
  int64_t count = 0;
  std::from_chars(text.data(), text.data() + text.size(), count);
  return count;
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const std::string& url, const PostgresOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(ConnectionHandle handle, Connect(url, options));
  PGconn* raw = handle.get();
  std::string setup = kSessionSetup;
  if (std::string timeout = StatementTimeoutSql(raw, options);
      !timeout.empty()) {
    StrAppend(&setup, "; ", timeout);
  }
  SLUICE_RETURN_IF_ERROR(Execute(raw, setup, "connect"));
  if (PQenterPipelineMode(raw) != 1) {
    return absl::InternalError(StrCat(
        "postgres connect: can't enter pipeline mode: ", PQerrorMessage(raw)));
  }
  return std::unique_ptr<Connection>(new Connection(std::move(handle)));
}

std::unique_ptr<Connection> Connection::Borrow(PGconn* connection) {
  std::unique_ptr<Connection> borrowed(
      new Connection(ConnectionHandle(connection, [](PGconn*) {})));
  borrowed->prepare_ = false;
  return borrowed;
}

absl::Status Connection::EnterPipeline() {
  if (PQenterPipelineMode(handle()) != 1) {
    return absl::InternalError(StrCat("postgres: can't enter pipeline mode: ",
                                      PQerrorMessage(handle())));
  }
  return absl::OkStatus();
}

absl::Status Connection::ExitPipeline() {
  absl::Status drained = Drain();
  if (PQexitPipelineMode(handle()) != 1) {
    broken_ = true;
    return absl::InternalError(StrCat("postgres: can't leave pipeline mode: ",
                                      PQerrorMessage(handle())));
  }
  return drained;
}

Connection::~Connection() = default;

bool Connection::CheckAlive() {
  if (broken_ || PQstatus(handle()) != CONNECTION_OK) return false;
  pollfd socket{PQsocket(handle()), POLLIN, 0};
  if (socket.fd < 0) return false;
  // An idle connection receives nothing unless the server is going away
  // (a FATAL message, then end of file).
  if (poll(&socket, 1, 0) > 0) {
    if (PQconsumeInput(handle()) == 0 || PQstatus(handle()) != CONNECTION_OK) {
      return false;
    }
    socket.revents = 0;
    if (poll(&socket, 1, 0) > 0 && (PQconsumeInput(handle()) == 0 ||
                                    PQstatus(handle()) != CONNECTION_OK)) {
      return false;
    }
  }
  return true;
}

void Connection::Fail(absl::Status status) {
  if (status.ok()) return;
  plan_mode_ = PlanMode::kUnknown;
  if (failure_.ok()) failure_ = std::move(status);
}

void Connection::MarkBroken(std::string_view operation) {
  broken_ = true;
  Fail(ConnectionLost(handle(), operation));
}

const std::string& Connection::PreparedName(std::string_view sql,
                                            const StatementContext& context) {
  auto [it, inserted] = prepared_.try_emplace(std::string(sql));
  if (!inserted) return it->second;
  it->second = StrCat("sluice_", ++next_statement_);
  if (PQsendPrepare(handle(), it->second.c_str(), it->first.c_str(), 0,
                    nullptr) != 1) {
    MarkBroken(context.operation);
  } else {
    pending_.push_back({Kind::kPrepare, context, it->first});
  }
  return it->second;
}

void Connection::UsePlanModeFor(std::string_view sql,
                                const StatementContext& context) {
  const bool generic = sql::WantsGenericPlan(sql);
  const PlanMode wanted = generic ? PlanMode::kGeneric : PlanMode::kCustom;
  if (plan_mode_ == wanted) return;
  plan_mode_ = wanted;
  const std::string& name =
      PreparedName(generic ? sql::kGenericPlans : sql::kCustomPlans, context);
  if (broken_) return;
  if (PQsendQueryPrepared(handle(), name.c_str(), 0, nullptr, nullptr, nullptr,
                          0) != 1) {
    MarkBroken(context.operation);
    return;
  }
  pending_.push_back({Kind::kStatement, context, {}});
}

void Connection::Send(std::string_view sql, const Params& params,
                      StatementContext context) {
  if (broken_) return;
  if (!prepare_) {
    // The unnamed statement: parsed and planned each time, but nothing is
    // left in the host's session.
    if (PQsendQueryParams(handle(), std::string(sql).c_str(), params.size(),
                          nullptr, params.Pointers(), params.Lengths(),
                          params.Formats(), 0) != 1) {
      MarkBroken(context.operation);
      return;
    }
    pending_.push_back({Kind::kStatement, std::move(context), {}});
    return;
  }
  UsePlanModeFor(sql, context);
  if (broken_) return;
  const std::string& name = PreparedName(sql, context);
  if (broken_) return;
  if (PQsendQueryPrepared(handle(), name.c_str(), params.size(),
                          params.Pointers(), params.Lengths(), params.Formats(),
                          0) != 1) {
    MarkBroken(context.operation);
    return;
  }
  pending_.push_back({Kind::kStatement, std::move(context), {}});
}

void Connection::SendControl(std::string_view sql, StatementContext context) {
  if (broken_) return;
  std::string text(sql);
  if (PQsendQueryParams(handle(), text.c_str(), 0, nullptr, nullptr, nullptr,
                        nullptr, 0) != 1) {
    MarkBroken(context.operation);
    return;
  }
  pending_.push_back({Kind::kStatement, std::move(context), {}});
}

void Connection::Sync() {
  if (broken_) return;
  if (PQpipelineSync(handle()) != 1) {
    MarkBroken("sync");
    return;
  }
  pending_.push_back({Kind::kSync, {}, {}});
}

absl::StatusOr<Result> Connection::Query(std::string_view sql,
                                         const Params& params,
                                         StatementContext context) {
  Result wanted;
  Send(sql, params, std::move(context));
  if (!broken_) pending_.back().result = &wanted;
  Sync();
  absl::Status status = ReadPending();
  if (!status.ok()) return status;
  return wanted;
}

absl::StatusOr<std::vector<Result>> Connection::QueryAll(
    std::span<const Statement> statements) {
  return SendAllAndWait(statements, "", {}, nullptr);
}

absl::StatusOr<std::vector<Result>> Connection::QueryAllThenControl(
    std::span<const Statement> statements, std::string_view control,
    StatementContext control_context, Result& control_result) {
  return SendAllAndWait(statements, control, std::move(control_context),
                        &control_result);
}

absl::StatusOr<std::vector<Result>> Connection::SendAllAndWait(
    std::span<const Statement> statements, std::string_view control,
    StatementContext control_context, Result* control_result) {
  // Sized once: each pending statement points at its result.
  std::vector<Result> results(statements.size());
  for (size_t i = 0; i < statements.size(); ++i) {
    Send(statements[i].sql, statements[i].params, statements[i].context);
    if (!broken_) pending_.back().result = &results[i];
  }
  if (control_result != nullptr) {
    SendControl(control, std::move(control_context));
    if (!broken_) pending_.back().result = control_result;
  }
  Sync();
  absl::Status status = ReadPending();
  if (!status.ok()) return status;
  return results;
}

absl::StatusOr<Result> Connection::QueryThenControl(
    std::string_view sql, const Params& params, StatementContext context,
    std::string_view control, StatementContext control_context,
    Result& control_result) {
  const Statement statement{sql, params, std::move(context)};
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<Result> results,
      QueryAllThenControl({&statement, 1}, control, std::move(control_context),
                          control_result));
  return std::move(results[0]);
}

const QueueSql& Connection::StatementsFor(std::string_view queue) {
  std::unique_ptr<QueueSql>& statements = queues_[std::string(queue)];
  if (statements == nullptr) statements = std::make_unique<QueueSql>(queue);
  return *statements;
}

std::string_view Connection::OneRowOf(std::string_view sql) {
  auto it = one_row_.find(absl::string_view(sql.data(), sql.size()));
  if (it == one_row_.end()) {
    it = one_row_.emplace(std::string(sql), OneRowShape(sql)).first;
  }
  return it->second;
}

absl::StatusOr<Result> Connection::QueryControl(std::string_view sql,
                                                StatementContext context) {
  Result wanted;
  SendControl(sql, std::move(context));
  if (!broken_) pending_.back().result = &wanted;
  Sync();
  absl::Status status = ReadPending();
  if (!status.ok()) return status;
  return wanted;
}

void Connection::Rollback() { EndTransactionWith({"ROLLBACK"}); }

void Connection::RollbackToSavepoint(std::string_view savepoint) {
  const std::string rollback = StrCat("ROLLBACK TO SAVEPOINT ", savepoint);
  const std::string release = StrCat("RELEASE SAVEPOINT ", savepoint);
  EndTransactionWith({rollback, release});
}

void Connection::EndTransactionWith(
    std::initializer_list<std::string_view> statements) {
  plan_mode_ = PlanMode::kUnknown;  // a rollback undoes a switch in it
  if (!pending_.empty()) Sync();
  for (std::string_view sql : statements) {
    SendControl(sql, {"Rollback", {}});
  }
  Sync();
  // Results of the earlier segment come first; only ROLLBACK's matters.
  while (!pending_.empty() && !broken_) {
    Pending pending = std::move(pending_.front());
    pending_.pop_front();
    absl::Status status = ReadOne(pending, /*keep=*/false);
    if (!status.ok() && pending.context.operation == "Rollback") {
      broken_ = true;  // don't hand out a connection stuck in a transaction
    }
  }
  pending_.clear();
  failure_ = absl::OkStatus();
}

absl::Status Connection::Drain() {
  if (!pending_.empty()) Sync();
  return ReadPending();
}

absl::Status Connection::ReadPending() {
  while (!pending_.empty()) {
    Pending pending = std::move(pending_.front());
    pending_.pop_front();
    if (broken_) continue;  // nothing more will arrive
    Fail(ReadOne(pending));
  }
  return std::exchange(failure_, absl::OkStatus());
}

absl::Status Connection::ReadOne(const Pending& pending, bool keep) {
  Result result(PQgetResult(handle()));
  if (result.get() == nullptr) {
    MarkBroken(pending.context.operation);
    return absl::OkStatus();
  }
  const ExecStatusType status = PQresultStatus(result.get());
  if (pending.kind == Kind::kSync) {
    if (status == PGRES_PIPELINE_SYNC) return absl::OkStatus();
    broken_ = true;  // out of step with the server: never reuse
    if (PQstatus(handle()) == CONNECTION_BAD) {
      return ConnectionLost(handle(), "sync");
    }
    return StatusFromResult(result.get(), handle(), {"sync"});
  }
  // A statement's results end with a null.
  if (Result end(PQgetResult(handle())); end.get() != nullptr) {
    broken_ = true;
    if (PQstatus(handle()) == CONNECTION_BAD) {
      return ConnectionLost(handle(), pending.context.operation);
    }
  }
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
    if (keep && pending.result != nullptr) *pending.result = std::move(result);
    return absl::OkStatus();
  }
  if (pending.kind == Kind::kPrepare) prepared_.erase(pending.sql);
  if (PQstatus(handle()) == CONNECTION_BAD) broken_ = true;
  if (status == PGRES_PIPELINE_ABORTED) {
    // Skipped after an earlier failure, which was reported first.
    return absl::AbortedError(StrCat("postgres ", pending.context.operation,
                                     ": skipped after an earlier failure"));
  }
  return StatusFromResult(result.get(), handle(), pending.context);
}

}  // namespace sluice::postgres_internal
