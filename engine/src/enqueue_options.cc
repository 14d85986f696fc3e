#include "enqueue_options.h"

#include "option_checks.h"
#include "run_options.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sluice/tracing.h"
#include "utf8.h"

namespace sluice {
namespace {

constexpr int kMaxAttemptsLimit = 10'000;

bool Finite(absl::Duration d) {
  return d != absl::InfiniteDuration() && d != -absl::InfiniteDuration();
}

absl::Status Invalid(std::string_view owner, std::string_view problem) {
  return absl::InvalidArgumentError(StrCat(owner, ": ", problem));
}

absl::Status ValidateTiming(std::string_view owner, const EnqueueOptions& o) {
  if (o.delay && o.run_at) {
    return Invalid(owner, "delay and run_at are both set; give one of them");
  }
  if (o.delay && (*o.delay < absl::ZeroDuration() || !Finite(*o.delay))) {
    return Invalid(owner, StrCat("delay ", absl::FormatDuration(*o.delay),
                                 " is out of range; it must be >= 0 and "
                                 "finite"));
  }
  if (o.run_at && (*o.run_at == absl::InfiniteFuture() ||
                   *o.run_at == absl::InfinitePast())) {
    return Invalid(owner, "run_at must be a finite time");
  }
  return absl::OkStatus();
}

absl::Status ValidateOverrides(std::string_view owner,
                               const EnqueueOptions& o) {
  if (o.max_attempts &&
      (*o.max_attempts < 1 || *o.max_attempts > kMaxAttemptsLimit)) {
    return Invalid(owner, StrCat("max_attempts ", *o.max_attempts,
                                 " is out of range; it must be between 1 "
                                 "and ",
                                 kMaxAttemptsLimit));
  }
  if (o.timeout && (*o.timeout <= absl::ZeroDuration() ||
                    *o.timeout > absl::Hours(24 * 7))) {
    return Invalid(owner, StrCat("timeout ", absl::FormatDuration(*o.timeout),
                                 " is out of range; it must be positive and "
                                 "at most 168h"));
  }
  if (o.backoff && (o.backoff->delay < absl::ZeroDuration() ||
                    o.backoff->delay > kMaxRetryDelay)) {
    return Invalid(
        owner, StrCat("backoff delay ", absl::FormatDuration(o.backoff->delay),
                      " is out of range; it must be >= 0 and at "
                      "most ",
                      absl::FormatDuration(kMaxRetryDelay)));
  }
  return absl::OkStatus();
}

absl::Status ValidateDedupe(std::string_view owner, const Dedupe& d) {
  SLUICE_RETURN_IF_ERROR(ValidateKey(owner, "dedupe key", d.key));
  if (d.ttl && (*d.ttl <= absl::ZeroDuration() || !Finite(*d.ttl))) {
    return Invalid(owner, StrCat("dedupe ttl ", absl::FormatDuration(*d.ttl),
                                 " must be positive and finite (leave it "
                                 "unset for pending mode)"));
  }
  if (d.extend && !d.ttl) {
    return Invalid(owner,
                   "dedupe extend needs a ttl (a throttle window to extend)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateKey(std::string_view owner, std::string_view what,
                         std::string_view key) {
  if (key.empty()) return Invalid(owner, StrCat(what, " is empty"));
  if (key.size() > kMaxKeyBytes) {
    return Invalid(owner, StrCat(what, " is ", key.size(),
                                 " bytes; the limit is ", kMaxKeyBytes));
  }
  if (!IsValidUtf8(key) || key.find('\0') != std::string_view::npos) {
    return Invalid(owner, StrCat(what,
                                 " is not valid UTF-8 text (or holds a "
                                 "NUL byte)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateEnqueueOptions(std::string_view owner,
                                    const EnqueueOptions& o,
                                    size_t max_payload_bytes) {
  if (o.id) SLUICE_RETURN_IF_ERROR(ValidateKey(owner, "id", *o.id));
  if (o.priority) SLUICE_RETURN_IF_ERROR(ValidatePriority(owner, *o.priority));
  SLUICE_RETURN_IF_ERROR(ValidateTiming(owner, o));
  SLUICE_RETURN_IF_ERROR(ValidateOverrides(owner, o));
  if (!o.metadata.is_null()) {
    if (!o.metadata.is_object()) {
      return Invalid(owner, StrCat("metadata must be a JSON object or null, "
                                   "not ",
                                   JsonTypeName(o.metadata)));
    }
    SLUICE_RETURN_IF_ERROR(CheckJsonPayload(
        o.metadata, StrCat(owner, ": metadata"), max_payload_bytes));
  }
  if (o.dedupe) SLUICE_RETURN_IF_ERROR(ValidateDedupe(owner, *o.dedupe));
  if (o.keep) SLUICE_RETURN_IF_ERROR(ValidateKeep(owner, *o.keep));
  if (!o.traceparent.empty()) {
    if (absl::Status bad = ValidateTraceparent(o.traceparent); !bad.ok()) {
      return Invalid(owner, ToStd(bad.message()));
    }
  }
  return absl::OkStatus();
}

RunProgress::NewRunSettings SettingsFor(const CompiledFlow& flow,
                                        const EnqueueOptions& o, absl::Time now,
                                        std::string_view current_traceparent) {
  RunProgress::NewRunSettings settings;
  settings.priority = o.priority.value_or(flow.shape().options.priority);
  settings.external_key = o.id.value_or("");
  settings.metadata = o.metadata;
  RunOptions run_options;
  run_options.task = TaskOverrides{o.max_attempts, o.timeout, o.backoff};
  std::string_view traceparent =
      o.traceparent.empty() ? current_traceparent : o.traceparent;
  if (!traceparent.empty()) run_options.task.traceparent = traceparent;
  run_options.keep = o.keep;
  run_options.dedupe = o.dedupe;
  settings.options = RunOptionsToJson(run_options);
  if (o.delay) settings.not_before = now + *o.delay;
  if (o.run_at) settings.not_before = *o.run_at;
  return settings;
}

}  // namespace sluice
