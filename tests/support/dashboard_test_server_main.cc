// A dashboard for the browser test (tests/dashboard_browser_test.py): a
// memory engine with three flows, served by AdminServer with the dashboard
// and a token.
//
//   dashboard_held:   fetch -> render (map of 3) -> hold -> publish,
//                     with audit beside render. Two runs, each held in
//                     `hold` until "release RUN" is read on stdin.
//   dashboard_flaky:  charge, which fails its first attempt (no retries),
//                     so its first run fails and a retried run completes.
//   dashboard_orphan: deployed with one run but no worker (an unserved
//                     queue).
//
// Once both held runs wait in `hold`, it prints one JSON line:
// {"url", "token", "held_runs": [two ids], "failed_run"}. Then it reads
// stdin: "release RUN" lets that run through `hold`; end of input lets
// every run through and stops it.
#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "boost/json.hpp"
#include "httplib.h"
#include "sluice/admin_server.h"
#include "sluice/backends.h"
#include "sluice/dashboard.h"
#include "sluice/engine.h"
#include "sluice/errors.h"

namespace sluice {
namespace {

constexpr char kToken[] = "browser-test-token";
constexpr absl::Duration kDeadline = absl::Seconds(60);

// The gate `hold` waits at: "release RUN" lets that run through.
class Gate {
 public:
  void Reach() {
    absl::MutexLock lock(&mu_);
    ++reached_;
  }
  bool AwaitReached(int runs) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return reached_ >= runs;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kDeadline);
  }
  void Release(const std::string& run) {
    absl::MutexLock lock(&mu_);
    released_.insert(run);
  }
  void ReleaseAll() {
    absl::MutexLock lock(&mu_);
    all_released_ = true;
  }
  // Waits until `run` is released (bounded, so that a lost test cannot
  // hang the worker for good).
  bool AwaitRelease(const std::string& run) {
    absl::MutexLock lock(&mu_);
    auto released = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return all_released_ || released_.contains(run);
    };
    return mu_.AwaitWithTimeout(absl::Condition(&released), absl::Minutes(5));
  }

 private:
  absl::Mutex mu_;
  int reached_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> released_ ABSL_GUARDED_BY(mu_);
  bool all_released_ ABSL_GUARDED_BY(mu_) = false;
};

Flow HeldFlow(Gate& gate) {
  Flow flow("dashboard_held", {.max_attempts = 1});
  flow.Step("fetch",
            [](const Json&, TaskContext&) -> absl::StatusOr<Json> {
              return boost::json::array{1, 2, 3};
            })
      .Map("render", {.depends_on = {"fetch"}},
           [](const Json& item, TaskContext&) -> absl::StatusOr<Json> {
             return Json(item.as_int64() * 10);
           })
      .Step("audit", {.depends_on = {"fetch"}},
            [](const Json&, TaskContext&) -> absl::StatusOr<Json> {
              return Json("ok");
            })
      .Step("hold", {.depends_on = {"render"}},
            [&gate](const Json&, TaskContext& ctx) -> absl::StatusOr<Json> {
              gate.Reach();
              if (!gate.AwaitRelease(ctx.run_id().ToString())) {
                return NonRetryable("never released");
              }
              return Json("released");
            })
      .Step("publish", {.depends_on = {"hold", "audit"}},
            [](const Json&, TaskContext&) -> absl::StatusOr<Json> {
              return boost::json::object{{"published", true}};
            });
  return flow;
}

Flow FlakyFlow(std::atomic<int>& calls) {
  Flow flow("dashboard_flaky", {.max_attempts = 1});
  flow.Step("charge",
            [&calls](const Json&, TaskContext&) -> absl::StatusOr<Json> {
              if (calls.fetch_add(1) == 0) {
                return NonRetryable("card declined (first attempt)");
              }
              return Json("charged");
            });
  return flow;
}

