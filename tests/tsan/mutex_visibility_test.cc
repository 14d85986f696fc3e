// Proof that the ThreadSanitizer build sees absl::Mutex (built only with
// SLUICE_TSAN, scripts/tsan.sh). Against Debian's uninstrumented Abseil, TSan
// reports a race on a counter that two threads only touch under an
// absl::MutexLock; against Abseil built with TSan it must not, while the
// same counter without the lock must still be reported.
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace sluice::testing {
namespace {

constexpr int kAdds = 10000;

// Two threads each add kAdds to one counter, under `mu` when given.
long CountOnTwoThreads(absl::Mutex* mu) {
  long counter = 0;
  auto add = [&] {
    for (int i = 0; i < kAdds; ++i) {
      if (mu != nullptr) {
        absl::MutexLock lock(mu);
        ++counter;
      } else {
        ++counter;
      }
    }
  };
  std::thread a(add);
  std::thread b(add);
  a.join();
  b.join();
  return counter;
}

TEST(TsanSeesAbslMutex, CounterUnderMutexLock_NoReport) {
  // A report would end this process (halt_on_error) and fail the test.
  absl::Mutex mu;
  EXPECT_EQ(CountOnTwoThreads(&mu), 2 * kAdds);
}

TEST(TsanSeesAbslMutex, HandOffThroughNotificationAndAwait_NoReport) {
  absl::Mutex mu;
  int value = 0;
  bool ready = false;
  absl::Notification done;
  std::thread producer([&] {
    value = 42;  // published by the unlock below
    absl::MutexLock lock(&mu);
    ready = true;
  });
  std::thread consumer([&] {
    mu.LockWhen(absl::Condition(&ready));
    mu.Unlock();
    EXPECT_EQ(value, 42);
    done.Notify();
  });
  done.WaitForNotification();
  producer.join();
  consumer.join();
}

TEST(TsanSeesAbslMutexDeathTest, CounterWithoutLock_IsReported) {
  // TSan exits with 66 after its first report (halt_on_error=1).
  EXPECT_EXIT(CountOnTwoThreads(nullptr), ::testing::ExitedWithCode(66),
              "ThreadSanitizer: data race");
}

}  // namespace
}  // namespace sluice::testing
