// A worker process for the multi-process tests.
//
//   sluice_test_worker MODE BACKEND_URL [NAME=VALUE...]
//
// BACKEND_URL is what OpenBackend() takes (sqlite:PATH, postgresql://...).
// Modes, each serving one flow of support/test_flows.h:
//
//   crashy    fd=N: hangs on element 5's first attempt after writing "hang"
//             to file descriptor N
//   shared    log=PATH: appends each run id to PATH
//   fleet     log=PATH: appends each run id to PATH before returning. With
//             hang_after=N, every call after the first N appends its run id,
//             waits until the worker has recorded a completion, writes
//             "hang" to stdout (once) and blocks until the process is
//             killed. Short leases and a fast sweeper, so the survivors of
//             a killed worker take its tasks back within seconds.
//   jobs      serves ProcJob. log=PATH: appends "RUN_ID PRIORITY CLAIM_US
//             ATTEMPT" to PATH before returning (the payload's "p" is the
//             priority; the claim time is the deadline minus the lease);
//             hang_after=N as for fleet.
//   rollout   version=1|2: serves RolloutV1 or RolloutV2 (alias "rollout");
//             each handler waits until the file gate=PATH exists (if
//             given), sleeps delay_ms=N (default 20) and returns
//             {"v": VERSION, "n": n} (v2's "finish" passes "work"'s on).
//   announce  writes "started RUN_ID" to stdout as each handler starts. It
//             polls and heartbeats only once a minute and never sweeps, so
//             whatever wakes it sooner is a notification.
//
// Options for every mode: worker_id=ID, concurrency=N.
// Prints "ready" once the worker runs. Stops gracefully on SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
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

