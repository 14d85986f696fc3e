// The overview's data: every queue's counts and the live workers, read at
// most once a second however many pages ask, plus each queue's throughput
// per minute, from the growth of its completed and failed task counts
// between samples (docs/decisions/0038-dashboard.md).
#ifndef SLUICE_DASHBOARD_OVERVIEW_SAMPLER_H_
#define SLUICE_DASHBOARD_OVERVIEW_SAMPLER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sluice/engine.h"
#include "sluice/json.h"

namespace sluice::dashboard {

class OverviewSampler {
 public:
  // A snapshot younger than this is served as is; and younger than
  // kReadShare times as long as reading it took, so that on a large store
  // the overview takes at most about a tenth of the store's time.
  static constexpr absl::Duration kMaxAge = absl::Seconds(1);
  static constexpr int kReadShare = 10;
  // Without viewers, a background sample this often keeps the
  // throughput minutes true.
  static constexpr absl::Duration kSampleEvery = absl::Seconds(15);
  static constexpr int kMinutes = 15;

  explicit OverviewSampler(Engine& engine) : engine_(engine) {}
  ~OverviewSampler();  // stops the background sampler

  // The /api/overview body. The first call starts the background sampler.
  absl::StatusOr<Json> Overview();
  // Ends the background sampler; idempotent.
  void Stop();

 private:
  struct Snapshot {
    absl::Time now;  // the engine clock's
    std::vector<QueueStatus> queues;
    std::vector<WorkerRecord> workers;  // live ones
  };
  struct Minute {
    int64_t completed = 0;
    int64_t failed = 0;
  };

  absl::StatusOr<std::shared_ptr<const Snapshot>> Current();
  absl::StatusOr<std::shared_ptr<const Snapshot>> Read();
  // Adds the counts' growth since the last sample to the current minute.
  void Record(const Snapshot& snapshot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Json ToJson(const Snapshot& snapshot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();

  Engine& engine_;
  absl::Mutex mu_;
  std::shared_ptr<const Snapshot> latest_ ABSL_GUARDED_BY(mu_);
  absl::Time latest_at_ ABSL_GUARDED_BY(mu_);  // real time it was read
  absl::Duration max_age_ ABSL_GUARDED_BY(mu_) = kMaxAge;
  bool refreshing_ ABSL_GUARDED_BY(mu_) = false;
  // Per queue: the completed and failed counts at the last sample.
  std::map<std::string, Minute> last_counts_ ABSL_GUARDED_BY(mu_);
  // Per queue: growth per minute (minute index since the epoch).
  std::map<std::string, std::map<int64_t, Minute>> minutes_
      ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sluice::dashboard

#endif  // SLUICE_DASHBOARD_OVERVIEW_SAMPLER_H_
