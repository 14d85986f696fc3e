#include "sqlite_rows.h"

#include <limits>
#include <string>

#include "boost/json/parse.hpp"
#include "sluice/internal/json_text.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_status.h"

namespace sluice::sqlite_internal {
namespace {

absl::StatusOr<std::optional<Json>> ReadOptionalJson(const Statement& row,
                                                     int column,
                                                     std::string_view what) {
  if (row.IsNull(column)) return std::nullopt;
  SLUICE_ASSIGN_OR_RETURN(Json value, ParseStoredJson(row.Text(column), what));
  return value;
}

absl::StatusOr<TaskKey> ReadTaskKey(const Statement& row, int first_column) {
  SLUICE_ASSIGN_OR_RETURN(RunId run_id,
                          ParseStoredRunId(row.Text(first_column)));
  return TaskKey{run_id, static_cast<int>(row.Int(first_column + 1)),
                 static_cast<int>(row.Int(first_column + 2))};
}

// The canonical 8-4-4-4-12 text of `run_id`, without allocating.
std::string_view FormatRunId(const RunId& run_id, char (&text)[36]) {
  static constexpr char kHex[] = "0123456789abcdef";
  int position = 0;
  auto append_hex = [&](uint64_t word, int first_nibble, int nibbles) {
    for (int i = first_nibble; i < first_nibble + nibbles; ++i) {
      text[position++] = kHex[(word >> (60 - 4 * i)) & 0xF];
    }
  };
  auto append_dash = [&] { text[position++] = '-'; };
  append_hex(run_id.high(), 0, 8);
  append_dash();
  append_hex(run_id.high(), 8, 4);
  append_dash();
  append_hex(run_id.high(), 12, 4);
  append_dash();
  append_hex(run_id.low(), 0, 4);
  append_dash();
  append_hex(run_id.low(), 4, 12);
  return std::string_view(text, sizeof(text));
}

}  // namespace

void BindRunId(Statement& statement, int index, const RunId& run_id) {
  char text[36];
  statement.BindText(index, FormatRunId(run_id, text));
}

void BindJson(Statement& statement, int index, const Json& value) {
  statement.BindText(index, SerializeJson(value));
}

void BindOptionalJson(Statement& statement, int index,
                      const std::optional<Json>& value) {
  if (value.has_value()) {
    BindJson(statement, index, *value);
  } else {
    statement.BindNull(index);
  }
}

void AddRunId(BoundRows& rows, const RunId& run_id) {
  char text[36];
  rows.AddText(FormatRunId(run_id, text));
}

void AddJson(BoundRows& rows, const Json& value) {
  rows.AddText(SerializeJson(value));
}

void AddOptionalJson(BoundRows& rows, const std::optional<Json>& value) {
  if (value.has_value()) {
    AddJson(rows, *value);
  } else {
    rows.AddNull();
  }
}

absl::StatusOr<Json> ParseStoredJson(std::string_view text,
                                     std::string_view what) {
  // Read leniently: rows written before the payload checks may hold wide
  // integers; they read as doubles, as they did then.
  absl::StatusOr<Json> parsed = sluice::internal::ParseJsonText(
      text, "its text",
      {.max_depth = std::numeric_limits<std::size_t>::max(),
       .refuse_wide_integers = false});
  if (!parsed.ok()) {
    return absl::InternalError(
        StrCat("stored ", what, " is corrupt: ", parsed.status().message()));
  }
  return parsed;
}

absl::StatusOr<RunId> ParseStoredRunId(std::string_view text) {
  absl::StatusOr<RunId> run_id = RunId::Parse(text);
  if (!run_id.ok()) {
    return absl::InternalError(
        StrCat("stored run id is corrupt: ", run_id.status().message()));
  }
  return run_id;
}

absl::StatusOr<FlowRecord> ReadFlow(const Statement& row) {
  FlowRecord flow;
  flow.slug = row.Text(0);
  SLUICE_ASSIGN_OR_RETURN(flow.definition,
                          ParseStoredJson(row.Text(1), "flow definition"));
  flow.created_at = row.Time(2);
  return flow;
}

QueueRecord ReadQueue(const Statement& row) {
  return QueueRecord{std::string(row.Text(0)), std::string(row.Text(1)),
                     row.Time(2)};
}

absl::StatusOr<RunRecord> ReadRun(const Statement& row, Fields fields,
                                  int first) {
  int c = first;
  RunRecord run;
  SLUICE_ASSIGN_OR_RETURN(run.run_id, ParseStoredRunId(row.Text(c++)));
  run.flow_slug = row.Text(c++);
  SLUICE_ASSIGN_OR_RETURN(run.status, ParseRunStatus(row.Text(c++)));
  run.remaining_steps = static_cast<int>(row.Int(c++));
  run.error = row.Text(c++);
  run.started_at = row.Time(c++);
  run.finished_at = row.OptionalTime(c++);
  if (fields == Fields::kAll) {
    SLUICE_ASSIGN_OR_RETURN(run.input,
                            ParseStoredJson(row.Text(c++), "run input"));
    SLUICE_ASSIGN_OR_RETURN(run.output,
                            ReadOptionalJson(row, c++, "run output"));
  }
  return run;
}

absl::StatusOr<StepStateRecord> ReadStepState(const Statement& row,
                                              Fields fields, int first) {
  int c = first;
  StepStateRecord state;
  SLUICE_ASSIGN_OR_RETURN(state.run_id, ParseStoredRunId(row.Text(c++)));
  state.step_index = static_cast<int>(row.Int(c++));
  state.step_slug = row.Text(c++);
  SLUICE_ASSIGN_OR_RETURN(state.status, ParseStepStatus(row.Text(c++)));
  state.remaining_deps = static_cast<int>(row.Int(c++));
  state.initial_tasks = row.OptionalInt(c++);
  state.remaining_tasks = row.OptionalInt(c++);
  state.error = row.Text(c++);
  SLUICE_ASSIGN_OR_RETURN(state.skip_reason, ParseSkipReason(row.Text(c++)));
  state.started_at = row.OptionalTime(c++);
  state.finished_at = row.OptionalTime(c++);
  if (fields == Fields::kAll) {
    SLUICE_ASSIGN_OR_RETURN(state.output,
                            ReadOptionalJson(row, c++, "step output"));
  }
  return state;
}

absl::StatusOr<TaskRecord> ReadTask(const Statement& row, Fields fields,
                                    int first) {
  int c = first;
  TaskRecord task;
  SLUICE_ASSIGN_OR_RETURN(task.key, ReadTaskKey(row, c));
  c += 3;
  task.flow_slug = row.Text(c++);
  SLUICE_ASSIGN_OR_RETURN(task.status, ParseTaskStatus(row.Text(c++)));
  task.attempts = static_cast<int>(row.Int(c++));
  task.error = row.Text(c++);
  task.queue_name = row.Text(c++);
  task.message_id = row.Int(c++);
  task.queued_at = row.Time(c++);
  task.started_at = row.OptionalTime(c++);
  task.finished_at = row.OptionalTime(c++);
  task.stall_at = row.OptionalTime(c++);
  task.requeued_count = static_cast<int>(row.Int(c++));
  task.worker_id = row.Text(c++);
  if (fields == Fields::kAll) {
    SLUICE_ASSIGN_OR_RETURN(task.input,
                            ParseStoredJson(row.Text(c++), "task input"));
    SLUICE_ASSIGN_OR_RETURN(task.output,
                            ReadOptionalJson(row, c++, "task output"));
  }
  return task;
}

absl::StatusOr<OutboxReport> ReadReport(const Statement& row) {
  OutboxReport report;
  report.report_id = row.Int(0);
  SLUICE_ASSIGN_OR_RETURN(report.task, ReadTaskKey(row, 1));
  report.flow_slug = row.Text(4);
  SLUICE_ASSIGN_OR_RETURN(report.kind, ParseReportKind(row.Text(5)));
  report.created_at = row.Time(6);
  return report;
}

absl::StatusOr<MessageRecord> ReadMessage(const Statement& row, Fields fields) {
  MessageRecord message;
  message.message_id = row.Int(0);
  message.read_count = static_cast<int>(row.Int(1));
  message.enqueued_at = row.Time(2);
  message.visible_at = row.Time(3);
  if (fields == Fields::kAll) {
    SLUICE_ASSIGN_OR_RETURN(message.body,
                            ParseStoredJson(row.Text(4), "message body"));
  }
  return message;
}

WorkerRecord ReadWorker(const Statement& row) {
  WorkerRecord worker;
  worker.worker_id = row.Text(0);
  worker.queue_name = row.Text(1);
  worker.flow_slug = row.Text(2);
  worker.started_at = row.Time(3);
  worker.last_heartbeat_at = row.Time(4);
  worker.stopped_at = row.OptionalTime(5);
  return worker;
}

}  // namespace sluice::sqlite_internal
