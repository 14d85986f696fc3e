// Exponential backoff for a call that keeps failing.
#ifndef SLUICE_ENGINE_BACKOFF_H_
#define SLUICE_ENGINE_BACKOFF_H_

#include <algorithm>

#include "absl/time/time.h"

namespace sluice {

// The first retry waits kMin, each further one twice as long, up to kMax.
class CallBackoff {
 public:
  static constexpr absl::Duration kMin = absl::Milliseconds(50);
  static constexpr absl::Duration kMax = absl::Seconds(5);

  // Returns when the call may be tried again.
  absl::Time Failed(absl::Time now) {
    retry_at_ = now + delay_;
    delay_ = std::min(delay_ * 2, kMax);
    return retry_at_;
  }
  void Succeeded() {
    delay_ = kMin;
    retry_at_ = absl::InfinitePast();
  }
  bool Ready(absl::Time now) const { return now >= retry_at_; }
  absl::Time retry_at() const { return retry_at_; }

 private:
  absl::Duration delay_ = kMin;
  absl::Time retry_at_ = absl::InfinitePast();
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_BACKOFF_H_
