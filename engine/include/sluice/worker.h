// A worker: serves one physical queue in the host's process.
//
// It claims batches, runs handlers on its own threads up to a concurrency
// limit, records results, applies its reports, extends leases while handlers
// run, and sweeps stale reports and stalled tasks. It wakes on an in-process
// signal when tasks are queued and polls as a fallback.
#ifndef SLUICE_WORKER_H_
#define SLUICE_WORKER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace sluice {

struct WorkerOptions {
  int concurrency = 10;  // handlers running at once
  // Messages read per claim. The worker holds at most
  // max(concurrency, batch_size) claimed tasks that wait for a handler, run,
  // or wait for their results to be recorded, plus the batch of results
  // being recorded (decision 0060). A batch larger than the concurrency
  // prefetches; leases of waiting tasks are extended.
  int batch_size = 10;
  absl::Duration poll_interval = absl::Seconds(1);
  // How often leases of claimed tasks are extended and the worker's
  // registration refreshed. Keep it well under the shortest step timeout.
  absl::Duration heartbeat_interval = absl::Seconds(5);
  // How often stale reports are applied and stalled tasks recovered;
  // zero disables the sweeper.
  absl::Duration sweep_interval = absl::Seconds(5);
  // How long Stop() lets running handlers finish and their results be
  // recorded. Stop() returns by then: handlers still running are abandoned
  // (their leases lapse and stall recovery takes their tasks back).
  absl::Duration drain_timeout = absl::Seconds(30);
  std::string worker_id;  // random if empty
};

struct WorkerStats {
  int64_t claimed = 0;
  int64_t completed = 0;
  int64_t failed = 0;  // failed attempts, retried or not
  int64_t stale = 0;   // results that no longer owned their task
  // Attempts that ended cancelled: their run asked them to stop.
  int64_t cancelled = 0;
  // Claimed tasks given back unstarted when the worker stopped.
  int64_t released = 0;
  // Results the backend refused to store; a failure naming the refusal was
  // stored in their place (also counted in `failed`).
  int64_t rejected = 0;
  // Results never stored: the drain deadline passed first, or the backend
  // refused even the failure. Stall recovery takes their tasks back.
  int64_t unrecorded = 0;
  // Tasks whose handler was still running, or not yet started, when Stop()
  // gave up at the drain deadline. Stall recovery takes them back.
  int64_t abandoned = 0;
};

// Thread-safety: safe for concurrent use.
class Worker {
 public:
  virtual ~Worker() = default;  // stops, as Stop() does

  // Stops claiming, lets running handlers finish and records their results,
  // then marks the worker stopped. Returns by drain_timeout (plus at most one
  // backend call in progress): past it, handlers still running are abandoned
  // and logged with their task, results not yet stored are dropped, and
  // Stop() returns kDeadlineExceeded saying how many. An abandoned handler's
  // thread is detached; it holds what it uses, so it may outlive the worker
  // and the engine, and its late result is dropped. Idempotent: later calls
  // return the first call's status.
  virtual absl::Status Stop() = 0;
  // Blocks until the worker stops, by Stop() or a fatal error. Returns the
  // fatal error; else kDeadlineExceeded if the drain abandoned handlers or
  // dropped results (see stats()); else OK.
  virtual absl::Status Wait() = 0;
  // Waits at most `timeout`; false if the worker is still running.
  virtual bool WaitFor(absl::Duration timeout) = 0;

  virtual const std::string& id() const = 0;
  virtual const std::string& queue() const = 0;
  virtual WorkerStats stats() const = 0;
};

}  // namespace sluice

#endif  // SLUICE_WORKER_H_
