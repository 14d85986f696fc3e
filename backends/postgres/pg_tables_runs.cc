// Runs, step states and retention.
#include <array>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "pg_batches.h"
#include "pg_rows.h"
#include "pg_sql.h"
#include "pg_sql_children.h"
#include "pg_sql_tasks.h"
#include "pg_tables.h"
#include "pg_update_columns.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

// Rows of kGetRuns (ord, then a run's columns) into `runs`, by ord.
absl::Status ReadRunsByOrd(const Result& result, Fields fields,
                           std::vector<std::optional<RunRecord>>& runs) {
  for (int i = 0; i < result.rows(); ++i) {
    const int64_t ord = result.row(i).Int();
    SLUICE_ASSIGN_OR_RETURN(RunRecord run, ReadRun(result.row(i, 1), fields));
    runs[ord - 1] = std::move(run);
  }
  return absl::OkStatus();
}

// Rows of kGetStepStates (ord, then a step state's columns), by ord.
absl::Status ReadStepStatesByOrd(
    const Result& result, Fields fields,
    std::vector<std::vector<StepStateRecord>>& states) {
  for (int i = 0; i < result.rows(); ++i) {
    const int64_t ord = result.row(i).Int();
    SLUICE_ASSIGN_OR_RETURN(StepStateRecord state,
                            ReadStepState(result.row(i, 1), fields));
    states[ord - 1].push_back(std::move(state));
  }
  return absl::OkStatus();
}

}  // namespace

// --- Runs -----------------------------------------------------------------

