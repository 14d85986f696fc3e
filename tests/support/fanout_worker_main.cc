// A worker process for the fan-out process test (fanout_process_test.cc).
//
//   sluice_test_fanout_worker BACKEND_URL WORKER_ID
//
// Serves FanParentFlow and FanChildJob (support/fanout_flows.h) on their
// shared queue with short leases and a fast sweeper, so the survivors of a
// SIGKILLed worker take its tasks back and re-drive its child reports within
// seconds. Prints "ready" once the worker runs; stops gracefully on SIGTERM.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include "sluice/backends.h"
#include "sluice/engine.h"
#include "support/fanout_flows.h"

namespace {

std::atomic<bool> g_stop{false};

void OnTerm(int) { g_stop = true; }

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "fan-out worker: %s\n", status.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sluice;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BACKEND_URL WORKER_ID\n", argv[0]);
    return 2;
  }
  signal(SIGTERM, OnTerm);
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(argv[1]);
  if (!backend.ok()) return Fail(backend.status());
  EngineOptions engine_options;
  engine_options.claim_grace = absl::Milliseconds(200);
  engine_options.recovery_grace = absl::Milliseconds(500);
  // Same-store child reports commit with the child's end and are relayed
  // whatever their age; only the sweeper's link repair waits this long,
  // and it re-reads up to 1,000 pending links a sweep, which a shorter
  // wait would make a large share of the run's work.
  engine_options.report_stale_after = absl::Seconds(3);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(**backend, engine_options);
  if (!engine.ok()) return Fail(engine.status());

  WorkerOptions options;
  options.worker_id = argv[2];
  options.concurrency = 8;
  options.batch_size = 25;
  options.poll_interval = absl::Milliseconds(20);
  options.heartbeat_interval = absl::Milliseconds(500);
  options.sweep_interval = absl::Milliseconds(500);
  const Flow parent = testing::FanParentFlow();
  const Job child = testing::FanChildJob();
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      (*engine)->StartWorker(WorkerSpec().Serve(parent).Serve(child), options);
  if (!worker.ok()) return Fail(worker.status());
  std::fputs("ready\n", stdout);
  std::fflush(stdout);
  while (!g_stop && !(*worker)->WaitFor(absl::Milliseconds(20))) {
  }
  absl::Status stopped = (*worker)->Stop();
  if (!stopped.ok()) return Fail(stopped);
  return (*worker)->Wait().ok() ? 0 : 3;
}
