// Checks of job and run options shared by flows, jobs and the enqueue path.
// Each returns OK, or kInvalidArgument starting with `owner`.
#ifndef SLUICE_ENGINE_OPTION_CHECKS_H_
#define SLUICE_ENGINE_OPTION_CHECKS_H_

#include <string_view>

#include "absl/status/status.h"
#include "sluice/flow.h"

namespace sluice {

// Counts and ages >= 0 (ages finite).
absl::Status ValidateKeep(std::string_view owner, const Keep& keep);
// In [kMinPriority, kMaxPriority].
absl::Status ValidatePriority(std::string_view owner, int priority);

}  // namespace sluice

#endif  // SLUICE_ENGINE_OPTION_CHECKS_H_
