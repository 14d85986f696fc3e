// One libpq connection in pipeline mode: statements are queued and their
// results read only when the caller needs one.
//
//   connection.Send(sql::kUpdateRuns, params, {"UpdateRuns"});   // no wait
//   absl::StatusOr<Result> rows =
//       connection.Query(sql::kGetTasks, params, {"GetTasks"});  // one trip
//
// Send() queues a statement whose result nobody waits for; its outcome is
// checked when results are next read, by Query() (which sends a sync point
// after its own statement, then reads everything queued before it, in
// order) or by Drain(). The first failure among them is what that call
// returns. So a transaction costs one round trip per statement whose result
// is needed, plus one for COMMIT, which drains the rest. A statement whose
// checks must stop a COMMIT does them in SQL (sluice.require_found raises),
// so the server aborts the transaction and COMMIT reports ROLLBACK.
//
// Every statement but transaction control is prepared, on first use on this
// connection, under a generated name; the PREPARE travels in the same
// pipeline as its first execution. A statement marked for a generic plan
// (sql::kGenericPlan) runs with the session switched to generic plans and
// sequential scans off, the rest with custom plans; the switch is one more
// queued statement, sent only when the mode changes.
//
// A connection that lost its server is broken() for good: the pool
// discards it. Not thread-safe: one transaction uses it at a time.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_CONNECTION_H_
#define SLUICE_BACKENDS_POSTGRES_PG_CONNECTION_H_

#include <libpq-fe.h>

#include <deque>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pg_connect.h"
#include "pg_queue_sql.h"
#include "pg_status.h"
#include "pg_values.h"
#include "sluice/postgres.h"

namespace sluice::postgres_internal {

// An owned PGresult.
class Result {
 public:
  Result() = default;
  explicit Result(PGresult* result) : result_(result, &PQclear) {}

  const PGresult* get() const { return result_.get(); }
  int rows() const { return result_ ? PQntuples(result_.get()) : 0; }
  Row row(int index, int first_column = 0) const {
    return Row(result_.get(), index, first_column);
  }
  // The number of rows an INSERT/UPDATE/DELETE touched.
  int64_t affected() const;
  // The command tag's verb: "COMMIT", or "ROLLBACK" for a COMMIT of a
  // transaction the server had aborted.
  std::string_view command_status() const {
    return result_ ? PQcmdStatus(result_.get()) : "";
  }

 private:
  std::unique_ptr<PGresult, decltype(&PQclear)> result_{nullptr, &PQclear};
};

class Connection {
 public:
  // Connects (pg_connect.h), sets the session (UTC, ISO dates, UTF8, the
  // statement timeout) and enters pipeline mode. kUnavailable if the server
  // can't be reached or doesn't answer in time.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const std::string& url, const PostgresOptions& options);
  // Wraps a host's connection (BorrowPostgres), never closing it. Its
  // statements are not prepared (nothing is left behind in the host's
  // session), and it is not in pipeline mode until EnterPipeline().
  static std::unique_ptr<Connection> Borrow(PGconn* connection);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // False once the connection broke, or if the server closed it while it
  // sat idle (a terminated backend leaves the socket readable).
  bool CheckAlive();
  bool broken() const { return broken_; }

