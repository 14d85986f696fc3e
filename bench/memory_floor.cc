#include "memory_floor.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "boost/json.hpp"
#include "sluice/ids.h"

namespace sluice::bench {
namespace {

using Json = boost::json::value;

enum class Status : uint8_t { kQueued, kStarted, kCompleted };

// How the rows hold a payload. Owned: a copy of its own, as every backend's
// records (and the engine's public Json values) do today. Shared: one
// immutable, counted value that the caller hands over, the rows and the
// handler share, and nobody copies.
struct OwnedPayloads {
  using Payload = Json;
  static Payload FromCaller(const Json& v) { return v; }  // the caller keeps v
  static Payload Made(Json v) { return v; }
  static Payload Another(const Payload& p) { return p; }
  static const Json& Value(const Payload& p) { return p; }
};
struct SharedPayloads {
  using Payload = std::shared_ptr<const Json>;
  static Payload FromCaller(Json& v) {
    return std::make_shared<const Json>(std::move(v));
  }
  static Payload Made(Json v) {
    return std::make_shared<const Json>(std::move(v));
  }
  static Payload Another(const Payload& p) { return p; }
  static const Json& Value(const Payload& p) { return *p; }
};

template <typename P>
struct Run {
  std::string flow;
  Status status = Status::kStarted;
  typename P::Payload input;
  std::optional<typename P::Payload> output;
  absl::Time started_at, finished_at;
};

template <typename P>
struct Task {
  RunId run;
  Status status = Status::kQueued;
  int attempts = 0;
  typename P::Payload input;
  std::optional<typename P::Payload> output;
  int64_t message_id = 0;
  absl::Time queued_at;
  std::optional<absl::Time> started_at, finished_at, stall_at;
  std::string worker_id;
};

struct Message {
  RunId task;  // a one-step job's task is its run's only one
  int read_count = 0;
  absl::Time visible_at;
};

template <typename P>
struct Claimed {
  int64_t message_id;
  RunId run;
  typename P::Payload input;
};

// The rows, under one mutex, as the memory store keeps them.
template <typename P>
class Store {
 public:
  void Start(std::vector<Json>& inputs, absl::Time now) {
    absl::MutexLock lock(&mu_);
    for (Json& input : inputs) {
      RunId id = RunId::Random();
      Run<P>& run = runs_[id];
      run.flow = "bench_w1";
      run.input = P::FromCaller(input);
      run.started_at = now;
      by_start_.insert({now, id});
      Task<P>& task = tasks_[id];
      task.run = id;
      task.input = P::Made(boost::json::object{{"run", P::Value(run.input)}});
      task.message_id = ++last_message_;
      task.queued_at = now;
      messages_.emplace(task.message_id, Message{id, 0, now});
      ready_.push_back(task.message_id);
    }
  }

  std::vector<Claimed<P>> Claim(int limit, absl::Time now) {
    std::vector<Claimed<P>> claimed;
    absl::MutexLock lock(&mu_);
    while (static_cast<int>(claimed.size()) < limit && !ready_.empty()) {
      int64_t id = ready_.front();
      ready_.pop_front();
      Message& message = messages_.at(id);
      ++message.read_count;
      message.visible_at = now + absl::Seconds(30);
      read_.insert({message.visible_at, id});
      Task<P>& task = tasks_.at(message.task);
      task.status = Status::kStarted;
      ++task.attempts;
      task.started_at = now;
      task.stall_at = message.visible_at;
      task.worker_id = "floor-worker";
      claimed.push_back({id, message.task, P::Another(task.input)});
    }
    return claimed;
  }

  void Finish(std::vector<std::pair<Claimed<P>, Json>>& done, absl::Time now) {
    absl::MutexLock lock(&mu_);
    for (auto& [claim, output] : done) {
      Message& message = messages_.at(claim.message_id);
      read_.erase({message.visible_at, claim.message_id});
      messages_.erase(claim.message_id);
      Task<P>& task = tasks_.at(claim.run);
      task.status = Status::kCompleted;
      task.finished_at = now;
      task.stall_at.reset();
      task.output = P::Made(std::move(output));
      Run<P>& run = runs_.at(claim.run);
      run.output = P::Another(*task.output);  // the run's output is the step's
      run.status = Status::kCompleted;
      run.finished_at = now;
      by_finish_.insert({now, claim.run});
    }
  }

 private:
  absl::Mutex mu_;
  absl::node_hash_map<RunId, Run<P>> runs_;
  absl::node_hash_map<RunId, Task<P>> tasks_;
  absl::flat_hash_map<int64_t, Message> messages_;
  std::deque<int64_t> ready_;
  absl::btree_set<std::pair<absl::Time, int64_t>> read_;
  absl::btree_set<std::pair<absl::Time, RunId>> by_start_, by_finish_;
  int64_t last_message_ = 0;
};

template <typename P>
void Produce(Store<P>& store, int jobs) {
  constexpr int kBatch = 500;  // W1's StartRuns batches
  for (int first = 0; first < jobs; first += kBatch) {
    std::vector<Json> inputs;
    for (int i = first; i < jobs && i < first + kBatch; ++i) {
      inputs.push_back(boost::json::object{{"n", i}});
    }
    store.Start(inputs, absl::Now());
  }
}

template <typename P>
void Work(Store<P>& store, int jobs) {
  constexpr int kClaimBatch = 100;  // W1's worker batch
  int finished = 0;
  while (finished < jobs) {
    std::vector<Claimed<P>> claimed = store.Claim(kClaimBatch, absl::Now());
    if (claimed.empty()) {
      std::this_thread::yield();
      continue;
    }
    std::vector<std::pair<Claimed<P>, Json>> done;
    done.reserve(claimed.size());
    for (Claimed<P>& c : claimed) {
      Json output = P::Value(c.input).at("run");  // W1's handler
      done.emplace_back(std::move(c), std::move(output));
    }
    finished += static_cast<int>(done.size());
    store.Finish(done, absl::Now());
  }
}

template <typename P>
double Floor(int jobs) {
  Store<P> store;
  absl::Time start = absl::Now();
  std::thread worker([&] { Work(store, jobs); });
  Produce(store, jobs);
  worker.join();
  return jobs / absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace

double MemoryModelFloor(int jobs, bool shared_payloads) {
  return shared_payloads ? Floor<SharedPayloads>(jobs)
                         : Floor<OwnedPayloads>(jobs);
}

}  // namespace sluice::bench
