// `sluice demo`: runs the demo flow (demo_flow.h) with a worker in this
// process and prints its events.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "cli.h"
#include "demo_flow.h"
#include "sluice/redact_url.h"

namespace sluice::cli {
namespace {

void PrintEvent(const Event& e) {
  std::string what(ToString(e.kind));
  if (e.step_slug.empty()) {
    std::printf("run %s: %s\n", e.run_id.ToString().c_str(), what.c_str());
  } else {
    std::printf("  %-16s %s", e.step_slug.c_str(), what.c_str());
    if (e.kind == EventKind::kStepCompleted && e.value) {
      std::string out = SerializeJson(*e.value);
      if (out.size() > 70) out = out.substr(0, 67) + "...";
      std::printf("  -> %s", out.c_str());
    }
    if (e.kind == EventKind::kStepSkipped) {
      std::printf(" (%s)", std::string(ToString(e.skip_reason)).c_str());
    }
    std::printf("\n");
  }
  std::fflush(stdout);
}

int Demo(const std::string& url) {
  absl::StatusOr<Session> session = OpenSession(url);
  if (!session.ok()) return Fail(session.status());
  Engine& engine = *session->engine;
  std::printf("Sluice demo: flow \"word_stats\" on %s\n",
              RedactUrl(url).c_str());

  // Events arrive on the thread that commits them, so the subscriber only
  // prints and records; it never waits.
  absl::Mutex mu;
  std::vector<RunId> ended;
  engine.Subscribe([&](const Event& e) {
    PrintEvent(e);
    if (e.kind == EventKind::kRunCompleted || e.kind == EventKind::kRunFailed) {
      absl::MutexLock lock(&mu);
      ended.push_back(e.run_id);
    }
  });
  Flow flow = demo::WordStatsFlow();
  WorkerOptions options;
  options.concurrency = 4;
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine.StartWorker(flow, options);
  if (!worker.ok()) return Fail(worker.status());
  std::printf("worker %s serves queue \"%s\"\n", (*worker)->id().c_str(),
              (*worker)->queue().c_str());
  absl::StatusOr<RunId> run = engine.StartRun("word_stats", demo::DemoInput());
  if (!run.ok()) return Fail(run.status());
  bool finished;
  {
    absl::MutexLock lock(&mu);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return std::find(ended.begin(), ended.end(), *run) != ended.end();
    };
    finished = mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(60));
  }
  absl::Status stopped = (*worker)->Stop();
  if (!finished) {
    return Fail(absl::DeadlineExceededError("the run did not finish"));
  }
  if (!stopped.ok()) return Fail(stopped);
  absl::StatusOr<RunView> view = engine.GetRun(*run);
  if (!view.ok()) return Fail(view.status());
  std::printf(
      "result (%s): %s\n", std::string(ToString(view->run.status)).c_str(),
      view->run.output ? SerializeJson(*view->run.output).c_str() : "none");
  return view->run.status == RunStatus::kCompleted ? kExitOk : kExitError;
}

}  // namespace

void AddDemoCommand(CLI::App& app, Outcome& outcome) {
  CLI::App* demo = app.add_subcommand(
      "demo",
      "Run the demo flow word_stats with a worker in this process and print "
      "its events");
  auto url = std::make_shared<std::string>("sqlite:sluice-demo.db");
  demo->add_option("URL", *url, kUrlHelp)->capture_default_str();
  demo->callback([&outcome, url] { outcome.exit_code = Demo(*url); });
}

}  // namespace sluice::cli
