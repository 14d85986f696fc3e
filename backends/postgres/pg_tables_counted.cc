// Counter moves: alone (Add...), or with the record of their run or step
// state (Update...AndCounters), one row version instead of two (decision
// 0049). As UpdateRuns and UpdateStepStates do, a row named twice gets its
// last record; each row gets the sum of its deltas, and each delta its own
// add-and-return result. The checked forms (internal::CheckedCounterMoves,
// decision 0085) send the counters each row must end with instead of
// reading them back, and nobody waits for them.
#include <utility>

#include "pg_batches.h"
#include "pg_rows.h"
#include "pg_sql.h"
#include "pg_sql_counters.h"
#include "pg_tables.h"
#include "pg_update_columns.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

using RunBatch = CounterBatch<RunId, 1>;
using StepBatch = CounterBatch<std::pair<RunId, int>, 2>;

// A counted write's rows: the deltas summed per row (slot), and per slot
// the index of its last record (or delta).
template <typename Batch>
struct Slots {
  Batch batch;
  std::vector<size_t> last;
};

// `run(i)` is the run of delta i: its own, or its record's.
template <typename RunOf>
Slots<RunBatch> RunSlots(std::span<const RunCounterDelta> deltas, RunOf run) {
  Slots<RunBatch> slots;
  for (size_t i = 0; i < deltas.size(); ++i) {
    internal::KeepLastRecord(
        slots.last, slots.batch.Add(run(i), {deltas[i].remaining_steps}), i);
  }
  return slots;
}
Slots<RunBatch> RunSlots(std::span<const RunCounterDelta> deltas) {
  return RunSlots(deltas, [&](size_t i) { return deltas[i].run_id; });
}
Slots<RunBatch> RunSlots(std::span<const RunRecord> runs,
                         std::span<const RunCounterDelta> deltas) {
  return RunSlots(deltas, [&](size_t i) { return runs[i].run_id; });
}

// `step(i)` is the step of delta i: its own, or its record's.
template <typename StepOf>
Slots<StepBatch> StepSlots(std::span<const StepCounterDelta> deltas,
                           StepOf step) {
  Slots<StepBatch> slots;
  for (size_t i = 0; i < deltas.size(); ++i) {
    internal::KeepLastRecord(
        slots.last,
        slots.batch.Add(step(i),
                        {deltas[i].remaining_tasks, deltas[i].remaining_deps}),
        i);
  }
  return slots;
}
Slots<StepBatch> StepSlots(std::span<const StepCounterDelta> deltas) {
  return StepSlots(deltas, [&](size_t i) {
    return std::pair(deltas[i].step.run_id, deltas[i].step.step_index);
  });
}
Slots<StepBatch> StepSlots(std::span<const StepStateRecord> states,
                           std::span<const StepCounterDelta> deltas) {
  return StepSlots(deltas, [&](size_t i) {
    return std::pair(states[i].run_id, states[i].step_index);
  });
}

// kAddRunRemainingSteps' parameters.
Params AddRunParams(const Slots<RunBatch>& slots) {
  ArrayLiteral ids, sums;
  for (size_t slot = 0; slot < slots.batch.slots(); ++slot) {
    ids.RunId(slots.batch.key(slot));
    sums.Int(slots.batch.sum(slot)[0]);
  }
  return Params().Array(std::move(ids)).Array(std::move(sums));
}

// kUpdateRunsAndCounters' parameters: each run's last record.
Params UpdateRunParams(const Slots<RunBatch>& slots,
                       std::span<const RunRecord> runs) {
  RunUpdateColumns columns;
  ArrayLiteral sums;
  for (size_t slot = 0; slot < slots.batch.slots(); ++slot) {
    columns.Add(runs[slots.last[slot]]);
    sums.Int(slots.batch.sum(slot)[0]);
  }
  return std::move(columns).Take().Array(std::move(sums));
}

