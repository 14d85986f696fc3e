// Runs, step states and retention (listing runs is in
// sqlite_tables_listing.cc).
#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "sluice/internal/counter_batch.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_bound_rows.h"
#include "sqlite_rows.h"
#include "sqlite_sql.h"
#include "sqlite_sql_children.h"
#include "sqlite_status.h"
#include "sqlite_tables.h"

namespace sluice::sqlite_internal {
namespace {

std::string StepName(const RunId& run_id, int step_index) {
  return StrCat("step ", step_index, " of run ", run_id.ToString());
}

// A run's seq and the cells an update writes (kUpdateRuns,
// kUpdateRunsAndCounters): status, error, finished_at, cancel_requested,
// output.
void AddRunUpdate(BoundRows& rows, int64_t seq, const RunRecord& run) {
  rows.AddInt(seq)
      .AddText(ToString(run.status))
      .AddText(run.error)
      .AddOptionalTime(run.finished_at)
      .AddInt(run.cancel_requested ? 1 : 0);
  AddOptionalJson(rows, run.output);
}

absl::Status CounterOutOfRange(std::string_view counter) {
  return absl::OutOfRangeError(
      StrCat(counter,
             " no longer fits an int; the deltas added to it are "
             "wrong"));
}

}  // namespace

// --- Runs ------------------------------------------------------------------

absl::Status SqliteTables::InsertRuns(std::span<const RunRecord> runs,
                                      std::span<const Json* const> inputs) {
  constexpr std::string_view kOperation = "InsertRuns";
  if (runs.empty()) return absl::OkStatus();
  int64_t last_seq = 0;
  {
    SLUICE_ASSIGN_OR_RETURN(Statement max,
                            Prepare(sql::kMaxRunSeq, kOperation));
    SLUICE_ASSIGN_OR_RETURN(bool row, max.Step());
    if (row) last_seq = max.Int(0);  // NULL, for no runs yet, reads as 0
  }
  BoundRows rows(15, runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunRecord& run = runs[i];
    rows.AddInt(last_seq + 1 + static_cast<int64_t>(i));
    AddRunId(rows, run.run_id);
    rows.AddText(run.flow_slug)
        .AddText(ToString(run.status))
        .AddInt(run.remaining_steps)
        .AddText(run.error)
        .AddTime(run.started_at)
        .AddOptionalTime(run.finished_at)
        .AddInt(run.priority)
        .AddText(run.external_key)
        .AddInt(run.cancel_requested ? 1 : 0);
    AddNullableJson(rows, run.metadata);
    AddNullableJson(rows, run.options);
    AddJson(rows, RunInputToStore(run, inputs, i));
    AddOptionalJson(rows, run.output);
  }
  SLUICE_ASSIGN_OR_RETURN(Statement insert,
                          Prepare(sql::kInsertRuns, kOperation));
  insert.BindRows(1, rows);
  // A duplicate is a run id, or a flow's external key (runs_by_key).
  SLUICE_RETURN_IF_ERROR(DescribeDuplicate(
      insert.Run(), runs.size() == 1
                        ? StrCat("run ", runs[0].run_id.ToString(),
                                 " or its flow's external key")
                        : "a run of the batch, or a flow's external key,"));
  for (size_t i = 0; i < runs.size(); ++i) {
    run_seqs_.insert_or_assign(runs[i].run_id,
                               last_seq + 1 + static_cast<int64_t>(i));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::optional<RunRecord>>> SqliteTables::GetRuns(
    std::span<const RunId> run_ids, Fields fields) {
  std::vector<std::optional<RunRecord>> runs(run_ids.size());
  if (run_ids.empty()) return runs;
  BoundRows ids(1, run_ids.size());
  for (const RunId& run_id : run_ids) AddRunId(ids, run_id);
  SLUICE_ASSIGN_OR_RETURN(Statement get,
                          Prepare(sql::kGetRuns.For(fields), "GetRuns"));
  get.BindRows(1, ids);
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, get.Step());
    if (!row) return runs;
    SLUICE_ASSIGN_OR_RETURN(RunRecord run, ReadRun(get, fields, /*first=*/2));
    run_seqs_.emplace(run.run_id, get.Int(1));
    runs[get.Int(0)] = std::move(run);
  }
}

absl::Status SqliteTables::UpdateRuns(std::span<const RunRecord> runs) {
  if (runs.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<int64_t> seqs,
      RequireRunSeqs(
          RunIdsOf(runs, [](const RunRecord& r) { return r.run_id; }),
          "UpdateRuns"));
  // One batch row per run: of several writes to one run the last one wins,
  // as if they applied in order.
  absl::flat_hash_map<int64_t, size_t> last_write;
  for (size_t i = 0; i < runs.size(); ++i) last_write[seqs[i]] = i;
  BoundRows rows(6, runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    if (last_write[seqs[i]] == i) AddRunUpdate(rows, seqs[i], runs[i]);
  }
  rows.SortByKey(1);
  SLUICE_ASSIGN_OR_RETURN(Statement update,
                          Prepare(sql::kUpdateRuns, "UpdateRuns"));
  update.BindRows(1, rows);
  return update.Run();
}

absl::StatusOr<std::vector<int>> SqliteTables::AddRunRemainingSteps(
    std::span<const RunCounterDelta> deltas) {
  constexpr std::string_view kOperation = "AddRunRemainingSteps";
  if (deltas.empty()) return std::vector<int>();
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<int64_t> seqs,
      RequireRunSeqs(
          RunIdsOf(deltas, [](const RunCounterDelta& d) { return d.run_id; }),
          kOperation));
  internal::CounterBatch<int64_t, 1> batch;
  for (size_t i = 0; i < deltas.size(); ++i) {
    batch.Add(seqs[i], {deltas[i].remaining_steps});
  }
  BoundRows rows(2, batch.slots());  // (seq, delta) per run, key = slot
  for (size_t slot = 0; slot < batch.slots(); ++slot) {
    rows.AddInt(batch.key(slot)).AddInt(batch.sum(slot)[0]);
  }
  rows.SortByKey(1);
  {
    SLUICE_ASSIGN_OR_RETURN(Statement add,
                            Prepare(sql::kAddRunRemainingSteps, kOperation));
    add.BindRows(1, rows);
    SLUICE_RETURN_IF_ERROR(add.Run());
  }
  return ReadBackRemainingSteps(rows, batch, deltas, kOperation);
}