namespace sql {

namespace {

// How many of a filter's values there are: one is an equality, which lets
// an index that leads with the column yield rows in the listing's order.
int Arity(size_t count) { return count == 0 ? 0 : count == 1 ? 1 : 2; }

// The shape of a query: which filters are present and how the list is
// ordered. Each shape has its own statement, so its plan is made for the
// filters it has.
int ShapeOf(const RunQuery& query, Fields fields) {
  int shape = Arity(query.flow_slugs.size());
  shape = shape * 3 + Arity(query.statuses.size());
  for (bool bit :
       {NullIsAbsent(query.metadata).has_value(), query.from.has_value(),
        query.to.has_value(), query.after.has_value(),
        query.order_by == RunQuery::OrderBy::kFinishedAt, query.newest_first,
        fields == Fields::kAll}) {
    shape = shape * 2 + (bit ? 1 : 0);
  }
  return shape;
}

// Start order walks runs_by_flow_status_start (migration 0018, decision
// 0081), which holds each flow's runs of each status in start order. So a
// listing by start walks it once per (flow, status) pair it covers, each
// walk stopped at the limit, and the page is the first `limit` of those
// rows. Statuses branch within a flow: a branch per status, gated by the
// array when several are asked for, so one not asked for costs nothing.
// Flows other than one named are joined laterally: those named, or every
// flow that has runs, found by a skip scan of the index (one probe per
// flow). Each branch carries its own order and limit: a generic plan
// guesses a tenth of the table for a limit it cannot see, and then sorts
// every run rather than stop each walk at the limit. Finish order walks
// runs_by_flow_finish the same way, once per flow (migration 0021, decision
// 0091); that index has no status, so statuses are a condition of each walk.
bool BranchesPerStatus(const RunQuery& query) {
  return query.order_by == RunQuery::OrderBy::kStartedAt &&
         query.statuses.size() != 1;
}
bool BranchesPerFlow(const RunQuery& query) {
  return query.flow_slugs.size() != 1;
}

constexpr std::array<RunStatus, 4> kEveryRunStatus{
    RunStatus::kStarted, RunStatus::kCompleted, RunStatus::kFailed,
    RunStatus::kCancelled};

// One walk per status, each with `conditions`, yielding `columns`: a UNION
// ALL of branches, or a single branch when `per_status` is false (the status
// is a condition).
std::string Branches(bool per_status, std::string_view columns,
                     const std::vector<std::string>& conditions,
                     const std::string& statuses_param,
                     const std::string& order_and_limit) {
  const auto branch = [&](const std::vector<std::string>& where) {
    return StrCat("(SELECT ", columns, " FROM sluice.runs AS r WHERE ",
                  absl::StrJoin(where, " AND "), order_and_limit, ")");
  };
  if (!per_status) return branch(conditions);
  std::vector<std::string> branches;
  for (RunStatus status : kEveryRunStatus) {
    std::vector<std::string> where{
        StrCat("r.status = '", ToString(status), "'")};
    if (!statuses_param.empty()) {
      where.push_back(StrCat("'", ToString(status), "' = ANY(", statuses_param,
                             "::text[])"));
    }
    where.insert(where.end(), conditions.begin(), conditions.end());
    branches.push_back(branch(where));
  }
  return absl::StrJoin(branches, " UNION ALL ");
}

// The flows a listing's walks are joined to: each of `flows_param` (an
// array), or every flow with runs (kFlowsWithRuns) when it is empty.
std::string Flows(const std::string& flows_param) {
  if (flows_param.empty()) return "flows AS f";
  return StrCat("(SELECT DISTINCT u.flow_slug FROM unnest(", flows_param,
                "::text[]) AS u(flow_slug)) AS f");
}

// A listing's filters as SQL: the conditions each run meets, the arrays
// that choose branches instead, and the order with its limit.
struct Filters {
  std::vector<std::string> conditions;
  std::string flows_param;     // per-flow branches: the flows named, if any
  std::string statuses_param;  // per-status branches: the statuses asked for
  std::string order_and_limit;
};

// Parameters are numbered densely in the order ListRuns (pg_sql.h) gives.
Filters FiltersOf(const RunQuery& query, bool per_flow, bool per_status,
                  const std::string& time) {
  Filters f;
  int next = 0;
  auto param = [&next] { return StrCat("$", ++next); };
  if (query.order_by == RunQuery::OrderBy::kFinishedAt) {
    f.conditions.emplace_back("r.finished_at IS NOT NULL");
  }
  // One flow and one status are equalities, so an index that leads with
  // them yields rows in order; ANY over several cannot (before Postgres
  // 17), so a listing branches instead: per flow, and by start per status.
  if (query.flow_slugs.size() == 1) {
    f.conditions.push_back(StrCat("r.flow_slug = ", param(), "::text"));
  } else if (per_flow) {
    if (!query.flow_slugs.empty()) f.flows_param = param();
    f.conditions.emplace_back("r.flow_slug = f.flow_slug");
  } else if (!query.flow_slugs.empty()) {
    f.conditions.push_back(StrCat("r.flow_slug = ANY(", param(), "::text[])"));
  }
  if (query.statuses.size() == 1) {
    f.conditions.push_back(StrCat("r.status = ", param(), "::text"));
  } else if (!query.statuses.empty() && per_status) {
    f.statuses_param = param();
  } else if (!query.statuses.empty()) {
    f.conditions.push_back(StrCat("r.status = ANY(", param(), "::text[])"));
  }
  if (NullIsAbsent(query.metadata).has_value()) {
    f.conditions.push_back(StrCat("r.metadata::jsonb @> ", param(), "::jsonb"));
  }
  if (query.from.has_value()) {
    f.conditions.push_back(StrCat(time, " >= ", param(), "::timestamptz"));
  }
  if (query.to.has_value()) {
    f.conditions.push_back(StrCat(time, " < ", param(), "::timestamptz"));
  }
  if (query.after.has_value()) {
    const std::string at = param();
    f.conditions.push_back(StrCat("(", time, ", r.run_id) ",
                                  query.newest_first ? "<" : ">", " (", at,
                                  "::timestamptz, ", param(), "::uuid)"));
  }
  const std::string direction = query.newest_first ? " DESC" : "";
  f.order_and_limit = StrCat(" ORDER BY ", time, direction, ", r.run_id",
                             direction, " LIMIT ", param());
  return f;
}

// What a listing selects from: the runs meeting `f`, or its branches.
std::string RunsSource(const Filters& f, bool per_flow, bool per_status,
                       const std::string& time) {
  if (per_flow) {
    // The walks read only the index (time and run id, unless a condition
    // needs the row), and the page's runs are looked up by their keys after:
    // a store of many flows reads `limit` runs, not `limit` per walk.
    // `= ANY(ARRAY(...))` keeps the lookup an index condition (a generic plan
    // guesses too many keys and would hash-join a scan of every run).
    return StrCat("sluice.runs AS r WHERE r.run_id = ANY(ARRAY(SELECT ",
                  "r.run_id FROM ", Flows(f.flows_param),
                  " CROSS JOIN LATERAL (",
                  Branches(per_status, StrCat("r.run_id, ", time), f.conditions,
                           f.statuses_param, f.order_and_limit),
                  ") AS r", f.order_and_limit, "))");
  }
  if (per_status) {
    return StrCat("(",
                  Branches(per_status, "*", f.conditions, f.statuses_param,
                           f.order_and_limit),
                  ") AS r");
  }
  if (f.conditions.empty()) return "sluice.runs AS r";
  return StrCat("sluice.runs AS r WHERE ",
                absl::StrJoin(f.conditions, " AND "));
}

std::string BuildListRuns(const RunQuery& query, Fields fields) {
  const bool per_status = BranchesPerStatus(query);
  const bool per_flow = BranchesPerFlow(query);
  const std::string time = query.order_by == RunQuery::OrderBy::kFinishedAt
                               ? "r.finished_at"
                               : "r.started_at";
  const Filters f = FiltersOf(query, per_flow, per_status, time);
  // A branched listing is planned once per connection: planning its
  // branches for every page cost more than reading it, and each branch
  // walks its index whatever the parameters.
  return StrCat(
      per_status || per_flow ? kGenericPlan : "",
      per_flow && f.flows_param.empty() ? kFlowsWithRuns : "", "SELECT ",
      fields == Fields::kAll ? kRunAll.view() : std::string_view(kRunState),
      " FROM ", RunsSource(f, per_flow, per_status, time), f.order_and_limit);
}

}  // namespace

const std::string& ListRuns(const RunQuery& query, Fields fields) {
  static absl::Mutex mutex;
  static auto* statements = new absl::node_hash_map<int, std::string>();
  const int shape = ShapeOf(query, fields);
  absl::MutexLock lock(&mutex);
  auto it = statements->find(shape);
  if (it == statements->end()) {
    it = statements->emplace(shape, BuildListRuns(query, fields)).first;
  }
  return it->second;
}

}  // namespace sql