// kAddStepCounters' parameters.
Params AddStepParams(const Slots<StepBatch>& slots) {
  ArrayLiteral ids, steps, tasks, deps;
  for (size_t slot = 0; slot < slots.batch.slots(); ++slot) {
    ids.RunId(slots.batch.key(slot).first);
    steps.Int(slots.batch.key(slot).second);
    tasks.Int(slots.batch.sum(slot)[0]);
    deps.Int(slots.batch.sum(slot)[1]);
  }
  return Params()
      .Array(std::move(ids))
      .Array(std::move(steps))
      .Array(std::move(tasks))
      .Array(std::move(deps));
}

// kUpdateStepStatesAndCounters' parameters: each step's last record.
Params UpdateStepParams(const Slots<StepBatch>& slots,
                        std::span<const StepStateRecord> states) {
  StepStateUpdateColumns columns;
  ArrayLiteral tasks, deps;
  for (size_t slot = 0; slot < slots.batch.slots(); ++slot) {
    columns.Add(states[slots.last[slot]]);
    tasks.Int(slots.batch.sum(slot)[0]);
    deps.Int(slots.batch.sum(slot)[1]);
  }
  return std::move(columns)
      .Take()
      .Array(std::move(tasks))
      .Array(std::move(deps));
}

// Appends each slot's expected final remaining_steps: its last delta's.
Params ExpectingRuns(Params params, const Slots<RunBatch>& slots,
                     std::span<const int> expected) {
  ArrayLiteral steps;
  for (size_t last : slots.last) steps.Int(expected[last]);
  return std::move(params).Array(std::move(steps));
}

// Appends each slot's expected final (remaining_tasks, remaining_deps).
Params ExpectingSteps(Params params, const Slots<StepBatch>& slots,
                      std::span<const StepCounters> expected) {
  ArrayLiteral tasks, deps;
  for (size_t last : slots.last) {
    tasks.Int(expected[last].remaining_tasks);
    deps.Int(expected[last].remaining_deps);
  }
  return std::move(params).Array(std::move(tasks)).Array(std::move(deps));
}

absl::Status CheckOneExpectedPerDelta(size_t deltas, size_t expected,
                                      std::string_view operation) {
  if (deltas == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(operation, ": ", deltas,
                                           " counter deltas but ", expected,
                                           " expected counters; nothing "
                                           "changed"));
}

}  // namespace

absl::StatusOr<std::vector<int>> PgTables::AddRunRemainingSteps(
    std::span<const RunCounterDelta> deltas) {
  if (deltas.empty()) return std::vector<int>();
  Slots<RunBatch> slots = RunSlots(deltas);
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kAddRunRemainingSteps, AddRunParams(slots),
                                "AddRunRemainingSteps"));
  SLUICE_ASSIGN_OR_RETURN(auto counts,
                          ResultsOf(result, slots.batch, [&](size_t i) {
                            return StrCat("AddRunRemainingSteps: run ",
                                          deltas[i].run_id.ToString());
                          }));
  return RemainingStepsOf(counts);
}

absl::StatusOr<std::vector<int>> PgTables::UpdateRunsAndCounters(
    std::span<const RunRecord> runs, std::span<const RunCounterDelta> deltas) {
  constexpr std::string_view kOperation = "UpdateRunsAndCounters";
  SLUICE_RETURN_IF_ERROR(
      internal::CheckOneDeltaPerRecord(runs.size(), deltas.size(), kOperation));
  if (runs.empty()) return std::vector<int>();
  Slots<RunBatch> slots = RunSlots(runs, deltas);
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kUpdateRunsAndCounters,
                                UpdateRunParams(slots, runs), kOperation));
  SLUICE_ASSIGN_OR_RETURN(
      auto counts, ResultsOf(result, slots.batch, [&](size_t i) {
        return StrCat(kOperation, ": run ", runs[i].run_id.ToString());
      }));
  return RemainingStepsOf(counts);
}

absl::StatusOr<std::vector<StepCounters>> PgTables::AddStepCounters(
    std::span<const StepCounterDelta> deltas) {
  if (deltas.empty()) return std::vector<StepCounters>();
  Slots<StepBatch> slots = StepSlots(deltas);
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kAddStepCounters, AddStepParams(slots), "AddStepCounters"));
  SLUICE_ASSIGN_OR_RETURN(
      auto counts, ResultsOf(result, slots.batch, [&](size_t i) {
        const StepRef& step = deltas[i].step;
        return StrCat("AddStepCounters: ",
                      StepName(step.run_id, step.step_index));
      }));
  return StepCountersOf(counts);
}

