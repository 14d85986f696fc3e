// The parameters of the statements that write a stored run or step state
// (kUpdateRuns, kUpdateStepStates and their ...AndCounters forms), one
// array per column, filled row by row.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_UPDATE_COLUMNS_H_
#define SLUICE_BACKENDS_POSTGRES_PG_UPDATE_COLUMNS_H_

#include <utility>

#include "pg_values.h"
#include "sluice/records.h"

namespace sluice::postgres_internal {

// $1 run id, $2 status, $3 error, $4 finished_at, $5 output,
// $6 cancel_requested.
class RunUpdateColumns {
 public:
  void Add(const RunRecord& run) {
    ids_.RunId(run.run_id);
    statuses_.Text(ToString(run.status));
    errors_.Text(run.error);
    finished_.OptionalTime(run.finished_at);
    outputs_.OptionalJson(run.output);
    cancels_.Bool(run.cancel_requested);
  }
  Params Take() && {
    Params params;
    for (ArrayLiteral* column :
         {&ids_, &statuses_, &errors_, &finished_, &outputs_, &cancels_}) {
      params.Array(std::move(*column));
    }
    return params;
  }

 private:
  // Binary, each as kUpdateRuns and kUpdateRunsAndCounters cast it.
  ArrayLiteral ids_{ElementType::kUuid}, statuses_{ElementType::kText},
      errors_{ElementType::kText}, finished_{ElementType::kTimestamptz},
      outputs_{ElementType::kJson}, cancels_{ElementType::kBool};
};

// $1 run id, $2 step index, $3 status, $4 initial_tasks, $5 error,
// $6 skip_reason, $7 started_at, $8 finished_at, $9 output.
class StepStateUpdateColumns {
 public:
  void Add(const StepStateRecord& state) {
    ids_.RunId(state.run_id);
    steps_.Int(state.step_index);
    statuses_.Text(ToString(state.status));
    initial_.OptionalInt(state.initial_tasks);
    errors_.Text(state.error);
    skip_reasons_.Text(ToString(state.skip_reason));
    started_.OptionalTime(state.started_at);
    finished_.OptionalTime(state.finished_at);
    outputs_.OptionalJson(state.output);
  }
  Params Take() && {
    Params params;
    for (ArrayLiteral* column :
         {&ids_, &steps_, &statuses_, &initial_, &errors_, &skip_reasons_,
          &started_, &finished_, &outputs_}) {
      params.Array(std::move(*column));
    }
    return params;
  }

 private:
  // Binary, each as kUpdateStepStates and kUpdateStepStatesAndCounters
  // cast it.
  ArrayLiteral ids_{ElementType::kUuid}, steps_{ElementType::kInt4},
      statuses_{ElementType::kText}, initial_{ElementType::kInt4},
      errors_{ElementType::kText}, skip_reasons_{ElementType::kText},
      started_{ElementType::kTimestamptz}, finished_{ElementType::kTimestamptz},
      outputs_{ElementType::kJson};
};

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_UPDATE_COLUMNS_H_