absl::Status PgTables::InsertRuns(std::span<const RunRecord> runs,
                                  std::span<const Json* const> run_inputs) {
  if (runs.empty()) return absl::OkStatus();
  for (const RunRecord& run : runs) runs_inserted_.insert(run.run_id);
  using enum ElementType;  // each as kInsertRuns casts it
  ArrayLiteral ids(kUuid), flows(kText), statuses(kText), remaining(kInt4),
      errors(kText), started(kTimestamptz), finished(kTimestamptz),
      inputs(kJson), outputs(kJson), priorities(kInt4), keys(kText),
      metadata(kJson), options(kJson), cancels(kBool);
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunRecord& run = runs[i];
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
    inputs.Json(RunInputToStore(run, run_inputs, i));
    outputs.OptionalJson(run.output);
  }
  Send(ForRows(sql::kInsertRuns, runs.size()),
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

namespace {

std::string_view GetRunsSql(LockMode lock, Fields fields) {
  const sql::ByFields& query = lock == LockMode::kForUpdate ? sql::kLockRuns
                               : lock == LockMode::kSkipLocked
                                   ? sql::kTryLockRuns
                                   : sql::kGetRuns;
  return query.For(fields);
}

}  // namespace

absl::StatusOr<std::vector<std::optional<RunRecord>>> PgTables::GetRuns(
    std::span<const RunId> run_ids, LockMode lock, Fields fields) {
  std::vector<std::optional<RunRecord>> runs(run_ids.size());
  if (run_ids.empty()) return runs;
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(GetRunsSql(lock, fields),
                           Params().Array(RunIdArray(run_ids)), "GetRuns"));
  SLUICE_RETURN_IF_ERROR(ReadRunsByOrd(result, fields, runs));
  return runs;
}

