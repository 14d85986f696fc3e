// A run or step state written together with the move of its counters: one
// row version instead of two (decision 0049). A call that names a row twice
// falls back to the two separate writes, which sum its deltas.
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "pg_rows.h"
#include "pg_sql.h"
#include "pg_tables.h"
#include "pg_update_columns.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

absl::Status CheckSizes(size_t records, size_t deltas, std::string_view op) {
  if (records == deltas) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(op, ": ", records, " records but ",
                                           deltas,
                                           " counter deltas; nothing changed"));
}

template <typename Record, typename KeyOf>
bool AnyRepeated(std::span<const Record> records, KeyOf key_of) {
  absl::flat_hash_set<decltype(key_of(records[0]))> seen;
  for (const Record& record : records) {
    if (!seen.insert(key_of(record)).second) return true;
  }
  return false;
}

// The row of each slot (1-based, as WITH ORDINALITY numbers it), or the
// first slot no row came back for.
template <typename Values>
absl::Status PlaceBySlot(const Result& result, std::vector<Values>& out,
                         std::vector<bool>& found, Values (*read)(Row& row)) {
  for (int i = 0; i < result.rows(); ++i) {
    Row row = result.row(i);
    const int64_t slot = row.Int() - 1;
    if (slot < 0 || static_cast<size_t>(slot) >= out.size()) {
      return absl::InternalError(StrCat("slot ", slot + 1, " out of range"));
    }
    out[slot] = read(row);
    found[slot] = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int>> PgTables::UpdateRunsAndCounters(
    std::span<const RunRecord> runs, std::span<const RunCounterDelta> deltas) {
  SLUICE_RETURN_IF_ERROR(
      CheckSizes(runs.size(), deltas.size(), "UpdateRunsAndCounters"));
  if (runs.empty()) return std::vector<int>();
  if (AnyRepeated(runs, [](const RunRecord& r) { return r.run_id; })) {
    SLUICE_RETURN_IF_ERROR(UpdateRuns(runs));
    return AddRunRemainingSteps(deltas);
  }
  RunUpdateColumns columns;
  ArrayLiteral sums;
  for (size_t i = 0; i < runs.size(); ++i) {
    columns.Add(runs[i]);
    sums.Int(deltas[i].remaining_steps);
  }
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(sql::kUpdateRunsAndCounters,
                           std::move(columns).Take().Array(std::move(sums)),
                           "UpdateRunsAndCounters"));
  std::vector<int> values(runs.size());
  std::vector<bool> found(runs.size());
  SLUICE_RETURN_IF_ERROR(PlaceBySlot<int>(result, values, found, [](Row& row) {
    return static_cast<int>(row.Int());
  }));
  for (size_t i = 0; i < found.size(); ++i) {
    if (!found[i]) {
      return absl::NotFoundError(StrCat("UpdateRunsAndCounters: run ",
                                        runs[i].run_id.ToString(),
                                        " does not exist"));
    }
  }
  return values;
}

absl::StatusOr<std::vector<StepCounters>> PgTables::UpdateStepStatesAndCounters(
    std::span<const StepStateRecord> states,
    std::span<const StepCounterDelta> deltas) {
  SLUICE_RETURN_IF_ERROR(
      CheckSizes(states.size(), deltas.size(), "UpdateStepStatesAndCounters"));
  if (states.empty()) return std::vector<StepCounters>();
  if (AnyRepeated(states, [](const StepStateRecord& s) {
        return std::make_pair(s.run_id, s.step_index);
      })) {
    SLUICE_RETURN_IF_ERROR(UpdateStepStates(states));
    return AddStepCounters(deltas);
  }
  StepStateUpdateColumns columns;
  ArrayLiteral tasks, deps;
  for (size_t i = 0; i < states.size(); ++i) {
    columns.Add(states[i]);
    tasks.Int(deltas[i].remaining_tasks);
    deps.Int(deltas[i].remaining_deps);
  }
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(sql::kUpdateStepStatesAndCounters,
                                std::move(columns)
                                    .Take()
                                    .Array(std::move(tasks))
                                    .Array(std::move(deps)),
                                "UpdateStepStatesAndCounters"));
  std::vector<StepCounters> values(states.size());
  std::vector<bool> found(states.size());
  SLUICE_RETURN_IF_ERROR(
      PlaceBySlot<StepCounters>(result, values, found, [](Row& row) {
        const int remaining_tasks = static_cast<int>(row.Int());
        return StepCounters{remaining_tasks, static_cast<int>(row.Int())};
      }));
  for (size_t i = 0; i < found.size(); ++i) {
    if (!found[i]) {
      return absl::NotFoundError(
          StrCat("UpdateStepStatesAndCounters: step ", states[i].step_index,
                 " of run ", states[i].run_id.ToString(), " does not exist"));
    }
  }
  return values;
}

}  // namespace sluice::postgres_internal
