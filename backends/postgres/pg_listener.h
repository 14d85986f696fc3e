// LISTEN/NOTIFY wake-ups for WatchQueue().
//
// A transaction that sends a message visible at once (or makes one visible
// again) queues `SELECT pg_notify('sluice_q_<queue>', '')`; the server
// delivers it at commit, to every process, and collapses repeats within a
// transaction. Each backend has one listener: a dedicated connection, made
// when the first watch arrives, and a thread that waits on its socket (with
// a timeout, so it can stop) and pokes the watchers of each channel that
// fired. Connecting waits at most the connect timeout (pg_connect.h), which
// is also how long destroying the listener may wait for a connect in
// progress. When the connection is lost the thread reconnects with backoff
// (0.1 s doubling to 5 s), LISTENs again and pokes every watcher once,
// since messages may have arrived meanwhile; a newly LISTENed channel's
// watchers are poked once too. Pokes are hints: workers still poll.
//
// Thread-safe. Lock order: poke_mu_, then mu_. A poke must not create or
// destroy a watch of the same backend.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_LISTENER_H_
#define SLUICE_BACKENDS_POSTGRES_PG_LISTENER_H_

#include <libpq-fe.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "pg_connect.h"
#include "sluice/backend.h"
#include "sluice/postgres.h"

namespace sluice::postgres_internal {

class QueueListener {
 public:
  QueueListener(std::string url, const PostgresOptions& options);
  // Stops the thread and closes the connection. Every watch must be gone.
  ~QueueListener();
  QueueListener(const QueueListener&) = delete;
  QueueListener& operator=(const QueueListener&) = delete;

  // Starts the thread on first use.
  std::unique_ptr<QueueWatch> Watch(std::string_view queue,
                                    std::function<void()> poke);

 private:
  class WatchHandle;
  struct Watcher {
    std::string channel;
    std::function<void()> poke;
  };

  // Removes a watch; waits for a poke in progress.
  void Remove(uint64_t id);
  void Wake();
  void Run();
  // LISTENs to every watched channel not yet listened to, UNLISTENs the
  // rest. Returns the channels newly listened to; false on failure.
  bool SyncChannels(absl::flat_hash_set<std::string>& listened,
                    std::vector<std::string>& added);
  // Reads arrived notifications; false if the connection failed.
  bool ReadNotifications(absl::flat_hash_set<std::string>& fired);
  // Pokes the watchers of `channels` (all of them if `everyone`).
  void Poke(const absl::flat_hash_set<std::string>& channels, bool everyone);
  void Disconnect();
  // Sleeps up to `timeout`, or less if woken.
  void WaitForWake(absl::Duration timeout);

  const std::string url_;
  const PostgresOptions options_;
  int wake_pipe_[2] = {-1, -1};
  ConnectionHandle connection_{nullptr, &PQfinish};  // only the thread's

  absl::Mutex poke_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Watcher> watchers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_LISTENER_H_
