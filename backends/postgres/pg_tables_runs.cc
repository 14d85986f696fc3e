// Runs, step states and retention.
#include <array>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "pg_rows.h"
#include "pg_sql.h"
#include "pg_sql_children.h"
#include "pg_tables.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

// Add-and-return for a batch of counter deltas, several of them perhaps to
// one row. A batch UPDATE applies each row's summed delta once and returns
// the row's final values; each delta's own result is then its row's final
// value less the deltas after it, which is what adding them one at a time
// would have returned.
template <typename Key, size_t kCounters>
class CounterSlots {
 public:
  using Values = std::array<int64_t, kCounters>;

  void Add(const Key& key, const Values& delta) {
    auto [it, inserted] = slot_of_.try_emplace(key, keys_.size());
    if (inserted) {
      keys_.push_back(key);
      sums_.push_back({});
      finals_.emplace_back();
    }
    for (size_t c = 0; c < kCounters; ++c) sums_[it->second][c] += delta[c];
    deltas_.push_back({it->second, delta});
  }
  size_t slots() const { return keys_.size(); }
  const Key& key(size_t slot) const { return keys_[slot]; }
  const Values& sum(size_t slot) const { return sums_[slot]; }
  void SetFinal(size_t slot, const Values& values) { finals_[slot] = values; }

  // Each delta's result, in order; or the position of the first delta whose
  // row was not found.
  std::vector<std::array<int, kCounters>> Results(
      std::optional<size_t>* missing) {
    std::vector<std::array<int, kCounters>> results(deltas_.size());
    for (size_t i = deltas_.size(); i-- > 0;) {
      std::optional<Values>& final_values = finals_[deltas_[i].first];
      if (!final_values.has_value()) {
        *missing = i;
        continue;
      }
      for (size_t c = 0; c < kCounters; ++c) {
        results[i][c] = static_cast<int>((*final_values)[c]);
        (*final_values)[c] -= deltas_[i].second[c];
      }
    }
    return results;
  }

 private:
  absl::flat_hash_map<Key, size_t> slot_of_;
  std::vector<Key> keys_;
  std::vector<Values> sums_;
  std::vector<std::optional<Values>> finals_;
  std::vector<std::pair<size_t, Values>> deltas_;
};

std::string StepName(const RunId& run_id, int step_index) {
  return StrCat("step ", step_index, " of run ", run_id.ToString());
}

// The positions of `records` to write when the last write of each key wins.
template <typename Record, typename KeyOf>
std::vector<size_t> LastWrites(std::span<const Record> records, KeyOf key_of) {
  absl::flat_hash_map<decltype(key_of(records[0])), size_t> last;
  for (size_t i = 0; i < records.size(); ++i) last[key_of(records[i])] = i;
  std::vector<size_t> positions;
  for (size_t i = 0; i < records.size(); ++i) {
    if (last[key_of(records[i])] == i) positions.push_back(i);
  }
  return positions;
}

}  // namespace

// --- Runs -----------------------------------------------------------------

namespace sql {

const std::string& ListRuns(RunQuery::OrderBy order_by, bool newest_first,
                            Fields fields) {
  static const std::array<std::string, 8> kStatements = [] {
    std::array<std::string, 8> statements;
    for (int i = 0; i < 8; ++i) {
      const bool by_finish = (i & 1) != 0;
      const bool newest_first = (i & 2) != 0;
      const bool all = (i & 4) != 0;
      const std::string time = by_finish ? "r.finished_at" : "r.started_at";
      const std::string direction = newest_first ? " DESC" : "";
      statements[i] = StrCat(
          "SELECT ", all ? kRunAll.view() : std::string_view(kRunState),
          // One flow is an equality, so the (flow_slug, time, run_id)
          // index yields rows in order; ANY over several cannot (before
          // Postgres 17) and sorts that flows' matching runs.
          " FROM sluice.runs AS r WHERE ($1::text[] IS NULL OR "
          "(cardinality($1::text[]) = 1 AND r.flow_slug = ($1::text[])[1]) OR "
          "(cardinality($1::text[]) > 1 AND r.flow_slug = ANY($1::text[]))) "
          "AND ($2::text[] IS NULL OR r.status = "
          "ANY($2::text[])) AND ($3::jsonb IS NULL OR r.metadata::jsonb "
          "@> $3::jsonb) AND ($4::timestamptz IS NULL OR ",
          time, " >= $4::timestamptz) AND ($5::timestamptz IS NULL OR ", time,
          " < $5::timestamptz) AND ($6::timestamptz IS NULL OR (", time,
          ", r.run_id) ", newest_first ? "<" : ">",
          " ($6::timestamptz, $7::uuid))",
          by_finish ? " AND r.finished_at IS NOT NULL" : "", " ORDER BY ", time,
          direction, ", r.run_id", direction, " LIMIT $8");
    }
    return statements;
  }();
  const int index = (order_by == RunQuery::OrderBy::kFinishedAt ? 1 : 0) +
                    (newest_first ? 2 : 0) + (fields == Fields::kAll ? 4 : 0);
  return kStatements[index];
}

}  // namespace sql

