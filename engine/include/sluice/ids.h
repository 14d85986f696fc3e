// Run identifiers: time-ordered (version 7) UUIDs.
#ifndef SLUICE_IDS_H_
#define SLUICE_IDS_H_

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sluice {

class RunId {
 public:
  RunId() = default;
  RunId(uint64_t high, uint64_t low) : high_(high), low_(low) {}

  // A fresh id: the current time in milliseconds, a counter, then 62
  // random bits. Each id is greater than the one before it in this process.
  // Thread-safe.
  static RunId Random();
  // Parses the canonical 36-character form; kInvalidArgument otherwise.
  static absl::StatusOr<RunId> Parse(std::string_view text);

  // The canonical lowercase 8-4-4-4-12 form.
  std::string ToString() const;
  bool IsNil() const { return high_ == 0 && low_ == 0; }
  uint64_t high() const { return high_; }
  uint64_t low() const { return low_; }

  friend auto operator<=>(const RunId&, const RunId&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const RunId& id) {
    return H::combine(std::move(h), id.high_, id.low_);
  }

 private:
  uint64_t high_ = 0;
  uint64_t low_ = 0;
};

// A random 15-character worker id. Thread-safe.
std::string NewWorkerId();

}  // namespace sluice

#endif  // SLUICE_IDS_H_
