// Flows, the queue registry, workers, and finding runs' seqs.
#include "sqlite_tables.h"

#include <string>
#include <utility>

#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_bound_rows.h"
#include "sqlite_rows.h"
#include "sqlite_sql.h"
#include "sqlite_status.h"

namespace sluice::sqlite_internal {
// --- Flows and the queue registry ------------------------------------------

absl::StatusOr<std::optional<FlowRecord>> SqliteTables::GetFlow(
    std::string_view flow_slug) {
  SLUICE_ASSIGN_OR_RETURN(Statement get, Prepare(sql::kGetFlow, "GetFlow"));
  get.BindText(1, flow_slug);
  SLUICE_ASSIGN_OR_RETURN(bool found, get.Step());
  if (!found) return std::nullopt;
  return ReadFlow(get);
}

absl::Status SqliteTables::InsertFlow(const FlowRecord& flow) {
  SLUICE_ASSIGN_OR_RETURN(Statement insert,
                          Prepare(sql::kInsertFlow, "InsertFlow"));
  insert.BindText(1, flow.slug);
  BindJson(insert, 2, flow.definition);
  insert.BindTime(3, flow.created_at);
  insert.BindText(4, flow.alias);
  insert.BindInt(5, flow.generation);
  return DescribeDuplicate(insert.Run(), StrCat("flow \"", flow.slug, "\""));
}

absl::StatusOr<std::vector<FlowRecord>> SqliteTables::ListFlows() {
  SLUICE_ASSIGN_OR_RETURN(Statement list,
                          Prepare(sql::kListFlows, "ListFlows"));
  std::vector<FlowRecord> flows;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, list.Step());
    if (!row) return flows;
    SLUICE_ASSIGN_OR_RETURN(FlowRecord flow, ReadFlow(list));
    flows.push_back(std::move(flow));
  }
}

absl::StatusOr<std::optional<QueueRecord>> SqliteTables::GetQueue(
    std::string_view name) {
  SLUICE_ASSIGN_OR_RETURN(Statement get, Prepare(sql::kGetQueue, "GetQueue"));
  get.BindText(1, name);
  SLUICE_ASSIGN_OR_RETURN(bool found, get.Step());
  if (!found) return std::nullopt;
  return ReadQueue(get);
}

absl::StatusOr<bool> SqliteTables::QueueExists(std::string_view name) {
  // Messages live in shared tables, so a queue exists exactly when it is
  // registered.
  SLUICE_ASSIGN_OR_RETURN(std::optional<QueueRecord> queue, GetQueue(name));
  return queue.has_value();
}

absl::Status SqliteTables::CreateQueue(const QueueRecord& queue) {
  SLUICE_ASSIGN_OR_RETURN(Statement insert,
                          Prepare(sql::kInsertQueue, "CreateQueue"));
  insert.BindText(1, queue.name);
  insert.BindText(2, queue.owner_flow);
  insert.BindTime(3, queue.created_at);
  insert.BindInt(4, queue.paused ? 1 : 0);
  return DescribeDuplicate(insert.Run(), StrCat("queue \"", queue.name, "\""));
}

absl::StatusOr<std::vector<QueueRecord>> SqliteTables::ListQueues() {
  SLUICE_ASSIGN_OR_RETURN(Statement list,
                          Prepare(sql::kListQueues, "ListQueues"));
  std::vector<QueueRecord> queues;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, list.Step());
    if (!row) return queues;
    queues.push_back(ReadQueue(list));
  }
}

