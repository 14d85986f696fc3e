// Time, as the engine and every backend see it.
//
// No backend reads the wall clock on its own: every operation takes "now"
// from the engine's Clock. Tests inject a ManualClock and move time forward
// to exercise delays, timeouts, stalls and schedules without sleeping.
#ifndef SLUICE_CLOCK_H_
#define SLUICE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace sluice {

// Safe for concurrent use.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // The process-wide real-time clock. Never destroyed.
  static Clock* Real();
};

// A clock that moves only when told to. Safe for concurrent use.
class ManualClock : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000))
      : now_(start) {}

  absl::Time Now() const override;
  void Advance(absl::Duration d);
  void Set(absl::Time t);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice

#endif  // SLUICE_CLOCK_H_
