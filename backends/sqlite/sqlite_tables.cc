// Flows, the queue registry, runs, step states and workers. Tasks and the
// outbox are in sqlite_tables_tasks.cc; queue messages in
// sqlite_tables_messages.cc.
#include "sqlite_tables.h"

#include <string>
#include <utility>

#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_rows.h"
#include "sqlite_sql.h"
#include "sqlite_status.h"

namespace sluice::sqlite_internal {
namespace {

// `status` unless it reports a duplicate key; then an error naming `record`.
absl::Status DescribeDuplicate(const absl::Status& status,
                               std::string_view record) {
  if (status.code() != absl::StatusCode::kAlreadyExists) return status;
  return absl::AlreadyExistsError(StrCat(record, " already exists"));
}

// The counter a SELECT of one integer column returns, for the row that the
// UPDATE before it proved exists.
absl::StatusOr<int> ReadCounter(Statement& get) {
  SLUICE_ASSIGN_OR_RETURN(bool found, get.Step());
  if (!found) return absl::InternalError("sqlite: an updated counter vanished");
  return static_cast<int>(get.Int(0));
}

std::string StepName(const RunId& run_id, int step_index) {
  return StrCat("step ", step_index, " of run ", run_id.ToString());
}

}  // namespace

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
  return DescribeDuplicate(insert.Run(), StrCat("queue \"", queue.name, "\""));
}

absl::StatusOr<int64_t> SqliteTables::RunSeqOf(const RunId& run_id,
                                               std::string_view operation) {
  if (last_run_seq_.has_value() && last_run_id_ == run_id) {
    return *last_run_seq_;
  }
  SLUICE_ASSIGN_OR_RETURN(Statement get, Prepare(sql::kGetRunSeq, operation));
  BindRunId(get, 1, run_id);
  SLUICE_ASSIGN_OR_RETURN(bool found, get.Step());
  if (!found) {
    return absl::NotFoundError(
        StrCat(operation, ": run ", run_id.ToString(), " does not exist"));
  }
  last_run_id_ = run_id;
  last_run_seq_ = get.Int(0);
  return *last_run_seq_;
}

absl::Status SqliteTables::RequireQueue(std::string_view queue,
                                        std::string_view operation) {
  SLUICE_ASSIGN_OR_RETURN(bool exists, QueueExists(queue));
  if (exists) return absl::OkStatus();
  return absl::NotFoundError(
      StrCat(operation, ": queue \"", queue, "\" does not exist"));
}

// --- Runs ------------------------------------------------------------------