// Writes one line to stdout at once; handlers call it from many threads.
void Say(const std::string& line) {
  static absl::Mutex mu;
  absl::MutexLock lock(&mu);
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sluice;
  if (argc < 3) {
    std::fprintf(
        stderr,
        "usage: %s crashy|shared|fleet|jobs|rollout|announce BACKEND_URL "
        "[NAME=VALUE...]\n",
        argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  std::map<std::string, std::string> args;
  for (int i = 3; i < argc; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "test worker: expected NAME=VALUE, got %s\n",
                   argv[i]);
      return 2;
    }
    args[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  auto int_arg = [&](const std::string& name, int fallback) {
    auto it = args.find(name);
    return it == args.end() ? fallback : std::atoi(it->second.c_str());
  };

  signal(SIGTERM, OnTerm);
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(argv[2]);
  if (!backend.ok()) return Fail(backend.status());

  EngineOptions engine_options;
  WorkerOptions options;
  options.worker_id = args["worker_id"];
  options.concurrency = int_arg("concurrency", 4);
  options.poll_interval = absl::Milliseconds(10);
  options.heartbeat_interval = absl::Milliseconds(200);
  options.sweep_interval = absl::ZeroDuration();
  absl::Mutex log_mu;
  std::ofstream log;
  if (args.contains("log")) log.open(args["log"], std::ios::app);
  auto append_to_log = [&](const RunId& run) {
    absl::MutexLock lock(&log_mu);
    log << run.ToString() << "\n";
    log.flush();
  };

  // A hanging handler first waits (up to 30 s) until this worker has
  // recorded a completion: the worker records a batch while it runs the
  // next, so without this a victim could hang before any of its results
  // were stored, and the tests expect it to have finished some jobs.
  std::atomic<Worker*> running{nullptr};
  auto await_own_completion = [&running] {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      Worker* w = running.load();
      if (w != nullptr && w->stats().completed > 0) return;
      absl::SleepFor(absl::Milliseconds(1));  // between polls of the count
    }
  };

  Flow flow("unset");
  if (mode == "crashy") {
    int fd = int_arg("fd", -1);
    flow = testing::CrashyFlow(
        [fd](const Json& in, TaskContext& ctx) -> absl::StatusOr<Json> {
          if (in.as_int64() == 5 && ctx.attempt() == 1) {
            const char kHang[] = "hang\n";
            (void)!write(fd, kHang, sizeof(kHang) - 1);
            while (true) pause();  // killed here
          }
          return in.as_int64() * 10;
        });
  } else if (mode == "shared") {
    flow = testing::SharedFlow(
        [&](const Json& in, TaskContext& ctx) -> absl::StatusOr<Json> {
          absl::SleepFor(absl::Milliseconds(2));  // simulated work
          append_to_log(ctx.run_id());
          return in.at("run");
        });
  } else if (mode == "fleet") {
    engine_options.claim_grace = absl::Milliseconds(200);
    engine_options.recovery_grace = absl::Milliseconds(500);
    engine_options.report_stale_after = absl::Seconds(1);
    options.batch_size = 8;
    options.sweep_interval = absl::Milliseconds(200);
    const int hang_after = int_arg("hang_after", -1);
    auto calls = std::make_shared<std::atomic<int>>(0);
    flow = testing::FleetFlow(
        [&, hang_after, calls](const Json& in,
                               TaskContext& ctx) -> absl::StatusOr<Json> {
          absl::SleepFor(absl::Milliseconds(3));  // simulated work
          append_to_log(ctx.run_id());
          if (hang_after >= 0 && calls->fetch_add(1) >= hang_after) {
            static std::once_flag announced;
            await_own_completion();
            std::call_once(announced, [] { Say("hang"); });
            while (true) pause();  // killed here
          }
          return in.at("run");
        });
  } else if (mode == "jobs") {
    engine_options.claim_grace = absl::Milliseconds(200);
    engine_options.recovery_grace = absl::Milliseconds(500);
    engine_options.report_stale_after = absl::Seconds(1);
    options.batch_size = 10;
    options.sweep_interval = absl::Milliseconds(200);
    const int hang_after = int_arg("hang_after", -1);
    auto calls = std::make_shared<std::atomic<int>>(0);
    flow =
        testing::ProcJob([&, hang_after, calls](
                             const Json& payload,
                             TaskContext& ctx) -> absl::StatusOr<Json> {
          const absl::Time claimed = ctx.deadline() - testing::kProcJobTimeout;
          {
            absl::MutexLock lock(&log_mu);
            log << ctx.run_id().ToString() << " " << payload.at("p").as_int64()
                << " " << absl::ToUnixMicros(claimed) << " " << ctx.attempt()
                << "\n";
            log.flush();
          }
          if (hang_after >= 0 && calls->fetch_add(1) >= hang_after) {
            static std::once_flag announced;
            await_own_completion();
            std::call_once(announced, [] { Say("hang"); });
            while (true) pause();  // killed here
          }
          return payload;
        }).flow();
  } else if (mode == "rollout") {
    const int version = int_arg("version", 0);
    const absl::Duration delay = absl::Milliseconds(int_arg("delay_ms", 20));
    const std::string gate = args["gate"];
    auto work = [version, delay, gate](const Json& in,
                                       TaskContext&) -> absl::StatusOr<Json> {
      // Held until the test opens the gate, so runs are surely in flight.
      absl::Time give_up = absl::Now() + absl::Minutes(1);
      while (!gate.empty() && !std::filesystem::exists(gate)) {
        if (absl::Now() > give_up) return absl::DeadlineExceededError(gate);
        absl::SleepFor(absl::Milliseconds(5));
      }
      absl::SleepFor(delay);  // simulated work
      return boost::json::object{{"v", version}, {"n", in.at("run").at("n")}};
    };
    if (version == 1) {
      flow = testing::RolloutV1(work);
    } else if (version == 2) {
      flow = testing::RolloutV2(
          work, [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
            return in.at("work");
          });
    } else {
      std::fprintf(stderr, "test worker: rollout needs version=1 or 2\n");
      return 2;
    }
  } else if (mode == "announce") {
    options.poll_interval = absl::Minutes(1);
    options.heartbeat_interval = absl::Minutes(1);
    flow = testing::SharedFlow(
        [](const Json& in, TaskContext& ctx) -> absl::StatusOr<Json> {
          Say("started " + ctx.run_id().ToString());
          return in.at("run");
        });
  } else {
    std::fprintf(stderr, "test worker: unknown mode %s\n", mode.c_str());
    return 2;
  }

  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(**backend, engine_options);
  if (!engine.ok()) return Fail(engine.status());
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      (*engine)->StartWorker(flow, options);
  if (!worker.ok()) return Fail(worker.status());
  running.store(worker->get());
  Say("ready");
  while (!g_stop && !(*worker)->WaitFor(absl::Milliseconds(20))) {
  }
  absl::Status stopped = (*worker)->Stop();
  if (!stopped.ok()) return Fail(stopped);
  return (*worker)->Wait().ok() ? 0 : 3;
}
