// How records become rows and rows become records.
//
// Each record type has a column list and a reader that expects exactly those
// columns, in that order, at the start of a row:
//
//   constexpr auto kGetRun = JoinSql("SELECT ", kRunColumns,
//                                    " FROM runs WHERE run_id = ?1");
//   ...
//   SLUICE_ASSIGN_OR_RETURN(RunRecord run, ReadRun(get));
//
// Encoding: JSON is TEXT (absent is NULL, JSON null is the text 'null'),
// times are INTEGER microseconds since the Unix epoch, run ids are their
// canonical 36-character text, enums are their ToString() names. Stored data
// that does not decode is reported as kInternal ("corrupt").
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_ROWS_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_ROWS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "sluice/backend.h"
#include "sluice/ids.h"
#include "sluice/json.h"
#include "sluice/records.h"
#include "sqlite_statement.h"

namespace sluice::sqlite_internal {

// Binds the run id's canonical text (formatted without allocating: run ids
// are bound several times per job).
void BindRunId(Statement& statement, int index, const RunId& run_id);
void BindJson(Statement& statement, int index, const Json& value);
// Binds `ids` as a JSON array, for sql::kIdList.
void BindIdList(Statement& statement, int index, std::span<const int64_t> ids);
void BindOptionalJson(Statement& statement, int index,
                      const std::optional<Json>& value);

// Parses stored JSON. Stored data was validated on the way in, so there is no
// size or depth limit; `what` names the value in the corruption error.
absl::StatusOr<Json> ParseStoredJson(std::string_view text,
                                     std::string_view what);
absl::StatusOr<RunId> ParseStoredRunId(std::string_view text);

inline constexpr char kFlowColumns[] = "slug, definition, created_at";
absl::StatusOr<FlowRecord> ReadFlow(const Statement& row);

inline constexpr char kQueueColumns[] = "name, owner_flow, created_at";
QueueRecord ReadQueue(const Statement& row);

inline constexpr char kRunColumns[] =
    "run_id, flow_slug, status, input, output, remaining_steps, error, "
    "started_at, finished_at";
absl::StatusOr<RunRecord> ReadRun(const Statement& row);

inline constexpr char kStepStateColumns[] =
    "run_id, step_index, step_slug, status, remaining_deps, initial_tasks, "
    "remaining_tasks, output, error, skip_reason, started_at, finished_at";
absl::StatusOr<StepStateRecord> ReadStepState(const Statement& row);

// A task's state without its payloads; kTaskColumns adds input and output.
inline constexpr char kTaskStateColumns[] =
    "run_id, step_index, task_index, flow_slug, status, attempts, error, "
    "queue_name, message_id, queued_at, started_at, finished_at, stall_at, "
    "requeued_count, worker_id";
inline constexpr auto kTaskColumns =
    JoinSql(kTaskStateColumns, ", input, output");
// Reads kTaskColumns, or only kTaskStateColumns for kNoPayloads.
absl::StatusOr<TaskRecord> ReadTask(const Statement& row, TaskFields fields);

inline constexpr char kReportColumns[] =
    "report_id, run_id, step_index, task_index, flow_slug, kind, created_at";
absl::StatusOr<OutboxReport> ReadReport(const Statement& row);

inline constexpr char kMessageColumns[] =
    "message_id, read_count, enqueued_at, visible_at, body";
absl::StatusOr<MessageRecord> ReadMessage(const Statement& row);

inline constexpr char kWorkerColumns[] =
    "worker_id, queue_name, flow_slug, started_at, last_heartbeat_at, "
    "stopped_at";
WorkerRecord ReadWorker(const Statement& row);

}  // namespace sluice::sqlite_internal

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_ROWS_H_