// Waits until `run` is no longer started.
absl::StatusOr<RunStatus> AwaitFinished(Engine& engine, const RunId& run) {
  absl::Time deadline = absl::Now() + kDeadline;
  absl::Mutex mu;
  bool finished = false;
  int subscription = engine.Subscribe([&](const Event& e) {
    if (e.run_id == run && e.step_slug.empty() &&
        e.kind != EventKind::kRunStarted) {
      absl::MutexLock lock(&mu);
      finished = true;
    }
  });
  absl::StatusOr<RunView> view = engine.GetRun(run);
  if (view.ok() && view->run.status == RunStatus::kStarted) {
    absl::MutexLock lock(&mu);
    mu.AwaitWithDeadline(absl::Condition(&finished), deadline);
  }
  engine.Unsubscribe(subscription);
  view = engine.GetRun(run);
  if (!view.ok()) return view.status();
  return view->run.status;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "dashboard test server: %s\n",
               status.ToString().c_str());
  return 1;
}

int Serve() {
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend("memory:");
  if (!backend.ok()) return Fail(backend.status());
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**backend);
  if (!engine.ok()) return Fail(engine.status());
  Gate gate;
  std::atomic<int> flaky_calls{0};
  Flow held = HeldFlow(gate);
  Flow flaky = FlakyFlow(flaky_calls);
  Flow orphan("dashboard_orphan");
  orphan.Step("nobody",
              [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
                return input;
              });
  WorkerOptions options{.concurrency = 4,
                        .poll_interval = absl::Milliseconds(100),
                        .heartbeat_interval = absl::Seconds(1)};
  auto held_worker = (*engine)->StartWorker(held, options);
  if (!held_worker.ok()) return Fail(held_worker.status());
  auto flaky_worker = (*engine)->StartWorker(flaky, options);
  if (!flaky_worker.ok()) return Fail(flaky_worker.status());
  if (auto d = (*engine)->Deploy(orphan); !d.ok()) return Fail(d.status());
  if (auto r = (*engine)->StartRun("dashboard_orphan", Json("waits"));
      !r.ok()) {
    return Fail(r.status());
  }

  absl::StatusOr<RunId> failed = (*engine)->StartRun(
      "dashboard_flaky", boost::json::object{{"amount", 42}});
  if (!failed.ok()) return Fail(failed.status());
  absl::StatusOr<RunStatus> status = AwaitFinished(**engine, *failed);
  if (!status.ok()) return Fail(status.status());
  if (*status != RunStatus::kFailed) {
    return Fail(absl::InternalError("the flaky run did not fail"));
  }
  // Two held runs (one for a page with live events, one for a page that
  // polls), with a large input to show the viewer's truncation marker.
  boost::json::array held_runs;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<RunId> run = (*engine)->StartRun(
        "dashboard_held",
        boost::json::object{{"note", std::string(20000, 'x')}});
    if (!run.ok()) return Fail(run.status());
    held_runs.push_back(Json(run->ToString()));
  }
  if (!gate.AwaitReached(2)) {
    return Fail(absl::DeadlineExceededError("hold was never reached"));
  }

  auto admin =
      AdminServer::Start(**engine, {.add_routes = [&](httplib::Server& server) {
        AddDashboardRoutes(server, **engine, {.token = kToken});
      }});
  if (!admin.ok()) return Fail(admin.status());
  boost::json::object ready{
      {"url", "http://127.0.0.1:" + std::to_string((*admin)->port())},
      {"token", kToken},
      {"held_runs", held_runs},
      {"failed_run", failed->ToString()}};
  std::printf("%s\n", boost::json::serialize(ready).c_str());
  std::fflush(stdout);

  for (std::string line; std::getline(std::cin, line);) {
    if (line.starts_with("release ")) gate.Release(line.substr(8));
  }
  gate.ReleaseAll();
  (*admin)->Stop();
  absl::Status a = (*held_worker)->Stop();
  absl::Status b = (*flaky_worker)->Stop();
  if (!a.ok()) return Fail(a);
  if (!b.ok()) return Fail(b);
  return 0;
}

}  // namespace
}  // namespace sluice

int main() { return sluice::Serve(); }