absl::Status PgTables::InsertRuns(std::span<const RunRecord> runs) {
  if (runs.empty()) return absl::OkStatus();
  ArrayLiteral ids, flows, statuses, remaining, errors, started, finished,
      inputs, outputs, priorities, keys, metadata, options, cancels;
  for (const RunRecord& run : runs) {
    priorities.Int(run.priority);
    keys.Text(run.external_key);
    metadata.OptionalJson(NullIsAbsent(run.metadata));
    options.OptionalJson(NullIsAbsent(run.options));
    cancels.Bool(run.cancel_requested);
    ids.RunId(run.run_id);
    flows.Text(run.flow_slug);
    statuses.Text(ToString(run.status));
    remaining.Int(run.remaining_steps);
    errors.Text(run.error);
    started.Time(run.started_at);
    finished.OptionalTime(run.finished_at);
    inputs.Json(run.input);
    outputs.OptionalJson(run.output);
  }
  Send(sql::kInsertRuns,
       Params()
           .Array(std::move(ids))
           .Array(std::move(flows))
           .Array(std::move(statuses))
           .Array(std::move(remaining))
           .Array(std::move(errors))
           .Array(std::move(started))
           .Array(std::move(finished))
           .Array(std::move(inputs))
           .Array(std::move(outputs))
           .Array(std::move(priorities))
           .Array(std::move(keys))
           .Array(std::move(metadata))
           .Array(std::move(options))
           .Array(std::move(cancels)),
       "InsertRuns");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::optional<RunRecord>>> PgTables::GetRuns(
    std::span<const RunId> run_ids, LockMode lock, Fields fields) {
  std::vector<std::optional<RunRecord>> runs(run_ids.size());
  if (run_ids.empty()) return runs;
  ArrayLiteral ids;
  for (const RunId& run_id : run_ids) ids.RunId(run_id);
  const sql::ByFields& query =
      lock == LockMode::kForUpdate ? sql::kLockRuns : sql::kGetRuns;
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(query.For(fields), Params().Array(std::move(ids)), "GetRuns"));
  for (int i = 0; i < result.rows(); ++i) {
    Row row = result.row(i);
    const int64_t ord = row.Int();
    SLUICE_ASSIGN_OR_RETURN(RunRecord run, ReadRun(result.row(i, 1), fields));
    runs[ord - 1] = std::move(run);
  }
  return runs;
}

absl::Status PgTables::UpdateRuns(std::span<const RunRecord> runs) {
  if (runs.empty()) return absl::OkStatus();
  ArrayLiteral ids, statuses, errors, finished, outputs, cancels;
  for (size_t i :
       LastWrites(runs, [](const RunRecord& r) { return r.run_id; })) {
    const RunRecord& run = runs[i];
    cancels.Bool(run.cancel_requested);
    ids.RunId(run.run_id);
    statuses.Text(ToString(run.status));
    errors.Text(run.error);
    finished.OptionalTime(run.finished_at);
    outputs.OptionalJson(run.output);
  }
  Send(sql::kUpdateRuns,
       Params()
           .Array(std::move(ids))
           .Array(std::move(statuses))
           .Array(std::move(errors))
           .Array(std::move(finished))
           .Array(std::move(outputs))
           .Array(std::move(cancels)),
       "UpdateRuns");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> PgTables::AddRunRemainingSteps(
    std::span<const RunCounterDelta> deltas) {
  if (deltas.empty()) return std::vector<int>();
  CounterSlots<RunId, 1> slots;
  for (const RunCounterDelta& delta : deltas) {
    slots.Add(delta.run_id, {delta.remaining_steps});
  }
  ArrayLiteral ids, sums;
  for (size_t slot = 0; slot < slots.slots(); ++slot) {
    ids.RunId(slots.key(slot));
    sums.Int(slots.sum(slot)[0]);
  }
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kAddRunRemainingSteps,
            Params().Array(std::move(ids)).Array(std::move(sums)),
            "AddRunRemainingSteps"));
  for (int i = 0; i < result.rows(); ++i) {
    Row row = result.row(i);
    const int64_t slot = row.Int();
    slots.SetFinal(slot - 1, {row.Int()});
  }
  std::optional<size_t> missing;
  auto results = slots.Results(&missing);
  if (missing.has_value()) {
    return absl::NotFoundError(StrCat("AddRunRemainingSteps: run ",
                                      deltas[*missing].run_id.ToString(),
                                      " does not exist"));
  }
  std::vector<int> values;
  values.reserve(results.size());
  for (const auto& value : results) values.push_back(value[0]);
  return values;
}

