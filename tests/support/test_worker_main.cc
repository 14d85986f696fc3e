// A worker process for the multi-process tests.
//
//   sluice_test_worker crashy DB LOG_FD     hangs on element 5's first
//                                           attempt after telling LOG_FD
//   sluice_test_worker shared DB LOG_PATH   runs "shared" jobs, appending
//                                           each run id to LOG_PATH
//
// Stops gracefully on SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/synchronization/mutex.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "support/test_flows.h"

namespace {

std::atomic<bool> g_stop{false};

void OnTerm(int) { g_stop = true; }

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "test worker: %s\n", status.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sluice;
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s crashy|shared DB LOG\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  signal(SIGTERM, OnTerm);
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend(std::string("sqlite:") + argv[2]);
  if (!backend.ok()) return Fail(backend.status());
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**backend);
  if (!engine.ok()) return Fail(engine.status());

  WorkerOptions options;
  options.poll_interval = absl::Milliseconds(10);
  options.heartbeat_interval = absl::Milliseconds(200);
  options.sweep_interval = absl::ZeroDuration();
  absl::Mutex log_mu;
  std::ofstream log;
  Flow flow("unset");
  if (mode == "crashy") {
    int fd = std::atoi(argv[3]);
    options.concurrency = 4;
    flow = testing::CrashyFlow(
        [fd](const Json& in, TaskContext& ctx) -> absl::StatusOr<Json> {
          if (in.as_int64() == 5 && ctx.attempt() == 1) {
            const char kHang[] = "hang\n";
            (void)!write(fd, kHang, sizeof(kHang) - 1);
            while (true) pause();  // killed here
          }
          return in.as_int64() * 10;
        });
  } else {
    log.open(argv[3], std::ios::app);
    options.concurrency = 4;
    flow = testing::SharedFlow(
        [&](const Json& in, TaskContext& ctx) -> absl::StatusOr<Json> {
          absl::SleepFor(absl::Milliseconds(2));  // simulated work
          absl::MutexLock lock(&log_mu);
          log << ctx.run_id().ToString() << "\n";
          log.flush();
          return in.at("run");
        });
  }
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      (*engine)->StartWorker(flow, options);
  if (!worker.ok()) return Fail(worker.status());
  std::printf("ready\n");
  std::fflush(stdout);
  while (!g_stop && !(*worker)->WaitFor(absl::Milliseconds(20))) {
  }
  absl::Status stopped = (*worker)->Stop();
  if (!stopped.ok()) return Fail(stopped);
  return (*worker)->Wait().ok() ? 0 : 3;
}