absl::StatusOr<std::vector<int>> SqliteTables::UpdateRunsAndCounters(
    std::span<const RunRecord> runs, std::span<const RunCounterDelta> deltas) {
  constexpr std::string_view kOperation = "UpdateRunsAndCounters";
  SLUICE_RETURN_IF_ERROR(
      internal::CheckOneDeltaPerRecord(runs.size(), deltas.size(), kOperation));
  if (runs.empty()) return std::vector<int>();
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<int64_t> seqs,
      RequireRunSeqs(
          RunIdsOf(runs, [](const RunRecord& r) { return r.run_id; }),
          kOperation));
  internal::CounterBatch<int64_t, 1> batch;
  std::vector<size_t> last;  // per slot, the record to write
  for (size_t i = 0; i < runs.size(); ++i) {
    internal::KeepLastRecord(
        last, batch.Add(seqs[i], {deltas[i].remaining_steps}), i);
  }
  BoundRows rows(7, batch.slots());  // key = slot
  for (size_t slot = 0; slot < batch.slots(); ++slot) {
    AddRunUpdate(rows, batch.key(slot), runs[last[slot]]);
    rows.AddInt(batch.sum(slot)[0]);
  }
  rows.SortByKey(1);
  {
    SLUICE_ASSIGN_OR_RETURN(Statement update,
                            Prepare(sql::kUpdateRunsAndCounters, kOperation));
    update.BindRows(1, rows);
    SLUICE_RETURN_IF_ERROR(update.Run());
  }
  return ReadBackRemainingSteps(rows, batch, deltas, kOperation);
}

absl::StatusOr<std::vector<int>> SqliteTables::ReadBackRemainingSteps(
    const BoundRows& rows, internal::CounterBatch<int64_t, 1>& batch,
    std::span<const RunCounterDelta> deltas, std::string_view operation) {
  SLUICE_ASSIGN_OR_RETURN(Statement get,
                          Prepare(sql::kGetRunRemainingSteps, operation));
  get.BindRows(1, rows);
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, get.Step());
    if (!row) break;
    batch.SetFinal(get.Int(0), {get.Int(1)});
  }
  internal::CounterBatch<int64_t, 1>::Results results = batch.TakeResults();
  if (results.out_of_range.has_value()) {
    return CounterOutOfRange(
        StrCat("remaining_steps of run ",
               deltas[*results.out_of_range].run_id.ToString()));
  }
  std::vector<int> values;
  values.reserve(deltas.size());
  for (const auto& value : results.values) values.push_back(value[0]);
  return values;
}