absl::Status SqliteTables::SetQueuePaused(std::string_view name, bool paused) {
  SLUICE_ASSIGN_OR_RETURN(Statement update,
                          Prepare(sql::kSetQueuePaused, "SetQueuePaused"));
  update.BindText(1, name);
  update.BindInt(2, paused ? 1 : 0);
  SLUICE_RETURN_IF_ERROR(update.Run());
  if (update.Changes() == 0) {
    return absl::NotFoundError(
        StrCat("SetQueuePaused: queue \"", name, "\" does not exist"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::optional<int64_t>>> SqliteTables::FindRunSeqs(
    std::span<const RunId> run_ids) {
  std::vector<std::optional<int64_t>> seqs(run_ids.size());
  std::vector<size_t> unseen;  // positions of runs this transaction hasn't seen
  for (size_t i = 0; i < run_ids.size(); ++i) {
    auto seen = run_seqs_.find(run_ids[i]);
    if (seen != run_seqs_.end()) {
      seqs[i] = seen->second;
      continue;
    }
    if (known_ != nullptr) {
      auto committed = known_->seqs.find(run_ids[i]);
      if (committed != known_->seqs.end()) {
        seqs[i] = committed->second;
        run_seqs_.emplace(run_ids[i], committed->second);
        continue;
      }
    }
    unseen.push_back(i);
  }
  if (unseen.empty()) return seqs;
  BoundRows rows(1, unseen.size());
  for (size_t i : unseen) AddRunId(rows, run_ids[i]);
  SLUICE_ASSIGN_OR_RETURN(Statement find,
                          Prepare(sql::kFindRunSeqs, "FindRunSeqs"));
  find.BindRows(1, rows);
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, find.Step());
    if (!row) break;
    const size_t i = unseen[find.Int(0)];
    seqs[i] = find.Int(1);
    run_seqs_.emplace(run_ids[i], *seqs[i]);
  }
  return seqs;
}

void SqliteTables::CommitRunSeqs() {
  if (known_ == nullptr) return;
  KnownRunSeqs& known = *known_;
  for (const RunId& run_id : deleted_runs_) known.seqs.erase(run_id);
  if (known.seqs.size() + run_seqs_.size() > KnownRunSeqs::kMaxRuns) {
    known.seqs.clear();
  }
  for (const auto& [run_id, seq] : run_seqs_) known.seqs[run_id] = seq;
}

absl::StatusOr<std::vector<int64_t>> SqliteTables::RequireRunSeqs(
    std::span<const RunId> run_ids, std::string_view operation) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<int64_t>> found,
                          FindRunSeqs(run_ids));
  std::vector<int64_t> seqs;
  seqs.reserve(found.size());
  for (size_t i = 0; i < found.size(); ++i) {
    if (!found[i].has_value()) {
      return absl::NotFoundError(StrCat(
          operation, ": run ", run_ids[i].ToString(), " does not exist"));
    }
    seqs.push_back(*found[i]);
  }
  return seqs;
}

absl::Status SqliteTables::RequireQueue(std::string_view queue,
                                        std::string_view operation) {
  return RequireQueueRecord(queue, operation).status();
}

absl::StatusOr<QueueRecord> SqliteTables::RequireQueueRecord(
    std::string_view queue, std::string_view operation) {
  SLUICE_ASSIGN_OR_RETURN(std::optional<QueueRecord> record, GetQueue(queue));
  if (record.has_value()) return *std::move(record);
  return absl::NotFoundError(
      StrCat(operation, ": queue \"", queue, "\" does not exist"));
}

// --- Workers ---------------------------------------------------------------

absl::Status SqliteTables::UpsertWorker(const WorkerRecord& worker) {
  SLUICE_ASSIGN_OR_RETURN(Statement upsert,
                          Prepare(sql::kUpsertWorker, "UpsertWorker"));
  upsert.BindText(1, worker.worker_id);
  upsert.BindText(2, worker.queue_name);
  upsert.BindText(3, worker.flow_slug);
  upsert.BindTime(4, worker.started_at);
  upsert.BindTime(5, worker.last_heartbeat_at);
  upsert.BindOptionalTime(6, worker.stopped_at);
  BindServed(upsert, 7, worker.served);
  return upsert.Run();
}

absl::StatusOr<std::vector<WorkerRecord>> SqliteTables::ListWorkers() {
  SLUICE_ASSIGN_OR_RETURN(Statement list,
                          Prepare(sql::kListWorkers, "ListWorkers"));
  std::vector<WorkerRecord> workers;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, list.Step());
    if (!row) return workers;
    workers.push_back(ReadWorker(list));
  }
}

absl::StatusOr<int> SqliteTables::DeleteInactiveWorkers(
    absl::Time inactive_before, int limit) {
  if (limit <= 0) return 0;  // SQLite reads a negative LIMIT as "all"
  SLUICE_ASSIGN_OR_RETURN(Statement remove, Prepare(sql::kDeleteInactiveWorkers,
                                                    "DeleteInactiveWorkers"));
  remove.BindTime(1, inactive_before);
  remove.BindInt(2, limit);
  SLUICE_RETURN_IF_ERROR(remove.Run());
  return remove.Changes();
}

}  // namespace sluice::sqlite_internal
