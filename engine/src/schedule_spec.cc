#include "schedule_spec.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "enqueue_options.h"
#include "sluice/flow.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

constexpr size_t kMaxScheduleNameLength = 100;

absl::Status ValidateName(std::string_view what, std::string_view name) {
  if (name.empty() || name.size() > kMaxScheduleNameLength) {
    return absl::InvalidArgumentError(
        StrCat(what, " \"", name, "\" must be 1..", kMaxScheduleNameLength,
               " characters"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' &&
        c != '.' && c != ':' && c != '-') {
      return absl::InvalidArgumentError(StrCat(
          what, " \"", name, "\" may only hold letters, digits and _ . : -"));
    }
  }
  return absl::OkStatus();
}

// The scheduler owns a run's id and timing; retention belongs to the target.
absl::Status RefuseSchedulerOwnedOptions(std::string_view owner,
                                         const EnqueueOptions& options) {
  const char* refused = options.id       ? "id"
                        : options.delay  ? "delay"
                        : options.run_at ? "run_at"
                        : options.dedupe ? "dedupe"
                        : options.keep   ? "keep"
                                         : nullptr;
  if (refused == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(
      owner, ": options.", refused,
      " is not allowed on a schedule (the scheduler sets each run's id from "
      "its fire time; set keep on the job or flow)"));
}

int64_t Micros(absl::Duration d) { return absl::ToInt64Microseconds(d); }

}  // namespace

std::string_view ToString(Misfire misfire) {
  return misfire == Misfire::kRunOnce ? "run_once" : "skip";
}

absl::Status ValidateScheduleGroup(std::string_view group) {
  return ValidateName("schedule group", group);
}

absl::StatusOr<CompiledSchedule> CompileSchedule(std::string_view owner,
                                                 const ScheduleSpec& spec,
                                                 size_t max_payload_bytes) {
  SLUICE_RETURN_IF_ERROR(ValidateName("schedule name", spec.name));
  if (absl::Status target = ValidateSlug(spec.target, "target"); !target.ok()) {
    return absl::InvalidArgumentError(
        StrCat(owner, ": ", target.message(), " (name a job or a flow alias)"));
  }
  absl::StatusOr<CronExpression> cron = CronExpression::Parse(spec.cron);
  if (!cron.ok()) {
    return absl::InvalidArgumentError(
        StrCat(owner, ": ", cron.status().message()));
  }
  absl::TimeZone zone;
  if (spec.time_zone.empty() || !absl::LoadTimeZone(spec.time_zone, &zone)) {
    return absl::InvalidArgumentError(
        StrCat(owner, ": unknown time zone \"", spec.time_zone,
               "\"; use an IANA name such as \"Europe/Berlin\" or \"UTC\""));
  }
  SLUICE_RETURN_IF_ERROR(CheckJsonPayload(
      spec.payload, StrCat(owner, ": payload"), max_payload_bytes));
  SLUICE_RETURN_IF_ERROR(RefuseSchedulerOwnedOptions(owner, spec.options));
  SLUICE_RETURN_IF_ERROR(
      ValidateEnqueueOptions(owner, spec.options, max_payload_bytes));
  if (spec.misfire_grace <= absl::ZeroDuration() ||
      spec.misfire_grace > absl::Hours(24 * 366)) {
    return absl::InvalidArgumentError(StrCat(
        owner, ": misfire_grace must be positive and at most 366 days, not ",
        absl::FormatDuration(spec.misfire_grace)));
  }
  return CompiledSchedule{spec, *std::move(cron), zone};
}

Json EncodeScheduleSpec(const ScheduleSpec& spec) {
  boost::json::object options;
  const EnqueueOptions& o = spec.options;
  if (o.priority) options["priority"] = *o.priority;
  if (o.max_attempts) options["max_attempts"] = *o.max_attempts;
  if (o.timeout) options["timeout_us"] = Micros(*o.timeout);
  if (o.backoff) {
    options["backoff"] = {{"kind", std::string(ToString(o.backoff->kind))},
                          {"delay_us", Micros(o.backoff->delay)}};
  }
  options["metadata"] = o.metadata;
  return boost::json::object{
      {"target", spec.target},
      {"cron", spec.cron},
      {"time_zone", spec.time_zone},
      {"payload", spec.payload},
      {"misfire", std::string(ToString(spec.misfire))},
      {"misfire_grace_us", Micros(spec.misfire_grace)},
      {"options", std::move(options)},
  };
}

absl::StatusOr<ScheduleSpec> DecodeScheduleSpec(std::string_view name,
                                                const Json& definition) {
  auto corrupt = [&](std::string_view problem) {
    return absl::InternalError(
        StrCat("stored schedule \"", name, "\" does not decode: ", problem));
  };
  const boost::json::object* d = definition.if_object();
  if (d == nullptr) return corrupt("not an object");
  ScheduleSpec spec;
  spec.name = std::string(name);
  try {
    spec.target = std::string(d->at("target").as_string());
    spec.cron = std::string(d->at("cron").as_string());
    spec.time_zone = std::string(d->at("time_zone").as_string());
    spec.payload = d->at("payload");
    spec.misfire = d->at("misfire").as_string() == "run_once"
                       ? Misfire::kRunOnce
                       : Misfire::kSkip;
    spec.misfire_grace =
        absl::Microseconds(d->at("misfire_grace_us").as_int64());
    const boost::json::object& o = d->at("options").as_object();
    if (const Json* v = o.if_contains("priority")) {
      spec.options.priority = static_cast<int>(v->as_int64());
    }
    if (const Json* v = o.if_contains("max_attempts")) {
      spec.options.max_attempts = static_cast<int>(v->as_int64());
    }
    if (const Json* v = o.if_contains("timeout_us")) {
      spec.options.timeout = absl::Microseconds(v->as_int64());
    }
    if (const Json* v = o.if_contains("backoff")) {
      const boost::json::object& b = v->as_object();
      spec.options.backoff =
          Backoff{.kind = b.at("kind").as_string() == "fixed"
                              ? BackoffKind::kFixed
                              : BackoffKind::kExponential,
                  .delay = absl::Microseconds(b.at("delay_us").as_int64())};
    }
    spec.options.metadata = o.at("metadata");
  } catch (const std::exception& e) {
    return corrupt(e.what());
  }
  return spec;
}

}  // namespace sluice