absl::StatusOr<std::vector<RunRecord>> SqliteTables::FindFinishedRuns(
    absl::Time finished_before, int limit) {
  std::vector<RunRecord> runs;
  if (limit <= 0) return runs;  // SQLite reads a negative LIMIT as "all"
  SLUICE_ASSIGN_OR_RETURN(Statement find,
                          Prepare(sql::kFindFinishedRuns, "FindFinishedRuns"));
  find.BindTime(1, finished_before);
  find.BindInt(2, limit);
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, find.Step());
    if (!row) return runs;
    SLUICE_ASSIGN_OR_RETURN(RunRecord run, ReadRun(find, Fields::kNoPayloads));
    runs.push_back(std::move(run));
  }
}

absl::StatusOr<int> SqliteTables::DeleteRuns(std::span<const RunId> run_ids) {
  constexpr std::string_view kOperation = "DeleteRuns";
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<int64_t>> seqs,
                          FindRunSeqs(run_ids));
  // (seq, run id) of each run to delete. FindRunSeqs remembered every run
  // it found, so forgetting one also skips its repeats.
  BoundRows runs(2, run_ids.size());
  for (size_t i = 0; i < run_ids.size(); ++i) {
    if (seqs[i].has_value() && run_seqs_.erase(run_ids[i]) == 1) {
      runs.AddInt(*seqs[i]);
      AddRunId(runs, run_ids[i]);
      deleted_runs_.push_back(run_ids[i]);
    }
  }
  if (runs.empty()) return 0;
  // Messages first: they are found through the tasks. The runs' child links
  // (as parents) go with them; child reports stay in this, the child's,
  // store until relayed, even if their parent run is gone
  // (docs/decisions/0036-fan-out-storage.md).
  for (std::string_view dependents :
       {sql::kDeleteRunMessages.view(), sql::kDeleteRunArchivedMessages.view(),
        sql::kDeleteRunReports, sql::kDeleteRunChildLinks,
        sql::kDeleteRunAttempts, sql::kDeleteRunTasks,
        sql::kDeleteRunStepStates}) {
    SLUICE_ASSIGN_OR_RETURN(Statement remove, Prepare(dependents, kOperation));
    remove.BindRows(1, runs);
    SLUICE_RETURN_IF_ERROR(remove.Run());
  }
  SLUICE_ASSIGN_OR_RETURN(Statement remove,
                          Prepare(sql::kDeleteRuns, kOperation));
  remove.BindRows(1, runs);
  SLUICE_RETURN_IF_ERROR(remove.Run());
  return remove.Changes();
}

// --- Step states -----------------------------------------------------------

absl::Status SqliteTables::InsertStepStates(
    std::span<const StepStateRecord> states) {
  constexpr std::string_view kOperation = "InsertStepStates";
  if (states.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<int64_t> seqs,
      RequireRunSeqs(
          RunIdsOf(states, [](const StepStateRecord& s) { return s.run_id; }),
          kOperation));
  BoundRows rows(13, states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    const StepStateRecord& state = states[i];
    rows.AddInt(seqs[i]);
    AddRunId(rows, state.run_id);
    rows.AddInt(state.step_index)
        .AddText(state.step_slug)
        .AddText(ToString(state.status))
        .AddInt(state.remaining_deps)
        .AddOptionalInt(state.initial_tasks)
        .AddOptionalInt(state.remaining_tasks)
        .AddText(state.error)
        .AddText(ToString(state.skip_reason))
        .AddOptionalTime(state.started_at)
        .AddOptionalTime(state.finished_at);
    AddOptionalJson(rows, state.output);
  }
  SLUICE_ASSIGN_OR_RETURN(Statement insert,
                          Prepare(sql::kInsertStepStates, kOperation));
  insert.BindRows(1, rows);
  return DescribeDuplicate(
      insert.Run(), states.size() == 1
                        ? StepName(states[0].run_id, states[0].step_index)
                        : "a step state of the batch");
}

absl::StatusOr<std::vector<std::vector<StepStateRecord>>>
SqliteTables::GetStepStates(std::span<const RunId> run_ids, Fields fields) {
  std::vector<std::vector<StepStateRecord>> states(run_ids.size());
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<int64_t>> seqs,
                          FindRunSeqs(run_ids));
  BoundRows runs(1, run_ids.size());
  std::vector<size_t> position_of;  // by bound row
  for (size_t i = 0; i < run_ids.size(); ++i) {
    if (!seqs[i].has_value()) continue;
    runs.AddInt(*seqs[i]);
    position_of.push_back(i);
  }
  if (runs.empty()) return states;
  SLUICE_ASSIGN_OR_RETURN(
      Statement get, Prepare(sql::kGetStepStates.For(fields), "GetStepStates"));
  get.BindRows(1, runs);
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, get.Step());
    if (!row) break;
    SLUICE_ASSIGN_OR_RETURN(StepStateRecord state,
                            ReadStepState(get, fields, /*first=*/1));
    states[position_of[get.Int(0)]].push_back(std::move(state));
  }
  // Each run's rows come in primary key order; this only checks.
  auto by_step = [](const StepStateRecord& a, const StepStateRecord& b) {
    return a.step_index < b.step_index;
  };
  for (std::vector<StepStateRecord>& of_run : states) {
    if (!std::is_sorted(of_run.begin(), of_run.end(), by_step)) {
      std::sort(of_run.begin(), of_run.end(), by_step);
    }
  }
  return states;
}

