// Physical queue names: canonical lowercase [a-z0-9_], at most 47 characters
// (pgmq derives table names from them that must fit Postgres' 63).
#ifndef SLUICE_ENGINE_QUEUE_NAME_H_
#define SLUICE_ENGINE_QUEUE_NAME_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice::queue_name {

inline constexpr size_t kMaxLength = 47;

// The flow-mode queue: lower(flow_slug).
std::string ForFlow(std::string_view flow_slug);

// A step-mode queue: lower(flow__step) when it fits kMaxLength, else
// lower(flow__<step_index>); kInvalidArgument naming the step and both
// lengths when neither fits.
absl::StatusOr<std::string> ForStep(std::string_view flow_slug,
                                    std::string_view step_slug, int step_index);

// OK, or kInvalidArgument naming the queue and the rule it breaks.
absl::Status Validate(std::string_view name);

}  // namespace sluice::queue_name

#endif  // SLUICE_ENGINE_QUEUE_NAME_H_
