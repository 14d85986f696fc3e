#include "pg_rows.h"

#include <utility>

#include "boost/json.hpp"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

// Parses an enum column with `parse`; a name it does not know is noted as
// unreadable and read as `fallback`.
template <typename Enum, typename Parse>
Enum ReadEnum(Row& row, Parse parse, Enum fallback) {
  absl::StatusOr<Enum> value = parse(row.Raw());
  if (!value.ok()) {
    row.NoteUnreadable(ToStd(value.status().message()));
    return fallback;
  }
  return *value;
}

// The record, with what did not decode in `unreadable`, unless a column had
// the wrong shape.
template <typename Record>
absl::StatusOr<Record> Checked(Row& row, Record record) {
  if (!row.status().ok()) return row.status();
  record.unreadable = row.TakeUnreadable();
  return record;
}

// For records without an `unreadable` field.
template <typename Record>
absl::StatusOr<Record> CheckedWhole(Row& row, Record record,
                                    std::string_view what) {
  if (!row.status().ok()) return row.status();
  std::string unreadable = row.TakeUnreadable();
  if (!unreadable.empty()) {
    return absl::InternalError(std::string("postgres holds a corrupt ") +
                               std::string(what) + ": " + unreadable);
  }
  return record;
}

TaskKey ReadTaskKey(Row& row) {
  TaskKey key;
  key.run_id = row.RunId();
  key.step_index = static_cast<int>(row.Int());
  key.task_index = static_cast<int>(row.Int());
  return key;
}

// A string element of a served-steps entry, or why not.
absl::StatusOr<std::string> ServedString(const Json& value,
                                         std::string_view what) {
  if (!value.is_string()) {
    return absl::InvalidArgumentError(
        StrCat("worker's served steps: ", what, " is not a string"));
  }
  return std::string(value.get_string());
}

}  // namespace

Json ServedToJson(const std::vector<ServedSteps>& served) {
  boost::json::array flows;
  for (const ServedSteps& flow : served) {
    boost::json::array steps;
    for (const std::string& step : flow.steps) steps.emplace_back(step);
    flows.push_back(boost::json::object{{"flow", flow.flow_slug},
                                        {"steps", std::move(steps)}});
  }
  return flows;
}

absl::StatusOr<std::vector<ServedSteps>> ServedFromJson(const Json& json) {
  if (!json.is_array()) {
    return absl::InvalidArgumentError(
        "worker's served steps: not an array of {\"flow\", \"steps\"}");
  }
  std::vector<ServedSteps> served;
  for (const Json& entry : json.get_array()) {
    const boost::json::object* object = entry.if_object();
    const Json* flow = object ? object->if_contains("flow") : nullptr;
    const Json* steps = object ? object->if_contains("steps") : nullptr;
    if (flow == nullptr || steps == nullptr || !steps->is_array()) {
      return absl::InvalidArgumentError(
          "worker's served steps: an entry is not {\"flow\": slug, "
          "\"steps\": [slug, ...]}");
    }
    ServedSteps item;
    SLUICE_ASSIGN_OR_RETURN(item.flow_slug, ServedString(*flow, "a flow"));
    for (const Json& step : steps->get_array()) {
      SLUICE_ASSIGN_OR_RETURN(std::string slug, ServedString(step, "a step"));
      item.steps.push_back(std::move(slug));
    }
    served.push_back(std::move(item));
  }
  return served;
}

absl::StatusOr<FlowRecord> ReadFlow(Row row) {
  FlowRecord flow;
  flow.slug = row.Text();
  flow.definition = row.Json("flow definition");
  flow.created_at = row.Time();
  flow.alias = row.Text();
  flow.generation = row.Int();
  std::string what = "flow \"" + flow.slug + "\"";
  return CheckedWhole(row, std::move(flow), what);
}

absl::StatusOr<AliasRecord> ReadAlias(Row row) {
  AliasRecord alias;
  alias.alias = row.Text();
  alias.active_slug = row.Text();
  alias.updated_at = row.Time();
  return CheckedWhole(row, std::move(alias), "alias");
}

absl::StatusOr<QueueRecord> ReadQueue(Row row) {
  QueueRecord queue;
  queue.name = row.Text();
  queue.owner_flow = row.Text();
  queue.created_at = row.Time();
  queue.paused = row.Bool();
  return CheckedWhole(row, std::move(queue), "queue");
}

absl::StatusOr<RunRecord> ReadRun(Row row, Fields fields) {
  RunRecord run;
  run.run_id = row.RunId();
  run.flow_slug = row.Text();
  run.status = ReadEnum(row, ParseRunStatus, RunStatus::kStarted);
  run.remaining_steps = static_cast<int>(row.Int());
  run.error = row.Text();
  run.started_at = row.Time();
  run.finished_at = row.OptionalTime();
  run.priority = static_cast<int>(row.Int());
  run.external_key = row.Text();
  run.metadata = row.OptionalJson("run metadata").value_or(Json());
  run.options = row.OptionalJson("run options").value_or(Json());
  run.cancel_requested = row.Bool();
  if (fields == Fields::kAll) {
    run.input = row.Json("run input");
    run.output = row.OptionalJson("run output");
  }
  return Checked(row, std::move(run));
}

