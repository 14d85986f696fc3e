#include "sluice/records.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/json/serialize.hpp"
#include "sluice/internal/strings.h"
#include "sluice/json.h"

namespace sluice {
namespace {

template <typename E, size_t N>
absl::StatusOr<E> ParseName(
    const std::array<std::pair<E, std::string_view>, N>& names,
    std::string_view text, std::string_view what) {
  for (const auto& [value, name] : names) {
    if (name == text) return value;
  }
  return absl::InternalError(
      StrCat("stored ", what, " \"", text, "\" is not recognized"));
}

template <typename E, size_t N>
std::string_view NameOf(
    const std::array<std::pair<E, std::string_view>, N>& names, E value) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return "unknown";
}

constexpr std::array<std::pair<RunStatus, std::string_view>, 4> kRunStatuses{{
    {RunStatus::kStarted, "started"},
    {RunStatus::kCompleted, "completed"},
    {RunStatus::kFailed, "failed"},
    {RunStatus::kCancelled, "cancelled"},
}};
constexpr std::array<std::pair<StepStatus, std::string_view>, 6> kStepStatuses{{
    {StepStatus::kCreated, "created"},
    {StepStatus::kStarted, "started"},
    {StepStatus::kCompleted, "completed"},
    {StepStatus::kFailed, "failed"},
    {StepStatus::kSkipped, "skipped"},
    {StepStatus::kCancelled, "cancelled"},
}};
constexpr std::array<std::pair<TaskStatus, std::string_view>, 7> kTaskStatuses{{
    {TaskStatus::kQueued, "queued"},
    {TaskStatus::kStarted, "started"},
    {TaskStatus::kCompleted, "completed"},
    {TaskStatus::kFailed, "failed"},
    {TaskStatus::kSkipped, "skipped"},
    {TaskStatus::kCancelled, "cancelled"},
    {TaskStatus::kWaiting, "waiting"},
}};
constexpr std::array<std::pair<ChildStatus, std::string_view>, 4>
    kChildStatuses{{
        {ChildStatus::kPending, "pending"},
        {ChildStatus::kCompleted, "completed"},
        {ChildStatus::kFailed, "failed"},
        {ChildStatus::kCancelled, "cancelled"},
    }};
constexpr std::array<std::pair<SkipReason, std::string_view>, 4> kSkipReasons{{
    {SkipReason::kNone, ""},
    {SkipReason::kConditionUnmet, "condition_unmet"},
    {SkipReason::kHandlerFailed, "handler_failed"},
    {SkipReason::kDependencySkipped, "dependency_skipped"},
}};
constexpr std::array<std::pair<ReportKind, std::string_view>, 4> kReportKinds{{
    {ReportKind::kCompleted, "completed"},
    {ReportKind::kFailed, "failed"},
    {ReportKind::kTypeViolation, "type_violation"},
    {ReportKind::kUnreadable, "unreadable"},
}};
constexpr std::array<std::pair<AttemptOutcome, std::string_view>, 7>
    kAttemptOutcomes{{
        {AttemptOutcome::kCompleted, "completed"},
        {AttemptOutcome::kRetried, "retried"},
        {AttemptOutcome::kFailed, "failed"},
        {AttemptOutcome::kStalled, "stalled"},
        {AttemptOutcome::kCancelled, "cancelled"},
        {AttemptOutcome::kReleased, "released"},
        {AttemptOutcome::kFannedOut, "fanned_out"},
    }};

}  // namespace

std::string_view ToString(RunStatus s) { return NameOf(kRunStatuses, s); }
std::string_view ToString(StepStatus s) { return NameOf(kStepStatuses, s); }
std::string_view ToString(TaskStatus s) { return NameOf(kTaskStatuses, s); }
std::string_view ToString(SkipReason r) { return NameOf(kSkipReasons, r); }
std::string_view ToString(ChildStatus s) { return NameOf(kChildStatuses, s); }
std::string_view ToString(ReportKind k) { return NameOf(kReportKinds, k); }
std::string_view ToString(AttemptOutcome o) {
  return NameOf(kAttemptOutcomes, o);
}

absl::StatusOr<RunStatus> ParseRunStatus(std::string_view text) {
  return ParseName(kRunStatuses, text, "run status");
}
absl::StatusOr<ChildStatus> ParseChildStatus(std::string_view text) {
  return ParseName(kChildStatuses, text, "child status");
}
absl::StatusOr<StepStatus> ParseStepStatus(std::string_view text) {
  return ParseName(kStepStatuses, text, "step status");
}
absl::StatusOr<TaskStatus> ParseTaskStatus(std::string_view text) {
  return ParseName(kTaskStatuses, text, "task status");
}
absl::StatusOr<SkipReason> ParseSkipReason(std::string_view text) {
  return ParseName(kSkipReasons, text, "skip reason");
}
absl::StatusOr<ReportKind> ParseReportKind(std::string_view text) {
  return ParseName(kReportKinds, text, "report kind");
}
absl::StatusOr<AttemptOutcome> ParseAttemptOutcome(std::string_view text) {
  return ParseName(kAttemptOutcomes, text, "attempt outcome");
}

void AddUnreadable(std::string& unreadable, std::string_view problem) {
  if (!unreadable.empty()) unreadable += "; ";
  unreadable += problem;
}

std::string UnreadableError(std::string_view what) {
  return StrCat("stored data unreadable: ", what);
}

Json TaskMessageBody::ToJson() const {
  boost::json::object body;
  body.reserve(4);
  body.emplace("flow_slug", flow_slug);
  body.emplace("run_id", run_id.ToString());
  body.emplace("step_slug", step_slug);
  body.emplace("task_index", task_index);
  return body;
}

std::string TaskMessageBody::ToText() const {
  // The same text as SerializeJson(ToJson()), without building the object.
  return StrCat("{\"flow_slug\":",
                boost::json::serialize(boost::json::string_view(flow_slug)),
                ",\"run_id\":\"", run_id.ToString(), "\",\"step_slug\":",
                boost::json::serialize(boost::json::string_view(step_slug)),
                ",\"task_index\":", task_index, "}");
}

std::string OutgoingMessage::BodyText() const {
  return task.has_value() ? task->ToText() : SerializeJson(body);
}

}  // namespace sluice