absl::StatusOr<internal::RunsWithSteps> PgTables::ReadRunsWithSteps(
    std::span<const RunId> run_ids, LockMode lock, Fields fields,
    const Lead* lead) {
  internal::RunsWithSteps read;
  read.runs.resize(run_ids.size());
  read.steps.resize(run_ids.size());
  if (run_ids.empty()) {
    if (lead == nullptr) return read;
    SLUICE_ASSIGN_OR_RETURN(
        *lead->result,
        connection_.Query(lead->statement.sql, lead->statement.params,
                          lead->statement.context));
    return read;
  }
  const Params ids = Params().Array(RunIdArray(run_ids));
  // In one pipeline the statements run in order, so the step states are
  // read once the runs' locks are held.
  std::vector<Connection::Statement> statements;
  if (lead != nullptr) statements.push_back(lead->statement);
  statements.push_back({GetRunsSql(lock, fields), ids, {"GetRuns", ""}});
  statements.push_back(
      {sql::kGetStepStates.For(fields), ids, {"GetStepStates", ""}});
  SLUICE_ASSIGN_OR_RETURN(std::vector<Result> results,
                          connection_.QueryAll(statements));
  const size_t first = lead != nullptr ? 1 : 0;
  if (lead != nullptr) *lead->result = std::move(results[0]);
  SLUICE_RETURN_IF_ERROR(ReadRunsByOrd(results[first], fields, read.runs));
  SLUICE_RETURN_IF_ERROR(
      ReadStepStatesByOrd(results[first + 1], fields, read.steps));
  return read;
}

