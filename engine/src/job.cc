// Job definitions: a job is a one-step flow whose step, "job", runs on the
// job's (shared) queue and whose handler gets the payload itself.
#include "sluice/job.h"

#include "option_checks.h"
#include "queue_name.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

FlowOptions FlowOptionsOf(const JobOptions& job) {
  FlowOptions flow;
  flow.max_attempts = job.max_attempts;
  flow.base_delay = job.backoff.delay;
  flow.backoff = job.backoff.kind;
  flow.timeout = job.timeout;
  flow.queue = job.queue;
  flow.priority = job.priority;
  flow.keep = job.keep;
  return flow;
}

// A flow step's input is {"run": <run input>}; a job handler sees the run
// input (the payload) alone.
Handler PayloadHandler(Handler handler) {
  if (!handler) return nullptr;
  return
      [handler = std::move(handler)](
          const Json& input, TaskContext& ctx) -> absl::StatusOr<StepResult> {
        const Json* payload =
            input.is_object() ? input.get_object().if_contains("run") : nullptr;
        return handler(payload != nullptr ? *payload : input, ctx);
      };
}

absl::Status CheckKeepRule(std::string_view owner, std::string_view state,
                           const KeepRule& rule) {
  if (rule.count && *rule.count < 0) {
    return absl::InvalidArgumentError(StrCat(owner, ": keep.", state, ".count ",
                                             *rule.count,
                                             " is negative; it must be >= 0"));
  }
  if (rule.age && (*rule.age < absl::ZeroDuration() ||
                   *rule.age == absl::InfiniteDuration())) {
    return absl::InvalidArgumentError(StrCat(
        owner, ": keep.", state, ".age ", absl::FormatDuration(*rule.age),
        " is out of range; it must be >= 0 and finite"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateKeep(std::string_view owner, const Keep& keep) {
  SLUICE_RETURN_IF_ERROR(CheckKeepRule(owner, "completed", keep.completed));
  SLUICE_RETURN_IF_ERROR(CheckKeepRule(owner, "failed", keep.failed));
  return CheckKeepRule(owner, "cancelled", keep.cancelled);
}

absl::Status ValidatePriority(std::string_view owner, int priority) {
  if (priority < kMinPriority || priority > kMaxPriority) {
    return absl::InvalidArgumentError(StrCat(owner, ": priority ", priority,
                                             " is out of range; it must be "
                                             "between ",
                                             kMinPriority, " and ",
                                             kMaxPriority));
  }
  return absl::OkStatus();
}

Job::Job(std::string name, JobOptions options, Handler handler)
    : options_(std::move(options)),
      flow_(std::move(name), FlowOptionsOf(options_)) {
  flow_.Step("job", PayloadHandler(std::move(handler)));
}

absl::Status Job::Validate() const {
  SLUICE_RETURN_IF_ERROR(ValidateSlug(name(), "job"));
  std::string owner = StrCat("job \"", name(), "\"");
  if (absl::Status s = queue_name::Validate(options_.queue); !s.ok()) {
    return absl::InvalidArgumentError(StrCat(owner, ": ", s.message()));
  }
  SLUICE_RETURN_IF_ERROR(ValidatePriority(owner, options_.priority));
  if (options_.max_attempts < 1) {
    return absl::InvalidArgumentError(
        StrCat(owner, ": max_attempts ", options_.max_attempts,
               " is out of range; it must be at least 1"));
  }
  if (options_.backoff.delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(StrCat(
        owner, ": backoff delay ", absl::FormatDuration(options_.backoff.delay),
        " is negative; it must be >= 0"));
  }
  if (options_.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        StrCat(owner, ": timeout ", absl::FormatDuration(options_.timeout),
               " must be positive"));
  }
  SLUICE_RETURN_IF_ERROR(ValidateKeep(owner, options_.keep));
  // The flow's own checks (upper bounds of attempts, delays, timeout).
  return flow_.Validate();
}

}  // namespace sluice
