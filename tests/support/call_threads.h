// Threads that make engine calls at once, for concurrency tests. Each
// thread names the call it is in and every status a call returns is
// logged; joining gives up after a deadline, so a deadlock fails the test
// naming where each thread is stuck instead of hanging it.
//
//   CallThreads threads;
//   threads.Start("claimer", [&](CallThreads::Slot& slot) {
//     while (!stop) slot.Call("Claim", [&] { return engine.Claim(request); });
//   });
//   stop = true;
//   if (!threads.JoinWithin(absl::Seconds(30))) ... threads.Stuck() ...
//   EXPECT_EQ(threads.unexpected_count(), 0) << threads.unexpected();
#ifndef SLUICE_TESTS_SUPPORT_CALL_THREADS_H_
#define SLUICE_TESTS_SUPPORT_CALL_THREADS_H_

#include <atomic>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sluice/internal/strings.h"

namespace sluice::testing {

inline const absl::Status& StatusOf(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& result) {
  return result.status();
}

// Thread-safe. The threads must have finished (JoinWithin returned true)
// before it is destroyed.
class CallThreads {
 public:
  class Slot {
   public:
    // Runs `call` and records the status it returns; codes in `expected`
    // are not failures.
    template <typename F>
    auto Call(const char* name, F&& call,
              std::initializer_list<absl::StatusCode> expected = {}) {
      current_.store(name);
      auto result = call();
      current_.store(nullptr);
      owner_.Record(name, StatusOf(result), expected);
      return result;
    }

   private:
    friend class CallThreads;
    Slot(CallThreads& owner, std::string name)
        : owner_(owner), name_(std::move(name)) {}
    CallThreads& owner_;
    const std::string name_;
    std::atomic<const char*> current_{nullptr};
  };

  CallThreads() = default;
  CallThreads(const CallThreads&) = delete;
  CallThreads& operator=(const CallThreads&) = delete;

  void Start(std::string name, std::function<void(Slot&)> body) {
    Slot* slot;
    {
      absl::MutexLock lock(&mu_);
      slots_.push_back(std::unique_ptr<Slot>(new Slot(*this, std::move(name))));
      slot = slots_.back().get();
      ++running_;
    }
    threads_.emplace_back([this, slot, body = std::move(body)] {
      body(*slot);
      absl::MutexLock lock(&mu_);
      --running_;
    });
  }

  // Waits up to `timeout` for every thread to finish; joins them and
  // returns true if they did.
  bool JoinWithin(absl::Duration timeout) {
    {
      absl::MutexLock lock(&mu_);
      auto finished = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return running_ == 0;
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&finished), timeout)) {
        return false;
      }
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    return true;
  }

  // The threads still inside a call, and the call.
  std::string Stuck() const {
    absl::MutexLock lock(&mu_);
    std::string stuck;
    for (const std::unique_ptr<Slot>& slot : slots_) {
      if (const char* call = slot->current_.load()) {
        StrAppend(&stuck, stuck.empty() ? "" : ", ", slot->name_, " in ", call);
      }
    }
    return stuck;
  }

  int aborted() const {
    absl::MutexLock lock(&mu_);
    return aborted_;
  }
  int unexpected_count() const {
    absl::MutexLock lock(&mu_);
    return unexpected_count_;
  }
  // The first few unexpected statuses, one per line.
  std::string unexpected() const {
    absl::MutexLock lock(&mu_);
    std::string all;
    for (const std::string& u : unexpected_) StrAppend(&all, "\n  ", u);
    return all;
  }

 private:
  void Record(const char* call, const absl::Status& status,
              std::initializer_list<absl::StatusCode> expected) {
    if (status.ok()) return;
    absl::MutexLock lock(&mu_);
    if (status.code() == absl::StatusCode::kAborted) ++aborted_;
    for (absl::StatusCode code : expected) {
      if (status.code() == code) return;
    }
    ++unexpected_count_;
    if (unexpected_.size() < 10) {
      unexpected_.push_back(StrCat(call, ": ", status.ToString()));
    }
  }

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int aborted_ ABSL_GUARDED_BY(mu_) = 0;
  int unexpected_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> unexpected_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;  // used by the test's thread only
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_CALL_THREADS_H_
