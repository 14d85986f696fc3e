// Flows, aliases, the queue registry, workers, and queue notifications.
#include "pg_tables.h"

#include <utility>

#include "pg_rows.h"
#include "pg_sql.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {

absl::Status PgTables::LockFlowSlug(std::string_view flow_slug) {
  // The lock is taken when the server reaches the statement, before any
  // statement queued after it runs: nothing to wait for here.
  Send(sql::kLockFlowSlug, Params().Text(flow_slug), "LockFlowSlug");
  return absl::OkStatus();
}

absl::StatusOr<std::optional<FlowRecord>> PgTables::GetFlow(
    std::string_view flow_slug) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(sql::kGetFlow, Params().Text(flow_slug), "GetFlow"));
  if (result.rows() == 0) return std::nullopt;
  return ReadFlow(result.row(0));
}

absl::Status PgTables::InsertFlow(const FlowRecord& flow) {
  Send(sql::kInsertFlow,
       Params()
           .Text(flow.slug)
           .Json(flow.definition)
           .Time(flow.created_at)
           .Text(flow.alias)
           .Int(flow.generation),
       "InsertFlow");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<FlowRecord>> PgTables::ListFlows() {
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kListFlows, Params(), "ListFlows"));
  std::vector<FlowRecord> flows;
  for (int i = 0; i < result.rows(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(FlowRecord flow, ReadFlow(result.row(i)));
    flows.push_back(std::move(flow));
  }
  return flows;
}

absl::StatusOr<bool> PgTables::DeleteFlow(std::string_view flow_slug) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kDeleteFlow, Params().Text(flow_slug), "DeleteFlow"));
  return result.rows() == 1;
}

absl::Status PgTables::UpdateFlow(const FlowRecord& flow) {
  // Waits for the answer: a recompilation is rare, and the caller learns
  // kNotFound here rather than at COMMIT.
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kUpdateFlow,
            Params().Text(flow.slug).Json(flow.definition).Int(flow.generation),
            "UpdateFlow"));
  if (result.rows() == 0) {
    return absl::NotFoundError(
        StrCat("UpdateFlow: flow \"", flow.slug, "\" does not exist"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RunCounts> PgTables::CountRuns(std::string_view flow_slug) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kCountRuns, Params().Text(flow_slug), "CountRuns"));
  if (result.rows() != 1) {
    return absl::InternalError("postgres CountRuns: expected one row");
  }
  Row row = result.row(0);
  RunCounts counts;
  counts.started = row.Int();
  counts.completed = row.Int();
  counts.failed = row.Int();
  counts.cancelled = row.Int();
  SLUICE_RETURN_IF_ERROR(row.status());
  return counts;
}

absl::Status PgTables::LockAlias(std::string_view alias) {
  // Taken when the server reaches it, like LockFlowSlug.
  Send(sql::kLockAlias, Params().Text(alias), "LockAlias");
  return absl::OkStatus();
}

absl::StatusOr<std::optional<AliasRecord>> PgTables::GetAlias(
    std::string_view alias) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(sql::kGetAlias, Params().Text(alias), "GetAlias"));
  if (result.rows() == 0) return std::nullopt;
  return ReadAlias(result.row(0));
}

absl::Status PgTables::ExpectAlias(std::string_view alias,
                                   std::string_view active_slug) {
  // Checked when the server reaches it: a moved alias aborts the
  // transaction there, and a later read or the COMMIT reports it.
  Send(sql::kExpectAlias, Params().Text(alias).Text(active_slug),
       "ExpectAlias");
  return absl::OkStatus();
}

absl::Status PgTables::PutAlias(const AliasRecord& alias) {
  Send(
      sql::kPutAlias,
      Params().Text(alias.alias).Text(alias.active_slug).Time(alias.updated_at),
      "PutAlias");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AliasRecord>> PgTables::ListAliases() {
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kListAliases, Params(), "ListAliases"));
  std::vector<AliasRecord> aliases;
  for (int i = 0; i < result.rows(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(AliasRecord alias, ReadAlias(result.row(i)));
    aliases.push_back(std::move(alias));
  }
  return aliases;
}

absl::StatusOr<std::optional<QueueRecord>> PgTables::GetQueue(
    std::string_view name) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(sql::kGetQueue, Params().Text(name), "GetQueue"));
  if (result.rows() == 0) return std::nullopt;
  return ReadQueue(result.row(0));
}

absl::StatusOr<bool> PgTables::QueueExists(std::string_view name) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kQueueExists, Params().Text(name), "QueueExists"));
  return result.rows() == 1 && result.row(0).Bool();
}

absl::Status PgTables::CreateQueue(const QueueRecord& queue) {
  Send(sql::kInsertQueue,
       Params().Text(queue.name).Text(queue.owner_flow).Time(queue.created_at),
       "CreateQueue");
  Send(sql::kCreatePhysicalQueue, Params().Text(queue.name), "CreateQueue");
  return absl::OkStatus();
}

absl::StatusOr<bool> PgTables::DeleteQueue(std::string_view name) {
  // One statement: the registry row, then pgmq.drop_queue (its tables and
  // every message, live and archived), as the schema's owner.
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kDeleteQueue, Params().Text(name), "DeleteQueue", name));
  return result.rows() == 1;
}

absl::Status PgTables::UpsertWorker(const WorkerRecord& worker) {
  Send(sql::kUpsertWorker,
       Params()
           .Text(worker.worker_id)
           .Text(worker.queue_name)
           .Text(worker.flow_slug)
           .Time(worker.started_at)
           .Time(worker.last_heartbeat_at)
           .OptionalTime(worker.stopped_at)
           .Json(ServedToJson(worker.served)),
       "UpsertWorker");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<WorkerRecord>> PgTables::ListWorkers() {
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kListWorkers, Params(), "ListWorkers"));
  std::vector<WorkerRecord> workers;
  for (int i = 0; i < result.rows(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(WorkerRecord worker, ReadWorker(result.row(i)));
    workers.push_back(std::move(worker));
  }
  return workers;
}

absl::StatusOr<int> PgTables::DeleteInactiveWorkers(absl::Time inactive_before,
                                                    int limit) {
  if (limit <= 0) return 0;
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kDeleteInactiveWorkers,
                                Params().Time(inactive_before).Int(limit),
                                "DeleteInactiveWorkers"));
  return result.rows();
}

void PgTables::SawTime(absl::Time now) {
  if (!latest_now_.has_value() || *latest_now_ < now) latest_now_ = now;
}

void PgTables::NotifyQueue(std::string_view queue) {
  if (!notified_queues_.emplace(queue).second) return;
  Send(sql::kNotifyQueue,
       Params().Text(connection_.StatementsFor(queue).channel), "notify",
       queue);
}

absl::StatusOr<std::vector<TaskRecord>> PgTables::ReadTasks(
    const Result& result, Fields fields, int first) {
  std::vector<TaskRecord> tasks;
  tasks.reserve(result.rows());
  for (int i = 0; i < result.rows(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(TaskRecord task,
                            ReadTask(result.row(i, first), fields));
    tasks.push_back(std::move(task));
  }
  return tasks;
}

}  // namespace sluice::postgres_internal
