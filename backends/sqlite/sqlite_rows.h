// How records become rows and rows become records.
//
// Each record type has a column list and a reader that expects exactly those
// columns, in that order, from `first` on (batch reads put the bound row's
// key in column 0):
//
//   constexpr auto kGetFlow = JoinSql("SELECT ", kFlowColumns,
//                                     " FROM flows WHERE slug = ?1");
//   ...
//   SLUICE_ASSIGN_OR_RETURN(FlowRecord flow, ReadFlow(get));
//
// Records with JSON payloads have two lists: k<Record>StateColumns without
// the payloads and k<Record>Columns with them at the end, so a kNoPayloads
// read never even fetches them. Their readers take the Fields the statement
// was chosen for.
//
// Encoding: JSON is TEXT (absent is NULL, JSON null is the text 'null'),
// times are INTEGER microseconds since the Unix epoch, run ids are their
// canonical 36-character text, enums are their ToString() names. A run,
// step state, task, report or message value that does not decode is noted
// in the record's `unreadable` text and the read goes on (sluice/records.h);
// a flow definition that does not decode is kInternal ("corrupt").
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_ROWS_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_ROWS_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/backend.h"
#include "sluice/ids.h"
#include "sluice/json.h"
#include "sluice/records.h"
#include "sqlite_bound_rows.h"
#include "sqlite_statement.h"

namespace sluice::sqlite_internal {

// Binds the run id's canonical text (formatted without allocating: run ids
// are bound several times per job).
void BindRunId(Statement& statement, int index, const RunId& run_id);
void BindJson(Statement& statement, int index, const Json& value);
void BindOptionalJson(Statement& statement, int index,
                      const std::optional<Json>& value);

// The same encodings as cells of bound rows.
void AddRunId(BoundRows& rows, const RunId& run_id);
void AddJson(BoundRows& rows, const Json& value);
void AddOptionalJson(BoundRows& rows, const std::optional<Json>& value);
// JSON that is null when unset (metadata, options): NULL for JSON null.
void AddNullableJson(BoundRows& rows, const Json& value);
void BindNullableJson(Statement& statement, int index, const Json& value);

inline constexpr char kFlowColumns[] =
    "slug, definition, created_at, alias, generation";
absl::StatusOr<FlowRecord> ReadFlow(const Statement& row);

inline constexpr char kAliasColumns[] = "alias, active_slug, updated_at";
AliasRecord ReadAlias(const Statement& row);

inline constexpr char kQueueColumns[] = "name, owner_flow, created_at, paused";
QueueRecord ReadQueue(const Statement& row);

inline constexpr char kRunStateColumns[] =
    "run_id, flow_slug, status, remaining_steps, error, started_at, "
    "finished_at, priority, external_key, cancel_requested, metadata, "
    "options";
inline constexpr auto kRunColumns =
    JoinSql(kRunStateColumns, ", input, output");
// Reads kRunColumns, or only kRunStateColumns for kNoPayloads.
absl::StatusOr<RunRecord> ReadRun(const Statement& row, Fields fields,
                                  int first = 0);

inline constexpr char kStepStateStateColumns[] =
    "run_id, step_index, step_slug, status, remaining_deps, initial_tasks, "
    "remaining_tasks, error, skip_reason, started_at, finished_at";
inline constexpr auto kStepStateColumns =
    JoinSql(kStepStateStateColumns, ", output");
// Reads kStepStateColumns, or only kStepStateStateColumns for kNoPayloads.
absl::StatusOr<StepStateRecord> ReadStepState(const Statement& row,
                                              Fields fields, int first = 0);

inline constexpr char kTaskStateColumns[] =
    "run_id, step_index, task_index, flow_slug, status, attempts, error, "
    "queue_name, message_id, queued_at, started_at, finished_at, stall_at, "
    "requeued_count, worker_id, budget_start, cancel_requested, options";
inline constexpr auto kTaskColumns =
    JoinSql(kTaskStateColumns, ", input, output");
// Reads kTaskColumns, or only kTaskStateColumns for kNoPayloads.
absl::StatusOr<TaskRecord> ReadTask(const Statement& row, Fields fields,
                                    int first = 0);

inline constexpr char kReportColumns[] =
    "report_id, run_id, step_index, task_index, flow_slug, kind, created_at";
absl::StatusOr<OutboxReport> ReadReport(const Statement& row);

// Fan-out: sqlite_sql_children.h's kChildLinkColumns (kChildLinkStateColumns
// for kNoPayloads) and kChildReportColumns, from `first` on.
ChildLinkRecord ReadChildLink(const Statement& row, Fields fields,
                              int first = 0);
ChildReport ReadChildReport(const Statement& row);

inline constexpr char kMessageStateColumns[] =
    "message_id, read_count, enqueued_at, visible_at, priority";
inline constexpr auto kMessageColumns = JoinSql(kMessageStateColumns, ", body");
// Reads kMessageColumns, or only kMessageStateColumns for kNoPayloads.
absl::StatusOr<MessageRecord> ReadMessage(const Statement& row, Fields fields,
                                          int first = 0);

inline constexpr char kAttemptColumns[] =
    "run_id, step_index, task_index, attempt, worker_id, started_at, "
    "finished_at, outcome, error";
AttemptRecord ReadAttempt(const Statement& row);

inline constexpr char kDedupeColumns[] = "flow_slug, key, run_id, expires_at";
// A run id that does not decode reads as the nil id (no run has it), so the
// entry holds nothing.
DedupeRecord ReadDedupe(const Statement& row);

inline constexpr char kWorkerColumns[] =
    "worker_id, queue_name, flow_slug, started_at, last_heartbeat_at, "
    "stopped_at, served";
// A served list that does not decode reads as empty: the worker serves
// nothing anyone can tell (WorkerRecord has no `unreadable` to note it in).
WorkerRecord ReadWorker(const Statement& row);
// The steps a worker serves as stored: JSON
// [{"flow": "<slug>", "steps": ["<step>", ...]}, ...]; NULL for none.
void BindServed(Statement& statement, int index,
                const std::vector<ServedSteps>& served);

// Puts a step's outputs, read with their task indexes (`task_indexes`, one
// each, in the same order), in task order. They almost always come in it.
void SortByTaskIndex(const std::vector<int32_t>& task_indexes,
                     std::vector<std::optional<Json>>& outputs);

}  // namespace sluice::sqlite_internal

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_ROWS_H_
