// Flow definitions: the builder and its validation.
#include "sluice/flow.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "option_checks.h"
#include "queue_name.h"
#include "sluice/errors.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sluice/job.h"
#include "sluice/json.h"

namespace sluice {
namespace {

constexpr size_t kMaxSlugLength = 128;
constexpr int kMaxAttemptsLimit = 10'000;
constexpr absl::Duration kMaxTimeout = absl::Hours(24 * 7);
constexpr absl::Duration kMaxStartDelay = absl::Hours(24 * 365);
constexpr absl::Duration kMaxWaitTimeout = absl::Hours(24 * 365 * 10);

bool IsSlugStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsSlugChar(char c) { return IsSlugStart(c) || (c >= '0' && c <= '9'); }

absl::Status CheckDuration(std::string_view owner, std::string_view name,
                           absl::Duration d, absl::Duration min, bool min_open,
                           absl::Duration max) {
  bool too_small = min_open ? d <= min : d < min;
  if (d == absl::InfiniteDuration() || d == -absl::InfiniteDuration() ||
      too_small || d > max) {
    return absl::InvalidArgumentError(StrCat(
        owner, ": ", name, " ", absl::FormatDuration(d), " is out of range; ",
        "it must be ", min_open ? "over " : "at least ",
        absl::FormatDuration(min), " and at most ", absl::FormatDuration(max)));
  }
  return absl::OkStatus();
}

absl::Status CheckAttempts(std::string_view owner, int max_attempts) {
  if (max_attempts < 1 || max_attempts > kMaxAttemptsLimit) {
    return absl::InvalidArgumentError(StrCat(owner, ": max_attempts ",
                                             max_attempts,
                                             " is out of range; it must be "
                                             "between 1 and ",
                                             kMaxAttemptsLimit));
  }
  return absl::OkStatus();
}

absl::Status CheckBackoffKind(std::string_view owner, BackoffKind kind) {
  if (kind == BackoffKind::kExponential || kind == BackoffKind::kFixed) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(StrCat(owner, ": backoff kind ",
                                           static_cast<int>(kind),
                                           " is not kExponential or kFixed"));
}

absl::Status CheckFlowOptions(std::string_view owner, const FlowOptions& o) {
  if (auto s = CheckAttempts(owner, o.max_attempts); !s.ok()) return s;
  if (auto s = CheckBackoffKind(owner, o.backoff); !s.ok()) return s;
  if (auto s = CheckDuration(owner, "base_delay", o.base_delay,
                             absl::ZeroDuration(), false, kMaxRetryDelay);
      !s.ok()) {
    return s;
  }
  return CheckDuration(owner, "timeout", o.timeout, absl::ZeroDuration(), true,
                       kMaxTimeout);
}

absl::Status CheckStepSpec(std::string_view owner, const StepSpec& spec) {
  if (spec.max_attempts) {
    if (auto s = CheckAttempts(owner, *spec.max_attempts); !s.ok()) return s;
  }
  if (spec.backoff) {
    if (auto s = CheckBackoffKind(owner, *spec.backoff); !s.ok()) return s;
  }
  if (spec.base_delay) {
    if (auto s = CheckDuration(owner, "base_delay", *spec.base_delay,
                               absl::ZeroDuration(), false, kMaxRetryDelay);
        !s.ok()) {
      return s;
    }
  }
  if (spec.timeout) {
    if (auto s = CheckDuration(owner, "timeout", *spec.timeout,
                               absl::ZeroDuration(), true, kMaxTimeout);
        !s.ok()) {
      return s;
    }
  }
  if (spec.start_delay) {
    if (auto s = CheckDuration(owner, "start_delay", *spec.start_delay,
                               absl::ZeroDuration(), false, kMaxStartDelay);
        !s.ok()) {
      return s;
    }
  }
  if (spec.if_pattern && !spec.if_pattern->is_object()) {
    return absl::InvalidArgumentError(
        StrCat(owner, ": the \"if\" pattern must be a JSON object, not ",
               JsonTypeName(*spec.if_pattern)));
  }
  if (spec.if_not_pattern && !spec.if_not_pattern->is_object()) {
    return absl::InvalidArgumentError(
        StrCat(owner, ": the \"if_not\" pattern must be a JSON object, not ",
               JsonTypeName(*spec.if_not_pattern)));
  }
  if (spec.if_pattern) {
    SLUICE_RETURN_IF_ERROR(CheckJsonValue(
        *spec.if_pattern, StrCat(owner, ": the \"if\" pattern")));
  }
  if (spec.if_not_pattern) {
    SLUICE_RETURN_IF_ERROR(CheckJsonValue(
        *spec.if_not_pattern, StrCat(owner, ": the \"if_not\" pattern")));
  }
  return absl::OkStatus();
}

// A Wait step runs no handler, so the options that shape handler attempts
// would silently mean nothing: refuse them.
absl::Status CheckWaitStep(std::string_view owner, const StepSpec& spec,
                           const WaitSpec& wait) {
  auto refuse = [&](std::string_view option) {
    return absl::InvalidArgumentError(StrCat(
        owner, " is a Wait step: StepSpec::", option,
        " has no meaning there (a Wait step runs no handler; WaitSpec::timeout "
        "bounds its wait)"));
  };
  if (spec.max_attempts) return refuse("max_attempts");
  if (spec.base_delay) return refuse("base_delay");
  if (spec.backoff) return refuse("backoff");
  if (spec.timeout) return refuse("timeout");
  if (spec.start_delay) return refuse("start_delay");
  if (wait.on_timeout != WaitTimeoutPolicy::kFail &&
      wait.on_timeout != WaitTimeoutPolicy::kComplete) {
    return absl::InvalidArgumentError(StrCat(owner, ": WaitSpec::on_timeout ",
                                             static_cast<int>(wait.on_timeout),
                                             " is not kFail or kComplete"));
  }
  if (wait.timeout) {
    SLUICE_RETURN_IF_ERROR(CheckDuration(owner, "WaitSpec::timeout",
                                         *wait.timeout, absl::ZeroDuration(),
                                         true, kMaxWaitTimeout));
  } else if (wait.on_timeout == WaitTimeoutPolicy::kComplete) {
    return absl::InvalidArgumentError(
        StrCat(owner,
               ": WaitSpec::on_timeout is kComplete but no "
               "WaitSpec::timeout is set; set a timeout or drop the "
               "policy"));
  }
  if (wait.on_timeout == WaitTimeoutPolicy::kFail) {
    if (!wait.timeout_output.is_null()) {
      return absl::InvalidArgumentError(
          StrCat(owner,
                 ": WaitSpec::timeout_output is set but on_timeout is "
                 "kFail; use kComplete to complete with it"));
    }
    return absl::OkStatus();
  }
  return CheckJsonValue(wait.timeout_output,
                        StrCat(owner, ": WaitSpec::timeout_output"));
}

}  // namespace

std::string_view ToString(StepKind kind) {
  switch (kind) {
    case StepKind::kSingle:
      return "single";
    case StepKind::kMap:
      return "map";
    case StepKind::kWait:
      return "wait";
  }
  return "unknown";
}

std::string_view ToString(WaitTimeoutPolicy policy) {
  return policy == WaitTimeoutPolicy::kComplete ? "complete" : "fail";
}

std::string_view ToString(Policy policy) {
  switch (policy) {
    case Policy::kFail:
      return "fail";
    case Policy::kSkip:
      return "skip";
    case Policy::kSkipCascade:
      return "skip_cascade";
  }
  return "unknown";
}

std::string_view ToString(QueueMode mode) {
  switch (mode) {
    case QueueMode::kFlow:
      return "flow";
    case QueueMode::kShared:
      return "shared";
    case QueueMode::kStep:
      return "step";
    case QueueMode::kExplicit:
      return "explicit";
  }
  return "unknown";
}

std::string_view ToString(BackoffKind kind) {
  return kind == BackoffKind::kFixed ? "fixed" : "exponential";
}

absl::Status ValidateSlug(std::string_view slug, std::string_view what) {
  if (slug.empty()) {
    return absl::InvalidArgumentError(StrCat(what, " slug is empty"));
  }
  if (slug.size() > kMaxSlugLength) {
    return absl::InvalidArgumentError(
        StrCat(what, " slug \"", slug.substr(0, 40), "...\" is ", slug.size(),
               " characters; the limit is ", kMaxSlugLength));
  }
  bool valid = IsSlugStart(slug[0]);
  for (char c : slug) valid = valid && IsSlugChar(c);
  if (!valid) {
    return absl::InvalidArgumentError(StrCat(
        what, " slug \"", slug,
        "\" is invalid: use letters, digits and _, not starting with a digit"));
  }
  if (slug == "run") {
    return absl::InvalidArgumentError(
        StrCat(what, " slug \"run\" is reserved for the run input"));
  }
  return absl::OkStatus();
}

Flow::Flow(std::string slug, FlowOptions options) {
  shape_.slug = std::move(slug);
  shape_.options = options;
  first_error_ = ValidateSlug(shape_.slug, "flow");
  if (first_error_.ok()) {
    first_error_ =
        CheckFlowOptions(StrCat("flow \"", shape_.slug, "\""), options);
  }
  if (options.queue_per_step) {
    shape_.queue_mode = QueueMode::kStep;
  } else if (!options.queue.empty()) {
    shape_.queue_mode = QueueMode::kShared;
  }
  std::string owner = StrCat("flow \"", shape_.slug, "\"");
  if (first_error_.ok() && options.queue_per_step && !options.queue.empty()) {
    first_error_ = absl::InvalidArgumentError(
        StrCat(owner,
               ": queue_per_step gives every step a private queue, so it "
               "can't be combined with the shared queue \"",
               options.queue, "\""));
  }
  if (first_error_.ok() && !options.queue.empty()) {
    absl::Status s = queue_name::Validate(options.queue);
    if (!s.ok()) {
      first_error_ =
          absl::InvalidArgumentError(StrCat(owner, ": ", s.message()));
    }
  }
  if (first_error_.ok()) {
    first_error_ = ValidatePriority(owner, options.priority);
  }
  if (first_error_.ok()) first_error_ = ValidateKeep(owner, options.keep);
}

absl::StatusOr<std::string> Flow::StepQueue(std::string_view slug,
                                            const StepSpec& spec) const {
  std::string owner = StrCat("flow \"", shape_.slug, "\": step \"", slug, "\"");
  if (!spec.queue.empty()) {
    if (shape_.options.queue_per_step) {
      return absl::InvalidArgumentError(
          StrCat(owner, " names queue \"", spec.queue,
                 "\", but queue_per_step gives every step a private queue"));
    }
    absl::Status s = queue_name::Validate(spec.queue);
    if (!s.ok()) {
      return absl::InvalidArgumentError(StrCat(owner, ": ", s.message()));
    }
    return spec.queue;
  }
  if (shape_.options.queue_per_step) {
    absl::StatusOr<std::string> queue = queue_name::ForStep(
        shape_.slug, slug, static_cast<int>(shape_.steps.size()));
    if (!queue.ok()) {
      return absl::InvalidArgumentError(
          StrCat("flow \"", shape_.slug, "\": ", queue.status().message()));
    }
    return queue;
  }
  if (!shape_.options.queue.empty()) return shape_.options.queue;
  return queue_name::ForFlow(shape_.slug);
}

Flow& Flow::Step(std::string slug, Handler handler) {
  return Add(std::move(slug), StepKind::kSingle, {}, std::move(handler));
}
Flow& Flow::Step(std::string slug, StepSpec spec, Handler handler) {
  return Add(std::move(slug), StepKind::kSingle, std::move(spec),
             std::move(handler));
}
Flow& Flow::Map(std::string slug, Handler handler) {
  return Add(std::move(slug), StepKind::kMap, {}, std::move(handler));
}
Flow& Flow::Map(std::string slug, StepSpec spec, Handler handler) {
  return Add(std::move(slug), StepKind::kMap, std::move(spec),
             std::move(handler));
}

Flow& Flow::Wait(std::string slug, WaitSpec wait) {
  return Wait(std::move(slug), StepSpec(), std::move(wait));
}
Flow& Flow::Wait(std::string slug, StepSpec spec, WaitSpec wait) {
  return Add(std::move(slug), StepKind::kWait, std::move(spec), nullptr,
             std::move(wait));
}

Flow& Flow::Alias(std::string alias) {
  absl::Status status =
      ValidateSlug(alias, StrCat("flow \"", shape_.slug, "\": alias"));
  if (first_error_.ok() && !status.ok()) first_error_ = status;
  alias_ = std::move(alias);
  return *this;
}

Flow& Flow::Add(std::string slug, StepKind kind, StepSpec spec, Handler handler,
                WaitSpec wait) {
  absl::Status status = [&]() -> absl::Status {
    std::string flow_name = StrCat("flow \"", shape_.slug, "\"");
    if (auto s = ValidateSlug(slug, StrCat(flow_name, ": step")); !s.ok()) {
      return s;
    }
    std::string owner = StrCat(flow_name, ": step \"", slug, "\"");
    for (const StepShape& existing : shape_.steps) {
      if (absl::AsciiStrToLower(existing.slug) == absl::AsciiStrToLower(slug)) {
        return absl::InvalidArgumentError(StrCat(
            owner, " is defined twice (step slugs are unique, ignoring case)"));
      }
    }
    absl::flat_hash_set<std::string> seen;
    for (const std::string& dep : spec.depends_on) {
      if (dep == slug) {
        return absl::InvalidArgumentError(StrCat(owner, " depends on itself"));
      }
      if (shape_.StepIndex(dep) < 0) {
        return absl::InvalidArgumentError(
            StrCat(owner, " depends on unknown step \"", dep,
                   "\" (define a step before the steps that depend on it)"));
      }
      if (!seen.insert(dep).second) {
        return absl::InvalidArgumentError(
            StrCat(owner, " lists dependency \"", dep, "\" twice"));
      }
    }
    if (kind == StepKind::kMap && spec.depends_on.size() > 1) {
      return absl::InvalidArgumentError(StrCat(
          owner, " is a map step with ", spec.depends_on.size(),
          " dependencies; a map step maps over the run input or over exactly "
          "one dependency's output"));
    }
    if (kind == StepKind::kWait) {
      SLUICE_RETURN_IF_ERROR(CheckWaitStep(owner, spec, wait));
    }
    return CheckStepSpec(owner, spec);
  }();
  if (first_error_.ok() && !status.ok()) first_error_ = status;
  absl::StatusOr<std::string> queue = StepQueue(slug, spec);
  if (first_error_.ok() && !queue.ok()) first_error_ = queue.status();
  if (!spec.queue.empty() && !shape_.options.queue_per_step) {
    shape_.queue_mode = QueueMode::kExplicit;
  }
  StepShape step;
  step.slug = std::move(slug);
  step.kind = kind;
  step.spec = std::move(spec);
  step.wait = std::move(wait);
  step.queue_name = queue.ok() ? *std::move(queue) : std::string();
  shape_.steps.push_back(std::move(step));
  handlers_.push_back(std::move(handler));
  return *this;
}

absl::Status Flow::Validate() const {
  if (!first_error_.ok()) return first_error_;
  if (shape_.steps.empty()) {
    return absl::InvalidArgumentError(StrCat(
        "flow \"", shape_.slug, "\" has no steps; add at least one step"));
  }
  SLUICE_RETURN_IF_ERROR(ValidateWaitOutputs());
  return ValidateQueues();
}

// A map step over a Wait step's output needs an array; a timeout output
// known now is checked now rather than failing runs later.
absl::Status Flow::ValidateWaitOutputs() const {
  for (const StepShape& step : shape_.steps) {
    if (step.kind != StepKind::kMap || step.spec.depends_on.size() != 1) {
      continue;
    }
    const StepShape& source =
        shape_.steps[shape_.StepIndex(step.spec.depends_on.front())];
    if (source.kind != StepKind::kWait ||
        source.wait.on_timeout != WaitTimeoutPolicy::kComplete ||
        source.wait.timeout_output.is_array()) {
      continue;
    }
    return absl::InvalidArgumentError(
        StrCat("flow \"", shape_.slug, "\": Wait step \"", source.slug,
               "\" feeds map step \"", step.slug,
               "\", so its WaitSpec::timeout_output must be a JSON array, not ",
               JsonTypeName(source.wait.timeout_output)));
  }
  return absl::OkStatus();
}

// The queue checks that depend on every step: the mode is known only once
// the last step is added.
absl::Status Flow::ValidateQueues() const {
  std::string owner = StrCat("flow \"", shape_.slug, "\"");
  switch (shape_.queue_mode) {
    case QueueMode::kFlow:
      if (absl::Status s =
              queue_name::Validate(queue_name::ForFlow(shape_.slug));
          !s.ok()) {
        return absl::InvalidArgumentError(StrCat(owner, ": ", s.message()));
      }
      return absl::OkStatus();
    case QueueMode::kExplicit:
      if (!shape_.options.queue.empty()) return absl::OkStatus();
      for (const StepShape& step : shape_.steps) {
        if (!step.spec.queue.empty()) continue;
        return absl::InvalidArgumentError(StrCat(
            owner, ": step \"", step.slug,
            "\" names no queue; when some steps name a queue "
            "(StepSpec::queue), every step must, or set FlowOptions::queue "
            "for the steps that don't"));
      }
      return absl::OkStatus();
    case QueueMode::kShared:
    case QueueMode::kStep:
      return absl::OkStatus();  // checked as options and steps were added
  }
  return absl::OkStatus();
}

absl::Status Flow::ValidateForWorker() const {
  if (auto s = Validate(); !s.ok()) return s;
  for (size_t i = 0; i < shape_.steps.size(); ++i) {
    if (!handlers_[i] && shape_.steps[i].kind != StepKind::kWait) {
      return absl::InvalidArgumentError(
          StrCat("flow \"", shape_.slug, "\": step \"", shape_.steps[i].slug,
                 "\" has no handler"));
    }
  }
  return absl::OkStatus();
}

void TaskContext::Log(LogLevel level, std::string_view message) const {
  if (!log_) return;
  log_(level,
       StrCat(info_.flow_slug, "/", info_.step_slug, "[", info_.task_index,
              "] attempt ", info_.attempt, ": ", message));
}

}  // namespace sluice