absl::StatusOr<std::vector<RunRecord>> PgTables::ListRuns(const RunQuery& query,
                                                          Fields fields) {
  std::vector<RunRecord> runs;
  if (query.limit <= 0) return runs;
  Params params;
  if (query.flow_slugs.empty()) {
    params.Null();
  } else {
    ArrayLiteral flows;
    for (const std::string& flow : query.flow_slugs) flows.Text(flow);
    params.Array(std::move(flows));
  }
  if (query.statuses.empty()) {
    params.Null();
  } else {
    ArrayLiteral statuses;
    for (RunStatus status : query.statuses) statuses.Text(ToString(status));
    params.Array(std::move(statuses));
  }
  params.OptionalJson(NullIsAbsent(query.metadata));
  params.OptionalTime(query.from).OptionalTime(query.to);
  if (query.after.has_value()) {
    params.Time(query.after->time).RunId(query.after->run_id);
  } else {
    params.Null().Null();
  }
  params.Int(query.limit);
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::ListRuns(query.order_by, query.newest_first, fields), params,
            "ListRuns"));
  runs.reserve(result.rows());
  for (int i = 0; i < result.rows(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(RunRecord run, ReadRun(result.row(i), fields));
    runs.push_back(std::move(run));
  }
  return runs;
}

absl::StatusOr<std::vector<std::optional<RunRecord>>> PgTables::FindRunsByKey(
    std::string_view flow_slug, std::span<const std::string> external_keys,
    Fields fields) {
  std::vector<std::optional<RunRecord>> runs(external_keys.size());
  if (external_keys.empty()) return runs;
  ArrayLiteral keys;
  for (const std::string& key : external_keys) keys.Text(key);
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kFindRunsByKey.For(fields),
            Params().Text(flow_slug).Array(std::move(keys)), "FindRunsByKey"));
  for (int i = 0; i < result.rows(); ++i) {
    const int64_t ord = result.row(i).Int();
    SLUICE_ASSIGN_OR_RETURN(RunRecord run, ReadRun(result.row(i, 1), fields));
    runs[ord - 1] = std::move(run);
  }
  return runs;
}

absl::StatusOr<std::vector<RunRecord>> PgTables::FindFinishedRuns(
    absl::Time finished_before, int limit) {
  std::vector<RunRecord> runs;
  if (limit <= 0) return runs;
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kFindFinishedRuns, Params().Time(finished_before).Int(limit),
            "FindFinishedRuns"));
  for (int i = 0; i < result.rows(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(RunRecord run,
                            ReadRun(result.row(i), Fields::kNoPayloads));
    runs.push_back(std::move(run));
  }
  return runs;
}

absl::StatusOr<int> PgTables::DeleteRuns(std::span<const RunId> run_ids) {
  constexpr std::string_view kOperation = "DeleteRuns";
  if (run_ids.empty()) return 0;
  ArrayLiteral literal;
  for (const RunId& run_id : run_ids) literal.RunId(run_id);
  const std::string ids = std::move(literal).Take();
  SLUICE_ASSIGN_OR_RETURN(
      Result queues, Query(sql::kQueuesOfRuns, Params().Text(ids), kOperation));
  // Messages first: they are found through the tasks. The runs' child links
  // (as parents) go before their tasks; child reports stay in this, the
  // child's, store until relayed (docs/decisions/0036-fan-out-storage.md).
  for (int i = 0; i < queues.rows(); ++i) {
    const std::string queue = queues.row(i).Text();
    const QueueSql& statements = connection_.StatementsFor(queue);
    Send(statements.delete_run_messages, Params().Text(ids).Text(queue),
         kOperation, queue);
    Send(statements.delete_run_archived, Params().Text(ids).Text(queue),
         kOperation, queue);
  }
  for (std::string_view dependents :
       {sql::kDeleteRunReports, sql::kDeleteRunChildLinks,
        sql::kDeleteRunAttempts, sql::kDeleteRunTasks,
        sql::kDeleteRunStepStates}) {
    Send(dependents, Params().Text(ids), kOperation);
  }
  SLUICE_ASSIGN_OR_RETURN(
      Result deleted, Query(sql::kDeleteRuns, Params().Text(ids), kOperation));
  return static_cast<int>(deleted.affected());
}

// --- Step states -----------------------------------------------------------