absl::Status SqliteTables::UpdateStepStates(
    std::span<const StepStateRecord> states) {
  constexpr std::string_view kOperation = "UpdateStepStates";
  if (states.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<int64_t> seqs,
      RequireRunSeqs(
          RunIdsOf(states, [](const StepStateRecord& s) { return s.run_id; }),
          kOperation));
  SLUICE_ASSIGN_OR_RETURN(Statement update,
                          Prepare(sql::kUpdateStepState, kOperation));
  for (size_t i = 0; i < states.size(); ++i) {
    const StepStateRecord& state = states[i];
    update.BindInt(1, seqs[i]);
    update.BindInt(2, state.step_index);
    update.BindText(3, ToString(state.status));
    update.BindOptionalInt(4, state.initial_tasks);
    update.BindText(5, state.error);
    update.BindText(6, ToString(state.skip_reason));
    update.BindOptionalTime(7, state.started_at);
    update.BindOptionalTime(8, state.finished_at);
    BindOptionalJson(update, 9, state.output);
    SLUICE_RETURN_IF_ERROR(update.Run());
    if (update.Changes() == 0) {
      return absl::NotFoundError(
          StrCat(kOperation, ": ", StepName(state.run_id, state.step_index),
                 " does not exist"));
    }
    update.Reset();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StepCounters>> SqliteTables::AddStepCounters(
    std::span<const StepCounterDelta> deltas) {
  constexpr std::string_view kOperation = "AddStepCounters";
  if (deltas.empty()) return std::vector<StepCounters>();
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<int64_t> seqs,
      RequireRunSeqs(
          RunIdsOf(deltas,
                   [](const StepCounterDelta& d) { return d.step.run_id; }),
          kOperation));
  // Keyed by (run seq, step index); counters (remaining_tasks,
  // remaining_deps).
  using Batch = internal::CounterBatch<std::pair<int64_t, int64_t>, 2>;
  Batch batch;
  for (size_t i = 0; i < deltas.size(); ++i) {
    batch.Add({seqs[i], deltas[i].step.step_index},
              {deltas[i].remaining_tasks, deltas[i].remaining_deps});
  }
  BoundRows rows(4, batch.slots());  // (seq, step, deltas) per step
  for (size_t slot = 0; slot < batch.slots(); ++slot) {
    rows.AddInt(batch.key(slot).first)
        .AddInt(batch.key(slot).second)
        .AddInt(batch.sum(slot)[0])
        .AddInt(batch.sum(slot)[1]);
  }
  rows.SortByKey(2);
  {
    SLUICE_ASSIGN_OR_RETURN(Statement add,
                            Prepare(sql::kAddStepCounters, kOperation));
    add.BindRows(1, rows);
    SLUICE_RETURN_IF_ERROR(add.Run());
  }
  SLUICE_ASSIGN_OR_RETURN(Statement get,
                          Prepare(sql::kGetStepCounters, kOperation));
  get.BindRows(1, rows);
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, get.Step());
    if (!row) break;
    batch.SetFinal(get.Int(0), {get.Int(1), get.Int(2)});
  }
  Batch::Results results = batch.TakeResults();
  if (results.missing.has_value()) {
    const StepRef& step = deltas[*results.missing].step;
    return absl::NotFoundError(StrCat(kOperation, ": ",
                                      StepName(step.run_id, step.step_index),
                                      " does not exist"));
  }
  if (results.out_of_range.has_value()) {
    const StepRef& step = deltas[*results.out_of_range].step;
    return CounterOutOfRange(
        StrCat("a counter of ", StepName(step.run_id, step.step_index)));
  }
  std::vector<StepCounters> values;
  values.reserve(deltas.size());
  for (const auto& value : results.values) {
    values.push_back(StepCounters{value[0], value[1]});
  }
  return values;
}

}  // namespace sluice::sqlite_internal
