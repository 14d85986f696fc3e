// `sluice dashboard`: the web dashboard over a store that has something to
// show. It runs the demo flow word_stats and a flaky report flow on a
// loop with workers in this process (some runs fail, so retry has
// something to do), serves the admin listener with the dashboard, prints
// its address and runs until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"
#include "cli.h"
#include "demo_flow.h"
#include "httplib.h"
#include "sluice/admin_server.h"
#include "sluice/dashboard.h"
#include "sluice/errors.h"
#include "sluice/redact_url.h"

namespace sluice::cli {
namespace {

constexpr absl::Duration kRunEvery = absl::Seconds(2);

struct DashboardArgs {
  std::string url = "sqlite:sluice-dashboard.db";
  std::string address = "127.0.0.1";
  int port = 0;
  std::string token;
};

// A handler's work, made visible: the dashboard shows runs in flight.
void Work(absl::BitGen& gen, int min_ms, int max_ms) {
  absl::SleepFor(absl::Milliseconds(absl::Uniform(gen, min_ms, max_ms)));
}

// gather -> render (one task per section; an attempt fails one time in
// five, and a task has two) -> publish. About one run in seven fails, and
// a retry of it usually completes.
Flow ReportFlow() {
  Flow flow("nightly_report",
            {.max_attempts = 2, .base_delay = absl::Milliseconds(500)});
  flow.Step("gather",
            [](const Json&, TaskContext&) -> absl::StatusOr<Json> {
              thread_local absl::BitGen gen;
              Work(gen, 200, 600);
              return boost::json::array{"sales", "support", "ops", "infra"};
            })
      .Map("render", {.depends_on = {"gather"}},
           [](const Json& section, TaskContext&) -> absl::StatusOr<Json> {
             thread_local absl::BitGen gen;
             Work(gen, 300, 1200);
             if (absl::Bernoulli(gen, 0.2)) {
               return absl::UnavailableError(
                   "chart service timed out rendering " +
                   std::string(section.as_string()));
             }
             return boost::json::object{{"section", section},
                                        {"pages", absl::Uniform(gen, 1, 9)}};
           })
      .Step("publish", {.depends_on = {"render"}},
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              thread_local absl::BitGen gen;
              Work(gen, 100, 400);
              return boost::json::object{
                  {"sections", input.at("render").as_array().size()}};
            });
  return flow;
}

// Every fifth word_stats run gets a document that is not text: its
// count_words task fails (without retry), and so does the run.
Json WordStatsInput(int number) {
  Json input = demo::DemoInput();
  if (number % 5 == 4) {
    input.as_object()["documents"].as_array().push_back(
        boost::json::object{{"title", "broken"}, {"text", 404}});
  }
  return input;
}

// Blocks SIGINT and SIGTERM in this thread and every thread it starts, so
// that WaitForSignal receives them.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// True once SIGINT or SIGTERM arrived; false after `timeout` without one.
bool WaitForSignal(const sigset_t& signals, absl::Duration timeout) {
  timespec wait = absl::ToTimespec(timeout);
  int got = sigtimedwait(&signals, nullptr, &wait);
  return got == SIGINT || got == SIGTERM;
}

int Dashboard(const DashboardArgs& args) {
  sigset_t signals = BlockStopSignals();
  absl::StatusOr<Session> session = OpenSession(args.url);
  if (!session.ok()) return Fail(session.status());
  Engine& engine = *session->engine;
  Flow word_stats = demo::WordStatsFlow();
  Flow report = ReportFlow();
  std::vector<std::unique_ptr<Worker>> workers;
  for (const Flow* flow : {&word_stats, &report}) {
    absl::StatusOr<std::unique_ptr<Worker>> worker =
        engine.StartWorker(*flow, {.concurrency = 4});
    if (!worker.ok()) return Fail(worker.status());
    workers.push_back(std::move(*worker));
  }
  absl::StatusOr<std::unique_ptr<AdminServer>> admin = AdminServer::Start(
      engine, {.address = args.address,
               .port = args.port,
               .add_routes = [&](httplib::Server& server) {
                 AddDashboardRoutes(server, engine, {.token = args.token});
               }});
  if (!admin.ok()) return Fail(admin.status());
  std::string host =
      (*admin)->address() == "0.0.0.0" ? "127.0.0.1" : (*admin)->address();
  std::printf("Sluice dashboard on %s: http://%s:%d/\n",
              RedactUrl(args.url).c_str(), host.c_str(), (*admin)->port());
  std::printf(args.token.empty()
                  ? "Read-only (no --token): cancel, retry and delete are "
                    "refused.\n"
                  : "Cancel, retry and delete ask for the --token.\n");
  std::printf(
      "Starting a word_stats and a nightly_report run every %s; "
      "Ctrl-C stops.\n",
      absl::FormatDuration(kRunEvery).c_str());
  std::fflush(stdout);

  int started = 0;
  while (!WaitForSignal(signals, kRunEvery)) {
    absl::StatusOr<RunId> a =
        engine.StartRun("word_stats", WordStatsInput(started));
    absl::StatusOr<RunId> b = engine.StartRun(
        "nightly_report", boost::json::object{{"night", started}});
    if (!a.ok()) return Fail(a.status());
    if (!b.ok()) return Fail(b.status());
    ++started;
  }
  std::printf("stopping after %d rounds of runs\n", started);
  (*admin)->Stop();
  int exit_code = kExitOk;
  for (auto& worker : workers) {
    if (absl::Status s = worker->Stop(); !s.ok()) exit_code = Fail(s);
  }
  return exit_code;
}

}  // namespace

void AddDashboardCommand(CLI::App& app, Outcome& outcome) {
  CLI::App* command = app.add_subcommand(
      "dashboard",
      "Serve the web dashboard while running the demo flows on a loop with "
      "workers in this process (some runs fail, to show retry); stops on "
      "Ctrl-C");
  auto args = std::make_shared<DashboardArgs>();
  command->add_option("URL", args->url, kUrlHelp)->capture_default_str();
  command->add_option("--address", args->address, "address to listen on")
      ->capture_default_str();
  command
      ->add_option("--port", args->port,
                   "port to listen on (0: a free one, printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  // The environment keeps the token out of `ps` listings.
  command
      ->add_option("--token", args->token,
                   "bearer token that cancel, retry and delete need (none: "
                   "a read-only dashboard)")
      ->envname("SLUICE_DASHBOARD_TOKEN");
  command->callback([&outcome, args] { outcome.exit_code = Dashboard(*args); });
}

}  // namespace sluice::cli
