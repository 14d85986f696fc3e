#include "sqlite_rows.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_status.h"

namespace sluice::sqlite_internal {
namespace {

// Column readers for values that may not decode: a failure is noted in
// `unreadable` and the default value returned, so one bad row never fails
// a whole read (see sluice/records.h).

Json ReadJson(const Statement& row, int column, std::string_view what,
              std::string& unreadable) {
  absl::StatusOr<Json> value = sluice::ParseStoredJson(row.Text(column), what);
  if (!value.ok()) {
    AddUnreadable(unreadable, ToStd(value.status().message()));
    return Json();
  }
  return std::move(*value);
}

std::optional<Json> ReadOptionalJson(const Statement& row, int column,
                                     std::string_view what,
                                     std::string& unreadable) {
  if (row.IsNull(column)) return std::nullopt;
  absl::StatusOr<Json> value = sluice::ParseStoredJson(row.Text(column), what);
  if (!value.ok()) {
    AddUnreadable(unreadable, ToStd(value.status().message()));
    return std::nullopt;
  }
  return std::move(*value);
}

// JSON stored as NULL when it is JSON null (metadata, options).
Json ReadNullableJson(const Statement& row, int column, std::string_view what,
                      std::string& unreadable) {
  if (row.IsNull(column)) return Json();
  return ReadJson(row, column, what, unreadable);
}

RunId ReadRunId(const Statement& row, int column, std::string& unreadable) {
  absl::StatusOr<RunId> run_id = RunId::Parse(row.Text(column));
  if (!run_id.ok()) {
    AddUnreadable(unreadable,
                  StrCat("run id is not a UUID: ", run_id.status().message()));
    return RunId();
  }
  return *run_id;
}

template <typename Enum>
Enum ReadEnum(const Statement& row, int column,
              absl::StatusOr<Enum> (*parse)(std::string_view),
              std::string& unreadable) {
  absl::StatusOr<Enum> value = parse(row.Text(column));
  if (!value.ok()) {
    AddUnreadable(unreadable, ToStd(value.status().message()));
    return Enum();
  }
  return *value;
}

TaskKey ReadTaskKey(const Statement& row, int first_column,
                    std::string& unreadable) {
  return TaskKey{ReadRunId(row, first_column, unreadable),
                 static_cast<int>(row.Int(first_column + 1)),
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

// The stored served list (BindServed's format); empty if it does not
// decode.
std::vector<ServedSteps> ParseServed(std::string_view text) {
  absl::StatusOr<Json> value = sluice::ParseStoredJson(text, "served steps");
  if (!value.ok() || !value->is_array()) return {};
  std::vector<ServedSteps> served;
  for (const Json& item : value->get_array()) {
    const boost::json::object* flow = item.if_object();
    const Json* slug = flow ? flow->if_contains("flow") : nullptr;
    const Json* steps = flow ? flow->if_contains("steps") : nullptr;
    if (slug == nullptr || !slug->is_string() || steps == nullptr ||
        !steps->is_array()) {
      return {};
    }
    ServedSteps entry{.flow_slug = std::string(slug->get_string())};
    for (const Json& step : steps->get_array()) {
      if (!step.is_string()) return {};
      entry.steps.emplace_back(step.get_string());
    }
    served.push_back(std::move(entry));
  }
  return served;
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

void BindNullableJson(Statement& statement, int index, const Json& value) {
  if (value.is_null()) {
    statement.BindNull(index);
  } else {
    BindJson(statement, index, value);
  }
}

void AddNullableJson(BoundRows& rows, const Json& value) {
  if (value.is_null()) {
    rows.AddNull();
  } else {
    AddJson(rows, value);
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

absl::StatusOr<FlowRecord> ReadFlow(const Statement& row) {
  FlowRecord flow;
  flow.slug = row.Text(0);
  absl::StatusOr<Json> definition =
      sluice::ParseStoredJson(row.Text(1), "flow definition");
  if (!definition.ok()) {
    // A flow is not one item among others: every run of it needs it.
    return absl::InternalError(
        StrCat("stored flow \"", flow.slug,
               "\" is corrupt: ", definition.status().message()));
  }
  flow.definition = std::move(*definition);
  flow.created_at = row.Time(2);
  flow.alias = row.Text(3);
  flow.generation = row.Int(4);
  return flow;
}

AliasRecord ReadAlias(const Statement& row) {
  return AliasRecord{.alias = std::string(row.Text(0)),
                     .active_slug = std::string(row.Text(1)),
                     .updated_at = row.Time(2)};
}

QueueRecord ReadQueue(const Statement& row) {
  return QueueRecord{std::string(row.Text(0)), std::string(row.Text(1)),
                     row.Time(2), row.Int(3) != 0};
}

absl::StatusOr<RunRecord> ReadRun(const Statement& row, Fields fields,
                                  int first) {
  int c = first;
  RunRecord run;
  run.run_id = ReadRunId(row, c++, run.unreadable);
  run.flow_slug = row.Text(c++);
  run.status = ReadEnum(row, c++, ParseRunStatus, run.unreadable);
  run.remaining_steps = static_cast<int>(row.Int(c++));
  run.error = row.Text(c++);
  run.started_at = row.Time(c++);
  run.finished_at = row.OptionalTime(c++);
  run.priority = static_cast<int>(row.Int(c++));
  run.external_key = row.Text(c++);
  run.cancel_requested = row.Int(c++) != 0;
  run.metadata = ReadNullableJson(row, c++, "run metadata", run.unreadable);
  run.options = ReadNullableJson(row, c++, "run options", run.unreadable);
  if (fields == Fields::kAll) {
    run.input = ReadJson(row, c++, "run input", run.unreadable);
    run.output = ReadOptionalJson(row, c++, "run output", run.unreadable);
  }
  return run;
}

absl::StatusOr<StepStateRecord> ReadStepState(const Statement& row,
                                              Fields fields, int first) {
  int c = first;
  StepStateRecord state;
  state.run_id = ReadRunId(row, c++, state.unreadable);
  state.step_index = static_cast<int>(row.Int(c++));
  state.step_slug = row.Text(c++);
  state.status = ReadEnum(row, c++, ParseStepStatus, state.unreadable);
  state.remaining_deps = static_cast<int>(row.Int(c++));
  state.initial_tasks = row.OptionalInt(c++);
  state.remaining_tasks = row.OptionalInt(c++);
  state.error = row.Text(c++);
  state.skip_reason = ReadEnum(row, c++, ParseSkipReason, state.unreadable);
  state.started_at = row.OptionalTime(c++);
  state.finished_at = row.OptionalTime(c++);
  if (fields == Fields::kAll) {
    state.output = ReadOptionalJson(row, c++, "step output", state.unreadable);
  }
  return state;
}

absl::StatusOr<TaskRecord> ReadTask(const Statement& row, Fields fields,
                                    int first) {
  int c = first;
  TaskRecord task;
  task.key = ReadTaskKey(row, c, task.unreadable);
  c += 3;
  task.flow_slug = row.Text(c++);
  task.status = ReadEnum(row, c++, ParseTaskStatus, task.unreadable);
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
  task.budget_start = static_cast<int>(row.Int(c++));
  task.cancel_requested = row.Int(c++) != 0;
  task.options = ReadNullableJson(row, c++, "task options", task.unreadable);
  if (fields == Fields::kAll) {
    task.input = ReadJson(row, c++, "task input", task.unreadable);
    task.output = ReadOptionalJson(row, c++, "task output", task.unreadable);
  }
  return task;
}

absl::StatusOr<OutboxReport> ReadReport(const Statement& row) {
  OutboxReport report;
  report.report_id = row.Int(0);
  report.task = ReadTaskKey(row, 1, report.unreadable);
  report.flow_slug = row.Text(4);
  report.kind = ReadEnum(row, 5, ParseReportKind, report.unreadable);
  report.created_at = row.Time(6);
  return report;
}

ChildLinkRecord ReadChildLink(const Statement& row, Fields fields, int first) {
  int c = first;
  ChildLinkRecord link;
  link.parent = ReadTaskKey(row, c, link.unreadable);
  c += 3;
  link.child_index = static_cast<int>(row.Int(c++));
  link.child_store = row.Text(c++);
  link.child_run_id = ReadRunId(row, c++, link.unreadable);
  link.status = ReadEnum(row, c++, ParseChildStatus, link.unreadable);
  link.error = row.Text(c++);
  link.cascaded = row.Int(c++) != 0;
  link.pending_since = row.Time(c++);
  if (fields == Fields::kAll) {
    link.output =
        ReadOptionalJson(row, c++, "child link output", link.unreadable);
    link.spec = ReadJson(row, c++, "child link spec", link.unreadable);
  }
  return link;
}

ChildReport ReadChildReport(const Statement& row) {
  ChildReport report;
  report.report_id = row.Int(0);
  report.parent_store = row.Text(1);
  report.parent = ReadTaskKey(row, 2, report.unreadable);
  report.child_index = static_cast<int>(row.Int(5));
  report.child_run_id = ReadRunId(row, 6, report.unreadable);
  report.outcome = ReadEnum(row, 7, ParseChildStatus, report.unreadable);
  report.error = row.Text(8);
  report.created_at = row.Time(9);
  report.output =
      ReadOptionalJson(row, 10, "child report output", report.unreadable);
  return report;
}

absl::StatusOr<MessageRecord> ReadMessage(const Statement& row, Fields fields,
                                          int first) {
  MessageRecord message;
  message.message_id = row.Int(first);
  message.read_count = static_cast<int>(row.Int(first + 1));
  message.enqueued_at = row.Time(first + 2);
  message.visible_at = row.Time(first + 3);
  message.priority = static_cast<int>(row.Int(first + 4));
  if (fields == Fields::kAll) {
    message.body = ReadJson(row, first + 5, "message body", message.unreadable);
  }
  return message;
}

AttemptRecord ReadAttempt(const Statement& row) {
  AttemptRecord attempt;
  attempt.task = ReadTaskKey(row, 0, attempt.unreadable);
  attempt.attempt = static_cast<int>(row.Int(3));
  attempt.worker_id = row.Text(4);
  attempt.started_at = row.OptionalTime(5);
  attempt.finished_at = row.Time(6);
  attempt.outcome = ReadEnum(row, 7, ParseAttemptOutcome, attempt.unreadable);
  attempt.error = row.Text(8);
  return attempt;
}

DedupeRecord ReadDedupe(const Statement& row) {
  DedupeRecord entry;
  entry.flow_slug = row.Text(0);
  entry.key = row.Text(1);
  absl::StatusOr<RunId> run_id = RunId::Parse(row.Text(2));
  if (run_id.ok()) entry.run_id = *run_id;
  entry.expires_at = row.OptionalTime(3);
  return entry;
}

WorkerRecord ReadWorker(const Statement& row) {
  WorkerRecord worker;
  worker.worker_id = row.Text(0);
  worker.queue_name = row.Text(1);
  worker.flow_slug = row.Text(2);
  worker.started_at = row.Time(3);
  worker.last_heartbeat_at = row.Time(4);
  worker.stopped_at = row.OptionalTime(5);
  if (!row.IsNull(6)) worker.served = ParseServed(row.Text(6));
  return worker;
}

void BindServed(Statement& statement, int index,
                const std::vector<ServedSteps>& served) {
  if (served.empty()) {
    statement.BindNull(index);
    return;
  }
  boost::json::array flows;
  flows.reserve(served.size());
  for (const ServedSteps& flow : served) {
    boost::json::array steps;
    steps.reserve(flow.steps.size());
    for (const std::string& step : flow.steps) steps.emplace_back(step);
    flows.push_back(boost::json::object{{"flow", flow.flow_slug},
                                        {"steps", std::move(steps)}});
  }
  statement.BindText(index, SerializeJson(Json(std::move(flows))));
}

void SortByTaskIndex(const std::vector<int32_t>& task_indexes,
                     std::vector<std::optional<Json>>& outputs) {
  if (std::is_sorted(task_indexes.begin(), task_indexes.end())) return;
  std::vector<size_t> order(task_indexes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return task_indexes[a] < task_indexes[b];
  });
  std::vector<std::optional<Json>> sorted;
  sorted.reserve(outputs.size());
  for (size_t i : order) sorted.push_back(std::move(outputs[i]));
  outputs = std::move(sorted);
}

}  // namespace sluice::sqlite_internal