  // Queues a prepared statement; its outcome is checked later.
  void Send(std::string_view sql, const Params& params,
            StatementContext context);
  // Queues a transaction control statement (not prepared).
  void SendControl(std::string_view sql, StatementContext context);
  // Queues a transaction control statement and waits for its result,
  // checking every statement queued before it.
  absl::StatusOr<Result> QueryControl(std::string_view sql,
                                      StatementContext context);
  // Queues a prepared statement and waits for its result, checking every
  // statement queued before it.
  absl::StatusOr<Result> Query(std::string_view sql, const Params& params,
                               StatementContext context);
  // Query(), with the transaction control statement `control` (COMMIT)
  // queued behind it in the same round trip; `control_result` receives its
  // result. A failed statement makes the server skip `control`, and the
  // failure is what this returns.
  absl::StatusOr<Result> QueryThenControl(std::string_view sql,
                                          const Params& params,
                                          StatementContext context,
                                          std::string_view control,
                                          StatementContext control_context,
                                          Result& control_result);
  // A statement of QueryAll.
  struct Statement {
    std::string_view sql;
    const Params& params;
    StatementContext context;
  };
  // Queues every statement and waits once for all their results, in
  // order, checking every statement queued before them: one round trip.
  absl::StatusOr<std::vector<Result>> QueryAll(
      std::span<const Statement> statements);
  // QueryAll(), with `control` queued behind, as in QueryThenControl().
  absl::StatusOr<std::vector<Result>> QueryAllThenControl(
      std::span<const Statement> statements, std::string_view control,
      StatementContext control_context, Result& control_result);
  // Waits for everything queued; the first failure, if any.
  absl::Status Drain();
  // As Rollback(), but undoes only what followed SAVEPOINT `savepoint`
  // (then releases it), leaving the host's transaction open.
  void RollbackToSavepoint(std::string_view savepoint);
  // Pipeline mode on and off (a borrowed connection is in it only while a
  // transaction of Sluice's runs). Exit drains first. kInternal if libpq
  // refuses.
  absl::Status EnterPipeline();
  absl::Status ExitPipeline();
  PGconn* handle() const { return connection_.get(); }
  // Ends the open transaction block, whatever state it is in, in one round
  // trip: a sync point first (the server skips everything after a failure
  // until the next one), then ROLLBACK. Failures of statements queued
  // before are dropped. A connection whose ROLLBACK fails is broken().
  void Rollback();

  // The statements on `queue`'s tables, built once per connection.
  const QueueSql& StatementsFor(std::string_view queue);
  // `sql`'s one-row shape (pg_one_row.h), built once per connection.
  std::string_view OneRowOf(std::string_view sql);

 private:
  enum class Kind { kPrepare, kStatement, kSync };
  struct Pending {
    Kind kind;
    StatementContext context;
    std::string sql;  // kPrepare: forgotten again if the prepare fails
    // kStatement: where its result goes (the caller waiting for it reads
    // every result pending before returning, so this never dangles).
    Result* result = nullptr;
  };

  explicit Connection(ConnectionHandle connection)
      : connection_(std::move(connection)) {}
  // The prepared statement's name for `sql`, queuing its PREPARE first if
  // this connection hasn't seen it.
  const std::string& PreparedName(std::string_view sql,
                                  const StatementContext& context);
  void Sync();
  // QueryAll(), then `control` unless `control_result` is null.
  absl::StatusOr<std::vector<Result>> SendAllAndWait(
      std::span<const Statement> statements, std::string_view control,
      StatementContext control_context, Result* control_result);
  // Reads the results of everything pending into their destinations.
  absl::Status ReadPending();
  // With `keep` false, a result is dropped whatever its destination.
  absl::Status ReadOne(const Pending& pending, bool keep = true);
  void MarkBroken(std::string_view operation);
  // Queues the switch to the plan mode `sql` asks for, if the session is
  // not known to be in it.
  void UsePlanModeFor(std::string_view sql, const StatementContext& context);
  // Keeps `status` if it is the first failure; an OK status changes nothing.
  void Fail(absl::Status status);
  // Sends `statements` (transaction control) after a sync point and waits
  // for them; a connection where one fails is broken().
  void EndTransactionWith(std::initializer_list<std::string_view> statements);

  ConnectionHandle connection_;
  bool broken_ = false;
  bool prepare_ = true;  // false on a borrowed connection
  // The session's plan mode. kUnknown after a failure or a rollback, which
  // may have undone a switch queued before it.
  enum class PlanMode { kUnknown, kCustom, kGeneric };
  PlanMode plan_mode_ = PlanMode::kCustom;
  absl::Status failure_;  // the first failure not yet reported
  std::deque<Pending> pending_;
  absl::flat_hash_map<std::string, std::string> prepared_;  // sql -> name
  int next_statement_ = 0;
  absl::flat_hash_map<std::string, std::unique_ptr<QueueSql>> queues_;
  // sql -> its one-row shape; nodes, so views of them outlive rehashing.
  absl::node_hash_map<std::string, std::string> one_row_;
};

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_CONNECTION_H_
