// A schedule spec checked, stored and read back: the engine's encoding of
// ScheduleSpec into ScheduleRecord::definition, and the parsed cron
// expression and time zone a scheduler needs.
#ifndef SLUICE_ENGINE_SCHEDULE_SPEC_H_
#define SLUICE_ENGINE_SCHEDULE_SPEC_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cron.h"
#include "sluice/json.h"
#include "sluice/schedule.h"

namespace sluice {

// A spec ready to fire.
struct CompiledSchedule {
  ScheduleSpec spec;
  CronExpression cron;
  absl::TimeZone zone;
};

// OK, or kInvalidArgument: a group name is 1..100 characters of
// [A-Za-z0-9_.:-].
absl::Status ValidateScheduleGroup(std::string_view group);

// Checks everything about `spec` that needs no backend; errors start with
// `owner` (`schedule group "g" spec "name"`).
absl::StatusOr<CompiledSchedule> CompileSchedule(std::string_view owner,
                                                 const ScheduleSpec& spec,
                                                 size_t max_payload_bytes);

// The definition stored for a spec, and the spec read back from one
// (kInternal if it does not decode).
Json EncodeScheduleSpec(const ScheduleSpec& spec);
absl::StatusOr<ScheduleSpec> DecodeScheduleSpec(std::string_view name,
                                                const Json& definition);

}  // namespace sluice

#endif  // SLUICE_ENGINE_SCHEDULE_SPEC_H_
