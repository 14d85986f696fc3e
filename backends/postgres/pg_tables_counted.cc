// A run or step state written together with the move of its counters: one
// row version instead of two (decision 0049). As UpdateRuns and
// UpdateStepStates do, a row named twice gets its last record; as the
// Add...Counters calls do, it gets the sum of its deltas, and each delta
// its own add-and-return result.
#include <utility>

#include "pg_batches.h"
#include "pg_rows.h"
#include "pg_sql.h"
#include "pg_tables.h"
#include "pg_update_columns.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
absl::StatusOr<std::vector<int>> PgTables::UpdateRunsAndCounters(
    std::span<const RunRecord> runs, std::span<const RunCounterDelta> deltas) {
  constexpr std::string_view kOperation = "UpdateRunsAndCounters";
  SLUICE_RETURN_IF_ERROR(
      internal::CheckOneDeltaPerRecord(runs.size(), deltas.size(), kOperation));
  if (runs.empty()) return std::vector<int>();
  CounterBatch<RunId, 1> batch;
  std::vector<size_t> last;  // per slot, the record to write
  for (size_t i = 0; i < runs.size(); ++i) {
    internal::KeepLastRecord(
        last, batch.Add(runs[i].run_id, {deltas[i].remaining_steps}), i);
  }
  RunUpdateColumns columns;
  ArrayLiteral sums;
  for (size_t slot = 0; slot < batch.slots(); ++slot) {
    columns.Add(runs[last[slot]]);
    sums.Int(batch.sum(slot)[0]);
  }
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kUpdateRunsAndCounters,
            std::move(columns).Take().Array(std::move(sums)), kOperation));
  SLUICE_ASSIGN_OR_RETURN(auto counts, ResultsOf(result, batch, [&](size_t i) {
                            return StrCat(kOperation, ": run ",
                                          runs[i].run_id.ToString());
                          }));
  return RemainingStepsOf(counts);
}

absl::StatusOr<std::vector<StepCounters>> PgTables::UpdateStepStatesAndCounters(
    std::span<const StepStateRecord> states,
    std::span<const StepCounterDelta> deltas) {
  constexpr std::string_view kOperation = "UpdateStepStatesAndCounters";
  SLUICE_RETURN_IF_ERROR(internal::CheckOneDeltaPerRecord(
      states.size(), deltas.size(), kOperation));
  if (states.empty()) return std::vector<StepCounters>();
  CounterBatch<std::pair<RunId, int>, 2> batch;
  std::vector<size_t> last;  // per slot, the record to write
  for (size_t i = 0; i < states.size(); ++i) {
    internal::KeepLastRecord(
        last,
        batch.Add({states[i].run_id, states[i].step_index},
                  {deltas[i].remaining_tasks, deltas[i].remaining_deps}),
        i);
  }
  StepStateUpdateColumns columns;
  ArrayLiteral tasks, deps;
  for (size_t slot = 0; slot < batch.slots(); ++slot) {
    columns.Add(states[last[slot]]);
    tasks.Int(batch.sum(slot)[0]);
    deps.Int(batch.sum(slot)[1]);
  }
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kUpdateStepStatesAndCounters,
                                std::move(columns)
                                    .Take()
                                    .Array(std::move(tasks))
                                    .Array(std::move(deps)),
                                kOperation));
  SLUICE_ASSIGN_OR_RETURN(
      auto counts, ResultsOf(result, batch, [&](size_t i) {
        return StrCat(kOperation, ": ",
                      StepName(states[i].run_id, states[i].step_index));
      }));
  return StepCountersOf(counts);
}

}  // namespace sluice::postgres_internal
