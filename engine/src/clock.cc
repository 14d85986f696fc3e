#include "sluice/clock.h"

namespace sluice {
namespace {

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

Clock* Clock::Real() {
  static Clock* const clock = new RealClock();
  return clock;
}

absl::Time ManualClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void ManualClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  now_ += d;
}

void ManualClock::Set(absl::Time t) {
  absl::MutexLock lock(&mu_);
  now_ = t;
}

}  // namespace sluice
