// What the fan-out process test (fanout_process_test.cc) and its worker
// processes (fanout_worker_main.cc) share: the parent flow, the child job,
// and the side table in which each handler records its completion in the
// same transaction as the completion itself (TaskContext::WriteOnCompletion),
// so a row exists exactly once per committed completion.
#ifndef SLUICE_TESTS_SUPPORT_FANOUT_FLOWS_H_
#define SLUICE_TESTS_SUPPORT_FANOUT_FLOWS_H_

#include <libpq-fe.h>
#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/fan_out.h"
#include "sluice/flow.h"
#include "sluice/internal/strings.h"
#include "sluice/job.h"
#include "sluice/native_connection.h"
#include "sluice/postgres.h"
#include "sluice/sqlite.h"

namespace sluice::testing {

inline constexpr int kFanOutChildren = 50;
inline constexpr char kFanOutQueue[] = "fan";
// A task's lease: a killed worker's tasks are taken back this long after
// their claim (plus the stall sweeper's period).
inline constexpr absl::Duration kFanOutTimeout = absl::Seconds(4);

// The side table's name on a connection of backend `backend` ("sqlite" or
// "postgres"; Postgres keeps it out of Sluice's own schema).
inline std::string DoneTableName(std::string_view backend) {
  return backend == "postgres" ? "public.fanout_done" : "fanout_done";
}

// Runs one statement on a native connection.
inline absl::Status NativeExec(const NativeConnection& connection,
                               const std::string& sql) {
  if (sqlite3* db = SqliteHandle(connection)) {
    char* error = nullptr;
    int result = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    std::string text = error != nullptr ? error : "";
    sqlite3_free(error);
    if (result == SQLITE_OK) return absl::OkStatus();
    return absl::AbortedError(StrCat("sqlite: ", sql, ": ", text));
  }
  if (PGconn* conn = PostgresHandle(connection)) {
    PGresult* result = PQexec(conn, sql.c_str());
    const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
    PQclear(result);
    if (ok) return absl::OkStatus();
    return absl::AbortedError(
        StrCat("postgres: ", sql, ": ", PQerrorMessage(conn)));
  }
  return absl::InternalError("no native connection (memory backend?)");
}

inline std::string CreateDoneTableSql(std::string_view backend) {
  return StrCat("CREATE TABLE ", DoneTableName(backend),
                " (kind TEXT NOT NULL, run TEXT NOT NULL, attempt INTEGER)");
}

// The write a handler registers: one row (kind, run, attempt). Run ids are
// hex and kinds fixed words, so they are safe to inline.
inline NativeWrite RecordDone(std::string kind, const RunId& run, int attempt) {
  return [kind, run = run.ToString(),
          attempt](const NativeConnection& connection) {
    return NativeExec(
        connection,
        StrCat("INSERT INTO ", DoneTableName(connection.backend), " VALUES ('",
               kind, "', '", run, "', ", attempt, ")"));
  };
}

// "fan_child": returns {"p", "c", "v": p * 1000 + c} and records "child".
inline Job FanChildJob() {
  return Job(
      "fan_child",
      {.queue = kFanOutQueue,
       .max_attempts = 10,
       .backoff = {.kind = BackoffKind::kFixed, .delay = absl::ZeroDuration()},
       .timeout = kFanOutTimeout},
      [](const Json& in, TaskContext& ctx) -> absl::StatusOr<Json> {
        const int64_t p = in.at("p").as_int64();
        const int64_t c = in.at("c").as_int64();
        ctx.WriteOnCompletion(RecordDone("child", ctx.run_id(), ctx.attempt()));
        return boost::json::object{{"p", p}, {"c", c}, {"v", p * 1000 + c}};
      });
}

// "fan_parent": step "spawn" fans out kFanOutChildren fan_child jobs for the
// run input {"p": P}; step "collect" returns their results and records
// "parent", so the row proves the parent settled and its run went on.
inline Flow FanParentFlow() {
  Flow flow("fan_parent", {.max_attempts = 10,
                           .base_delay = absl::ZeroDuration(),
                           .timeout = kFanOutTimeout,
                           .backoff = BackoffKind::kFixed,
                           .queue = kFanOutQueue});
  flow.Step("spawn",
            [](const Json& in, TaskContext&) -> absl::StatusOr<StepResult> {
              const int64_t p = in.at("run").at("p").as_int64();
              FanOut out;
              for (int c = 0; c < kFanOutChildren; ++c) {
                out.children.push_back(
                    {.name = "fan_child",
                     .payload = boost::json::object{{"p", p}, {"c", c}}});
              }
              return out;
            })
      .Step("collect", {.depends_on = {"spawn"}},
            [](const Json& in, TaskContext& ctx) -> absl::StatusOr<Json> {
              ctx.WriteOnCompletion(
                  RecordDone("parent", ctx.run_id(), ctx.attempt()));
              return in.at("spawn");
            });
  return flow;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_FANOUT_FLOWS_H_