absl::StatusOr<std::vector<StepCounters>> PgTables::UpdateStepStatesAndCounters(
    std::span<const StepStateRecord> states,
    std::span<const StepCounterDelta> deltas) {
  constexpr std::string_view kOperation = "UpdateStepStatesAndCounters";
  SLUICE_RETURN_IF_ERROR(internal::CheckOneDeltaPerRecord(
      states.size(), deltas.size(), kOperation));
  if (states.empty()) return std::vector<StepCounters>();
  Slots<StepBatch> slots = StepSlots(states, deltas);
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kUpdateStepStatesAndCounters,
                                UpdateStepParams(slots, states), kOperation));
  SLUICE_ASSIGN_OR_RETURN(
      auto counts, ResultsOf(result, slots.batch, [&](size_t i) {
        return StrCat(kOperation, ": ",
                      StepName(states[i].run_id, states[i].step_index));
      }));
  return StepCountersOf(counts);
}

absl::Status PgTables::AddRunRemainingStepsChecked(
    std::span<const RunCounterDelta> deltas, std::span<const int> expected) {
  constexpr std::string_view kOperation = "AddRunRemainingSteps";
  SLUICE_RETURN_IF_ERROR(
      CheckOneExpectedPerDelta(deltas.size(), expected.size(), kOperation));
  if (deltas.empty()) return absl::OkStatus();
  Slots<RunBatch> slots = RunSlots(deltas);
  Send(sql::kAddRunRemainingStepsChecked,
       ExpectingRuns(AddRunParams(slots), slots, expected), kOperation);
  return absl::OkStatus();
}

absl::Status PgTables::UpdateRunsAndCheckCounters(
    std::span<const RunRecord> runs, std::span<const RunCounterDelta> deltas,
    std::span<const int> expected) {
  constexpr std::string_view kOperation = "UpdateRunsAndCounters";
  SLUICE_RETURN_IF_ERROR(
      internal::CheckOneDeltaPerRecord(runs.size(), deltas.size(), kOperation));
  SLUICE_RETURN_IF_ERROR(
      CheckOneExpectedPerDelta(deltas.size(), expected.size(), kOperation));
  if (runs.empty()) return absl::OkStatus();
  Slots<RunBatch> slots = RunSlots(runs, deltas);
  Send(sql::kUpdateRunsAndCountersChecked,
       ExpectingRuns(UpdateRunParams(slots, runs), slots, expected),
       kOperation);
  return absl::OkStatus();
}

absl::Status PgTables::AddStepCountersChecked(
    std::span<const StepCounterDelta> deltas,
    std::span<const StepCounters> expected) {
  constexpr std::string_view kOperation = "AddStepCounters";
  SLUICE_RETURN_IF_ERROR(
      CheckOneExpectedPerDelta(deltas.size(), expected.size(), kOperation));
  if (deltas.empty()) return absl::OkStatus();
  Slots<StepBatch> slots = StepSlots(deltas);
  Send(sql::kAddStepCountersChecked,
       ExpectingSteps(AddStepParams(slots), slots, expected), kOperation);
  return absl::OkStatus();
}

absl::Status PgTables::UpdateStepStatesAndCheckCounters(
    std::span<const StepStateRecord> states,
    std::span<const StepCounterDelta> deltas,
    std::span<const StepCounters> expected) {
  constexpr std::string_view kOperation = "UpdateStepStatesAndCounters";
  SLUICE_RETURN_IF_ERROR(internal::CheckOneDeltaPerRecord(
      states.size(), deltas.size(), kOperation));
  SLUICE_RETURN_IF_ERROR(
      CheckOneExpectedPerDelta(deltas.size(), expected.size(), kOperation));
  if (states.empty()) return absl::OkStatus();
  Slots<StepBatch> slots = StepSlots(states, deltas);
  Send(sql::kUpdateStepStatesAndCountersChecked,
       ExpectingSteps(UpdateStepParams(slots, states), slots, expected),
       kOperation);
  return absl::OkStatus();
}

}  // namespace sluice::postgres_internal