absl::Status SqliteTables::InsertRuns(std::span<const RunRecord> runs) {
  SLUICE_ASSIGN_OR_RETURN(Statement insert,
                          Prepare(sql::kInsertRun, "InsertRuns"));
  for (const RunRecord& run : runs) {
    BindRunId(insert, 1, run.run_id);
    insert.BindText(2, run.flow_slug);
    insert.BindText(3, ToString(run.status));
    BindJson(insert, 4, run.input);
    BindOptionalJson(insert, 5, run.output);
    insert.BindInt(6, run.remaining_steps);
    insert.BindText(7, run.error);
    insert.BindTime(8, run.started_at);
    insert.BindOptionalTime(9, run.finished_at);
    if (absl::Status status = insert.Run(); !status.ok()) {
      return DescribeDuplicate(status, StrCat("run ", run.run_id.ToString()));
    }
    insert.Reset();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<RunRecord>> SqliteTables::GetRun(
    const RunId& run_id, LockMode) {
  SLUICE_ASSIGN_OR_RETURN(Statement get, Prepare(sql::kGetRun, "GetRun"));
  BindRunId(get, 1, run_id);
  SLUICE_ASSIGN_OR_RETURN(bool found, get.Step());
  if (!found) return std::nullopt;
  return ReadRun(get);
}

absl::Status SqliteTables::UpdateRun(const RunRecord& run) {
  SLUICE_ASSIGN_OR_RETURN(Statement update,
                          Prepare(sql::kUpdateRun, "UpdateRun"));
  BindRunId(update, 1, run.run_id);
  update.BindText(2, ToString(run.status));
  BindOptionalJson(update, 3, run.output);
  update.BindInt(4, run.remaining_steps);
  update.BindText(5, run.error);
  update.BindOptionalTime(6, run.finished_at);
  SLUICE_RETURN_IF_ERROR(update.Run());
  if (update.Changes() == 0) {
    return absl::NotFoundError(
        StrCat("UpdateRun: run ", run.run_id.ToString(), " does not exist"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> SqliteTables::AddRunRemainingSteps(const RunId& run_id,
                                                       int delta) {
  constexpr std::string_view kOperation = "AddRunRemainingSteps";
  {
    SLUICE_ASSIGN_OR_RETURN(Statement add,
                            Prepare(sql::kAddRunRemainingSteps, kOperation));
    BindRunId(add, 1, run_id);
    add.BindInt(2, delta);
    SLUICE_RETURN_IF_ERROR(add.Run());
    if (add.Changes() == 0) {
      return absl::NotFoundError(
          StrCat(kOperation, ": run ", run_id.ToString(), " does not exist"));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(Statement get,
                          Prepare(sql::kGetRunRemainingSteps, kOperation));
  BindRunId(get, 1, run_id);
  return ReadCounter(get);
}

absl::StatusOr<std::vector<RunRecord>> SqliteTables::ListRuns(
    std::string_view flow_slug, int limit) {
  std::vector<RunRecord> runs;
  if (limit <= 0) return runs;  // SQLite reads a negative LIMIT as "all"
  SLUICE_ASSIGN_OR_RETURN(
      Statement list, Prepare(flow_slug.empty() ? sql::kListAllRuns.view()
                                                : sql::kListRunsOfFlow.view(),
                              "ListRuns"));
  if (flow_slug.empty()) {
    list.BindInt(1, limit);
  } else {
    list.BindText(1, flow_slug);
    list.BindInt(2, limit);
  }
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, list.Step());
    if (!row) return runs;
    SLUICE_ASSIGN_OR_RETURN(RunRecord run, ReadRun(list));
    runs.push_back(std::move(run));
  }
}

// --- Step states -----------------------------------------------------------

absl::Status SqliteTables::InsertStepStates(
    std::span<const StepStateRecord> states) {
  SLUICE_ASSIGN_OR_RETURN(Statement insert,
                          Prepare(sql::kInsertStepState, "InsertStepStates"));
  for (const StepStateRecord& state : states) {
    BindRunId(insert, 1, state.run_id);
    insert.BindInt(2, state.step_index);
    insert.BindText(3, state.step_slug);
    insert.BindText(4, ToString(state.status));
    insert.BindInt(5, state.remaining_deps);
    insert.BindOptionalInt(6, state.initial_tasks);
    insert.BindOptionalInt(7, state.remaining_tasks);
    BindOptionalJson(insert, 8, state.output);
    insert.BindText(9, state.error);
    insert.BindText(10, ToString(state.skip_reason));
    insert.BindOptionalTime(11, state.started_at);
    insert.BindOptionalTime(12, state.finished_at);
    SLUICE_ASSIGN_OR_RETURN(int64_t run_seq,
                            RunSeqOf(state.run_id, "InsertStepStates"));
    insert.BindInt(13, run_seq);
    if (absl::Status status = insert.Run(); !status.ok()) {
      return DescribeDuplicate(status,
                               StepName(state.run_id, state.step_index));
    }
    insert.Reset();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StepStateRecord>> SqliteTables::GetStepStates(
    const RunId& run_id) {
  SLUICE_ASSIGN_OR_RETURN(Statement get,
                          Prepare(sql::kGetStepStates, "GetStepStates"));
  BindRunId(get, 1, run_id);
  std::vector<StepStateRecord> states;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, get.Step());
    if (!row) return states;
    SLUICE_ASSIGN_OR_RETURN(StepStateRecord state, ReadStepState(get));
    states.push_back(std::move(state));
  }
}

absl::Status SqliteTables::UpdateStepStates(
    std::span<const StepStateRecord> states) {
  SLUICE_ASSIGN_OR_RETURN(Statement update,
                          Prepare(sql::kUpdateStepState, "UpdateStepStates"));
  for (const StepStateRecord& state : states) {
    BindRunId(update, 1, state.run_id);
    update.BindInt(2, state.step_index);
    update.BindText(3, ToString(state.status));
    update.BindOptionalInt(4, state.initial_tasks);
    update.BindOptionalInt(5, state.remaining_tasks);
    BindOptionalJson(update, 6, state.output);
    update.BindText(7, state.error);
    update.BindText(8, ToString(state.skip_reason));
    update.BindOptionalTime(9, state.started_at);
    update.BindOptionalTime(10, state.finished_at);
    SLUICE_RETURN_IF_ERROR(update.Run());
    if (update.Changes() == 0) {
      return absl::NotFoundError(
          StrCat("UpdateStepStates: ", StepName(state.run_id, state.step_index),
                 " does not exist"));
    }
    update.Reset();
  }
  return absl::OkStatus();
}

absl::StatusOr<int> SqliteTables::AddStepCounter(std::string_view add_sql,
                                                 std::string_view get_sql,
                                                 std::string_view operation,
                                                 const RunId& run_id,
                                                 int step_index, int delta) {
  {
    SLUICE_ASSIGN_OR_RETURN(Statement add, Prepare(add_sql, operation));
    BindRunId(add, 1, run_id);
    add.BindInt(2, step_index);
    add.BindInt(3, delta);
    SLUICE_RETURN_IF_ERROR(add.Run());
    if (add.Changes() == 0) {
      return absl::NotFoundError(StrCat(
          operation, ": ", StepName(run_id, step_index), " does not exist"));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(Statement get, Prepare(get_sql, operation));
  BindRunId(get, 1, run_id);
  get.BindInt(2, step_index);
  return ReadCounter(get);
}

absl::StatusOr<int> SqliteTables::AddStepRemainingTasks(const RunId& run_id,
                                                        int step_index,
                                                        int delta) {
  return AddStepCounter(sql::kAddStepRemainingTasks,
                        sql::kGetStepRemainingTasks, "AddStepRemainingTasks",
                        run_id, step_index, delta);
}

absl::StatusOr<int> SqliteTables::AddStepRemainingDeps(const RunId& run_id,
                                                       int step_index,
                                                       int delta) {
  return AddStepCounter(sql::kAddStepRemainingDeps, sql::kGetStepRemainingDeps,
                        "AddStepRemainingDeps", run_id, step_index, delta);
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

}  // namespace sluice::sqlite_internal
