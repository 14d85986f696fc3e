// Which claims try the server first (OneTripClaims::ClaimAndCommit). A
// batch that needs the engine's judgement wastes that round trip, and the
// engine then claims it itself; so after one, the next claims on that
// queue go straight to the engine's claim. A queue whose batches keep
// needing judgement (every job overriding its timeout, say) then pays the
// wasted trip once in kEngineClaimsAfterFallback + 1 claims, not on each.
#ifndef SLUICE_ENGINE_SERVER_CLAIM_BACKOFF_H_
#define SLUICE_ENGINE_SERVER_CLAIM_BACKOFF_H_

#include <atomic>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "sluice/internal/strings.h"

namespace sluice {

class ServerClaimBackoff {
 public:
  static constexpr int kEngineClaimsAfterFallback = 16;

  // Whether a claim on `queue` goes straight to the engine's claim; each
  // such answer uses up one of the claims FellBack granted.
  bool SkipServer(std::string_view queue) {
    // No queue has fallen back lately: no lock on the claim path.
    if (queues_.load(std::memory_order_relaxed) == 0) return false;
    absl::MutexLock lock(&mu_);
    auto it = left_.find(ToAbsl(queue));
    if (it == left_.end()) return false;
    if (--it->second == 0) {
      left_.erase(it);
      queues_.fetch_sub(1, std::memory_order_relaxed);
    }
    return true;
  }

  // A claim on `queue` tried the server and fell back.
  void FellBack(std::string_view queue) {
    absl::MutexLock lock(&mu_);
    auto [it, added] =
        left_.try_emplace(std::string(queue), kEngineClaimsAfterFallback);
    if (added) {
      queues_.fetch_add(1, std::memory_order_relaxed);
    } else {
      it->second = kEngineClaimsAfterFallback;
    }
  }

 private:
  std::atomic<int> queues_{0};  // entries in left_
  absl::Mutex mu_;
  // Claims left to send to the engine's claim, by queue.
  absl::flat_hash_map<std::string, int> left_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_SERVER_CLAIM_BACKOFF_H_
