// Add-and-return on the store's int counters.
#ifndef SLUICE_BACKENDS_MEMORY_COUNTER_H_
#define SLUICE_BACKENDS_MEMORY_COUNTER_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "sluice/internal/strings.h"

namespace sluice::memory {

// value + delta, or nullopt if the sum does not fit an int.
inline std::optional<int> CheckedAdd(int value, int delta) {
  const int64_t sum = int64_t{value} + delta;
  if (sum < std::numeric_limits<int>::min() ||
      sum > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  return static_cast<int>(sum);
}

// A counter that far off means the caller's bookkeeping is broken.
inline absl::Status CounterOverflow(std::string_view counter, int value,
                                    int delta) {
  return absl::OutOfRangeError(
      StrCat("adding ", delta, " to ", counter, " (", value, ") overflows"));
}

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_COUNTER_H_