absl::Status PgTables::UpdateRuns(std::span<const RunRecord> runs) {
  if (runs.empty()) return absl::OkStatus();
  RunUpdateColumns columns;
  for (size_t i :
       LastWrites(runs, [](const RunRecord& r) { return r.run_id; })) {
    columns.Add(runs[i]);
  }
  Send(sql::kUpdateRuns, std::move(columns).Take(), "UpdateRuns");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RunRecord>> PgTables::ListRuns(const RunQuery& query,
                                                          Fields fields) {
  std::vector<RunRecord> runs;
  if (query.limit <= 0) return runs;
  // Only the filters present, in the order BuildListRuns numbers them.
  Params params;
  if (query.flow_slugs.size() == 1) {
    params.Text(query.flow_slugs[0]);
  } else if (!query.flow_slugs.empty()) {
    ArrayLiteral flows;
    for (const std::string& flow : query.flow_slugs) flows.Text(flow);
    params.Array(std::move(flows));
  }
  if (query.statuses.size() == 1) {
    params.Text(ToString(query.statuses[0]));
  } else if (!query.statuses.empty()) {
    ArrayLiteral statuses;
    for (RunStatus status : query.statuses) statuses.Text(ToString(status));
    params.Array(std::move(statuses));
  }
  if (NullIsAbsent(query.metadata).has_value()) {
    params.OptionalJson(NullIsAbsent(query.metadata));
  }
  if (query.from.has_value()) params.Time(*query.from);
  if (query.to.has_value()) params.Time(*query.to);
  if (query.after.has_value()) {
    params.Time(query.after->time).RunId(query.after->run_id);
  }
  params.Int(query.limit);
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(sql::ListRuns(query, fields), params, "ListRuns"));
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
  for (const RunId& run_id : run_ids) runs_inserted_.erase(run_id);
  // One text literal, bound as text to each statement below.
  ArrayLiteral literal;
  for (const RunId& run_id : run_ids) literal.RunId(run_id);
  const std::string ids = std::move(literal).Take();
  Send(sql::kLockRunsToDelete, Params().Text(ids), kOperation);
  SLUICE_ASSIGN_OR_RETURN(
      Result queues, Query(sql::kQueuesOfRuns, Params().Text(ids), kOperation));
  // Messages first: they are found through the tasks. The runs' child links
  // (as parents) go before their tasks; child reports stay in this, the
  // child's, store until relayed (docs/decisions/0036-fan-out-storage.md).
  // Tasks go before attempts: a worker appends an attempt only after its
  // compare-and-set on the task, so once the task delete has waited for
  // such a worker, the attempt delete sees its row.
  for (int i = 0; i < queues.rows(); ++i) {
    const std::string queue = queues.row(i).Text();
    const QueueSql& statements = connection_.StatementsFor(queue);
    Send(statements.delete_run_messages, Params().Text(ids).Text(queue),
         kOperation, queue);
    Send(statements.delete_run_archived, Params().Text(ids).Text(queue),
         kOperation, queue);
  }
  for (std::string_view dependents :
       {sql::kDeleteRunReports, sql::kDeleteRunChildLinks, sql::kDeleteRunTasks,
        sql::kDeleteRunAttempts, sql::kDeleteRunStepStates}) {
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
  using enum ElementType;  // each as kInsertStepStates casts it
  ArrayLiteral ids(kUuid), steps(kInt4), slugs(kText), statuses(kText),
      deps(kInt4), initial(kInt4), remaining(kInt4), errors(kText),
      skip_reasons(kText), started(kTimestamptz), finished(kTimestamptz),
      outputs(kJson);
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
  Send(ForRows(sql::kInsertStepStates.For(InsertedHere(states)), states.size()),
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
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(sql::kGetStepStates.For(fields),
            Params().Array(RunIdArray(run_ids)), "GetStepStates"));
  SLUICE_RETURN_IF_ERROR(ReadStepStatesByOrd(result, fields, states));
  return states;
}

absl::StatusOr<std::optional<internal::RunWithParts>>
PgTables::ReadRunWithParts(const RunId& run_id) {
  const Params one_run = Params().Array(RunIdArray(std::span(&run_id, 1)));
  const Params by_run = Params().RunId(run_id);
  const Connection::Statement statements[] = {
      {sql::kGetRuns.For(Fields::kAll), one_run, {"GetRuns", ""}},
      {sql::kGetStepStates.For(Fields::kAll), one_run, {"GetStepStates", ""}},
      {sql::kListTasks, by_run, {"ListTasks", ""}},
      {sql::kListAttempts, by_run, {"ListAttempts", ""}},
  };
  SLUICE_ASSIGN_OR_RETURN(std::vector<Result> results,
                          connection_.QueryAll(statements));
  std::vector<std::optional<RunRecord>> runs(1);
  SLUICE_RETURN_IF_ERROR(ReadRunsByOrd(results[0], Fields::kAll, runs));
  if (!runs[0]) return std::nullopt;
  internal::RunWithParts parts;
  parts.run = *std::move(runs[0]);
  std::vector<std::vector<StepStateRecord>> states(1);
  SLUICE_RETURN_IF_ERROR(ReadStepStatesByOrd(results[1], Fields::kAll, states));
  parts.steps = std::move(states[0]);
  SLUICE_ASSIGN_OR_RETURN(parts.tasks, ReadTasks(results[2], Fields::kAll));
  SLUICE_ASSIGN_OR_RETURN(parts.attempts, ReadAttempts(results[3]));
  return parts;
}

absl::Status PgTables::UpdateStepStates(
    std::span<const StepStateRecord> states) {
  if (states.empty()) return absl::OkStatus();
  StepStateUpdateColumns columns;
  for (size_t i : LastWrites(states, [](const StepStateRecord& s) {
         return std::make_pair(s.run_id, s.step_index);
       })) {
    columns.Add(states[i]);
  }
  Send(sql::kUpdateStepStates, std::move(columns).Take(), "UpdateStepStates");
  return absl::OkStatus();
}

}  // namespace sluice::postgres_internal