absl::Status PgTables::InsertStepStates(
    std::span<const StepStateRecord> states) {
  if (states.empty()) return absl::OkStatus();
  ArrayLiteral ids, steps, slugs, statuses, deps, initial, remaining, errors,
      skip_reasons, started, finished, outputs;
  for (const StepStateRecord& state : states) {
    ids.RunId(state.run_id);
    steps.Int(state.step_index);
    slugs.Text(state.step_slug);
    statuses.Text(ToString(state.status));
    deps.Int(state.remaining_deps);
    initial.OptionalInt(state.initial_tasks);
    remaining.OptionalInt(state.remaining_tasks);
    errors.Text(state.error);
    skip_reasons.Text(ToString(state.skip_reason));
    started.OptionalTime(state.started_at);
    finished.OptionalTime(state.finished_at);
    outputs.OptionalJson(state.output);
  }
  Send(sql::kInsertStepStates,
       Params()
           .Array(std::move(ids))
           .Array(std::move(steps))
           .Array(std::move(slugs))
           .Array(std::move(statuses))
           .Array(std::move(deps))
           .Array(std::move(initial))
           .Array(std::move(remaining))
           .Array(std::move(errors))
           .Array(std::move(skip_reasons))
           .Array(std::move(started))
           .Array(std::move(finished))
           .Array(std::move(outputs)),
       "InsertStepStates");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<StepStateRecord>>>
PgTables::GetStepStates(std::span<const RunId> run_ids, Fields fields) {
  std::vector<std::vector<StepStateRecord>> states(run_ids.size());
  if (run_ids.empty()) return states;
  ArrayLiteral ids;
  for (const RunId& run_id : run_ids) ids.RunId(run_id);
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(sql::kGetStepStates.For(fields),
                           Params().Array(std::move(ids)), "GetStepStates"));
  for (int i = 0; i < result.rows(); ++i) {
    const int64_t ord = result.row(i).Int();
    SLUICE_ASSIGN_OR_RETURN(StepStateRecord state,
                            ReadStepState(result.row(i, 1), fields));
    states[ord - 1].push_back(std::move(state));
  }
  return states;
}

absl::Status PgTables::UpdateStepStates(
    std::span<const StepStateRecord> states) {
  if (states.empty()) return absl::OkStatus();
  ArrayLiteral ids, steps, statuses, initial, errors, skip_reasons, started,
      finished, outputs;
  for (size_t i : LastWrites(states, [](const StepStateRecord& s) {
         return std::make_pair(s.run_id, s.step_index);
       })) {
    const StepStateRecord& state = states[i];
    ids.RunId(state.run_id);
    steps.Int(state.step_index);
    statuses.Text(ToString(state.status));
    initial.OptionalInt(state.initial_tasks);
    errors.Text(state.error);
    skip_reasons.Text(ToString(state.skip_reason));
    started.OptionalTime(state.started_at);
    finished.OptionalTime(state.finished_at);
    outputs.OptionalJson(state.output);
  }
  Send(sql::kUpdateStepStates,
       Params()
           .Array(std::move(ids))
           .Array(std::move(steps))
           .Array(std::move(statuses))
           .Array(std::move(initial))
           .Array(std::move(errors))
           .Array(std::move(skip_reasons))
           .Array(std::move(started))
           .Array(std::move(finished))
           .Array(std::move(outputs)),
       "UpdateStepStates");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StepCounters>> PgTables::AddStepCounters(
    std::span<const StepCounterDelta> deltas) {
  if (deltas.empty()) return std::vector<StepCounters>();
  CounterSlots<std::pair<RunId, int>, 2> slots;
  for (const StepCounterDelta& delta : deltas) {
    slots.Add({delta.step.run_id, delta.step.step_index},
              {delta.remaining_tasks, delta.remaining_deps});
  }
  ArrayLiteral ids, steps, tasks, deps;
  for (size_t slot = 0; slot < slots.slots(); ++slot) {
    ids.RunId(slots.key(slot).first);
    steps.Int(slots.key(slot).second);
    tasks.Int(slots.sum(slot)[0]);
    deps.Int(slots.sum(slot)[1]);
  }
  SLUICE_ASSIGN_OR_RETURN(Result result, Query(sql::kAddStepCounters,
                                               Params()
                                                   .Array(std::move(ids))
                                                   .Array(std::move(steps))
                                                   .Array(std::move(tasks))
                                                   .Array(std::move(deps)),
                                               "AddStepCounters"));
  for (int i = 0; i < result.rows(); ++i) {
    Row row = result.row(i);
    const int64_t slot = row.Int();
    const int64_t remaining_tasks = row.Int();
    slots.SetFinal(slot - 1, {remaining_tasks, row.Int()});
  }
  std::optional<size_t> missing;
  auto results = slots.Results(&missing);
  if (missing.has_value()) {
    const StepRef& step = deltas[*missing].step;
    return absl::NotFoundError(
        StrCat("AddStepCounters: ", StepName(step.run_id, step.step_index),
               " does not exist"));
  }
  std::vector<StepCounters> values;
  values.reserve(results.size());
  for (const auto& value : results) {
    values.push_back(StepCounters{value[0], value[1]});
  }
  return values;
}

}  // namespace sluice::postgres_internal