absl::StatusOr<StepStateRecord> ReadStepState(Row row, Fields fields) {
  StepStateRecord state;
  state.run_id = row.RunId();
  state.step_index = static_cast<int>(row.Int());
  state.step_slug = row.Text();
  state.status = ReadEnum(row, ParseStepStatus, StepStatus::kCreated);
  state.remaining_deps = static_cast<int>(row.Int());
  state.initial_tasks = row.OptionalInt();
  state.remaining_tasks = row.OptionalInt();
  state.error = row.Text();
  state.skip_reason = ReadEnum(row, ParseSkipReason, SkipReason::kNone);
  state.started_at = row.OptionalTime();
  state.finished_at = row.OptionalTime();
  if (fields == Fields::kAll) state.output = row.OptionalJson("step output");
  return Checked(row, std::move(state));
}

absl::StatusOr<TaskRecord> ReadTask(Row row, Fields fields) {
  TaskRecord task;
  task.key = ReadTaskKey(row);
  task.flow_slug = row.Text();
  task.status = ReadEnum(row, ParseTaskStatus, TaskStatus::kQueued);
  task.attempts = static_cast<int>(row.Int());
  task.error = row.Text();
  task.queue_name = row.Text();
  task.message_id = row.Int();
  task.queued_at = row.Time();
  task.started_at = row.OptionalTime();
  task.finished_at = row.OptionalTime();
  task.stall_at = row.OptionalTime();
  task.requeued_count = static_cast<int>(row.Int());
  task.worker_id = row.Text();
  task.budget_start = static_cast<int>(row.Int());
  task.cancel_requested = row.Bool();
  task.options = row.OptionalJson("task options").value_or(Json());
  if (fields == Fields::kAll) {
    task.input = row.Json("task input");
    task.output = row.OptionalJson("task output");
  }
  return Checked(row, std::move(task));
}

absl::StatusOr<OutboxReport> ReadReport(Row row) {
  OutboxReport report;
  report.report_id = row.Int();
  report.task = ReadTaskKey(row);
  report.flow_slug = row.Text();
  report.kind = ReadEnum(row, ParseReportKind, ReportKind::kCompleted);
  report.created_at = row.Time();
  return Checked(row, std::move(report));
}

absl::StatusOr<ChildLinkRecord> ReadChildLink(Row row, Fields fields) {
  ChildLinkRecord link;
  link.parent = ReadTaskKey(row);
  link.child_index = static_cast<int>(row.Int());
  link.child_store = row.Text();
  link.child_run_id = row.RunId();
  link.status = ReadEnum(row, ParseChildStatus, ChildStatus::kPending);
  link.error = row.Text();
  link.cascaded = row.Bool();
  link.pending_since = row.Time();
  if (fields == Fields::kAll) {
    link.output = row.OptionalJson("child link output");
    link.spec = row.Json("child link spec");
  }
  return Checked(row, std::move(link));
}

absl::StatusOr<ChildReport> ReadChildReport(Row row) {
  ChildReport report;
  report.report_id = row.Int();
  report.parent_store = row.Text();
  report.parent = ReadTaskKey(row);
  report.child_index = static_cast<int>(row.Int());
  report.child_run_id = row.RunId();
  report.outcome = ReadEnum(row, ParseChildStatus, ChildStatus::kCompleted);
  report.error = row.Text();
  report.created_at = row.Time();
  report.output = row.OptionalJson("child report output");
  return Checked(row, std::move(report));
}

absl::StatusOr<MessageRecord> ReadMessage(Row row, Fields fields) {
  MessageRecord message;
  message.message_id = row.Int();
  message.read_count = static_cast<int>(row.Int());
  message.enqueued_at = row.Time();
  message.visible_at = row.Time();
  message.priority = static_cast<int>(row.Int());
  if (fields == Fields::kAll) {
    // pgmq allows a NULL message; it reads as JSON null.
    std::optional<Json> body = row.OptionalJson("message body");
    if (body.has_value()) message.body = std::move(*body);
  }
  return Checked(row, std::move(message));
}

absl::StatusOr<AttemptRecord> ReadAttempt(Row row) {
  AttemptRecord attempt;
  attempt.task = ReadTaskKey(row);
  attempt.attempt = static_cast<int>(row.Int());
  attempt.worker_id = row.Text();
  attempt.started_at = row.OptionalTime();
  attempt.finished_at = row.Time();
  attempt.outcome =
      ReadEnum(row, ParseAttemptOutcome, AttemptOutcome::kCompleted);
  attempt.error = row.Text();
  return Checked(row, std::move(attempt));
}

absl::StatusOr<DedupeRecord> ReadDedupe(Row row) {
  DedupeRecord entry;
  entry.flow_slug = row.Text();
  entry.key = row.Text();
  entry.run_id = row.RunId();
  entry.expires_at = row.OptionalTime();
  return CheckedWhole(row, std::move(entry), "dedupe entry");
}

absl::StatusOr<WorkerRecord> ReadWorker(Row row) {
  WorkerRecord worker;
  worker.worker_id = row.Text();
  worker.queue_name = row.Text();
  worker.flow_slug = row.Text();
  worker.started_at = row.Time();
  worker.last_heartbeat_at = row.Time();
  worker.stopped_at = row.OptionalTime();
  if (std::optional<Json> served = row.OptionalJson("worker's served steps")) {
    absl::StatusOr<std::vector<ServedSteps>> steps = ServedFromJson(*served);
    if (steps.ok()) {
      worker.served = *std::move(steps);
    } else {
      row.NoteUnreadable(ToStd(steps.status().message()));
    }
  }
  return CheckedWhole(row, std::move(worker), "worker");
}

}  // namespace sluice::postgres_internal
