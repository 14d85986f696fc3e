// The `sluice` command-line program.
//
//   sluice demo [--backend URL]          run the demo flow (SQLite by default)
//   sluice runs --backend URL [--flow SLUG] [--limit N]
//   sluice show --backend URL RUN_ID
//   sluice start --backend URL FLOW JSON
//   sluice versions --backend URL ALIAS
//   sluice activate --backend URL ALIAS SLUG --expect CURRENT
//   sluice coverage --backend URL [--liveness 30s]
//   sluice migrate URL                   install or upgrade a Postgres schema
//   sluice check-schema URL              report what a Postgres schema lacks
//
// Exit codes: cli.h.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "boost/json/serialize.hpp"
#include "cli.h"
#include "demo_flow.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "sluice/internal/strings.h"
#include "sluice/postgres.h"
#include "sluice/redact_url.h"

namespace sluice {
namespace {

using cli::Args;
using cli::BackendFrom;
using cli::Fail;

constexpr char kUsage[] =
    "usage:\n"
    "  sluice demo [--backend URL]     run the demo flow (default "
    "sqlite:sluice-demo.db)\n"
    "  sluice runs --backend URL [--flow SLUG] [--limit N]\n"
    "  sluice show --backend URL RUN_ID\n"
    "  sluice start --backend URL FLOW JSON\n"
    "  sluice versions --backend URL ALIAS\n"
    "  sluice activate --backend URL ALIAS SLUG --expect CURRENT\n"
    "  sluice coverage --backend URL [--liveness 30s]\n"
    "  sluice migrate POSTGRES_URL      install or upgrade the schema\n"
    "  sluice check-schema POSTGRES_URL report the schema's version and gaps\n"
    "URLs: memory:, sqlite:PATH, postgres://...\n"
    "exit: 0 ok, 1 error, 2 usage; coverage: 3 if a step has no worker\n";

std::string Compact(const Json& v) { return boost::json::serialize(v); }

void PrintEvent(const Event& e) {
  std::string what(ToString(e.kind));
  if (e.step_slug.empty()) {
    std::printf("run %s: %s\n", e.run_id.ToString().c_str(), what.c_str());
  } else {
    std::printf("  %-16s %s", e.step_slug.c_str(), what.c_str());
    if (e.kind == EventKind::kStepCompleted && e.value) {
      std::string out = Compact(*e.value);
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

int Demo(const Args& args) {
  std::string url = args.options.count("backend") ? args.options.at("backend")
                                                  : "sqlite:sluice-demo.db";
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url);
  if (!backend.ok()) return Fail(backend.status());
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**backend);
  if (!engine.ok()) return Fail(engine.status());
  std::printf("Sluice demo: flow \"word_stats\" on %s\n",
              RedactUrl(url).c_str());

  // Events arrive on the thread that commits them, so the subscriber only
  // prints and records; it never waits.
  absl::Mutex mu;
  std::vector<RunId> ended;
  (*engine)->Subscribe([&](const Event& e) {
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
      (*engine)->StartWorker(flow, options);
  if (!worker.ok()) return Fail(worker.status());
  std::printf("worker %s serves queue \"%s\"\n", (*worker)->id().c_str(),
              (*worker)->queue().c_str());
  absl::StatusOr<RunId> run =
      (*engine)->StartRun("word_stats", demo::DemoInput());
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
  if (!finished)
    return Fail(absl::DeadlineExceededError("the run did not finish"));
  if (!stopped.ok()) return Fail(stopped);
  absl::StatusOr<RunView> view = (*engine)->GetRun(*run);
  if (!view.ok()) return Fail(view.status());
  std::printf("result (%s): %s\n",
              std::string(ToString(view->run.status)).c_str(),
              view->run.output ? Compact(*view->run.output).c_str() : "none");
  return view->run.status == RunStatus::kCompleted ? 0 : 1;
}

int ListRunsCommand(const Args& args) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = BackendFrom(args, "");
  if (!backend.ok()) return Fail(backend.status());
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**backend);
  if (!engine.ok()) return Fail(engine.status());
  int limit = 20;
  if (args.options.count("limit") &&
      !absl::SimpleAtoi(args.options.at("limit"), &limit)) {
    return Fail(absl::InvalidArgumentError("--limit must be a number"));
  }
  std::string flow = args.options.count("flow") ? args.options.at("flow") : "";
  absl::StatusOr<std::vector<RunRecord>> runs =
      (*engine)->ListRuns(flow, limit);
  if (!runs.ok()) return Fail(runs.status());
  for (const RunRecord& r : *runs) {
    std::printf(
        "%s  %-20s %-10s %s%s%s\n", r.run_id.ToString().c_str(),
        r.flow_slug.c_str(), std::string(ToString(r.status)).c_str(),
        absl::FormatTime("%Y-%m-%d %H:%M:%S", r.started_at, absl::UTCTimeZone())
            .c_str(),
        r.unreadable.empty() ? "" : "  unreadable: ", r.unreadable.c_str());
  }
  return 0;
}

int ShowRun(const Args& args) {
  if (args.positional.size() != 1) {
    return Fail(absl::InvalidArgumentError("show needs one RUN_ID"));
  }
  absl::StatusOr<RunId> id = RunId::Parse(args.positional[0]);
  if (!id.ok()) return Fail(id.status());
  absl::StatusOr<std::unique_ptr<Backend>> backend = BackendFrom(args, "");
  if (!backend.ok()) return Fail(backend.status());
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**backend);
  if (!engine.ok()) return Fail(engine.status());
  absl::StatusOr<RunView> view = (*engine)->GetRun(*id);
  if (!view.ok()) return Fail(view.status());
  std::printf("run %s (%s): %s\n", id->ToString().c_str(),
              view->run.flow_slug.c_str(),
              std::string(ToString(view->run.status)).c_str());
  if (!view->run.error.empty())
    std::printf("error: %s\n", view->run.error.c_str());
  if (!view->run.unreadable.empty())
    std::printf("unreadable: %s\n", view->run.unreadable.c_str());
  for (const StepStateRecord& s : view->steps) {
    std::printf(
        "  step %-20s %-10s tasks=%d%s%s\n", s.step_slug.c_str(),
        std::string(ToString(s.status)).c_str(), s.initial_tasks.value_or(-1),
        s.unreadable.empty() ? "" : "  unreadable: ", s.unreadable.c_str());
  }
  for (const TaskRecord& t : view->tasks) {
    if (t.unreadable.empty()) continue;
    std::printf("  task %d/%d unreadable: %s\n", t.key.step_index,
                t.key.task_index, t.unreadable.c_str());
  }
  if (view->run.output)
    std::printf("output: %s\n", Compact(*view->run.output).c_str());
  return 0;
}

int StartCommand(const Args& args) {
  if (args.positional.size() != 2) {
    return Fail(absl::InvalidArgumentError("start needs FLOW and JSON"));
  }
  absl::StatusOr<Json> input = ParseJson(args.positional[1], "run input");
  if (!input.ok()) return Fail(input.status());
  absl::StatusOr<std::unique_ptr<Backend>> backend = BackendFrom(args, "");
  if (!backend.ok()) return Fail(backend.status());
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**backend);
  if (!engine.ok()) return Fail(engine.status());
  absl::StatusOr<RunId> run = (*engine)->StartRun(args.positional[0], *input);
  if (!run.ok()) return Fail(run.status());
  std::printf("%s\n", run->ToString().c_str());
  return 0;
}

absl::StatusOr<std::string> PostgresUrlFrom(const Args& args) {
  if (args.positional.size() != 1) {
    return absl::InvalidArgumentError(
        StrCat(args.command, " needs one POSTGRES_URL"));
  }
  return args.positional[0];
}

int MigrateCommand(const Args& args) {
  absl::StatusOr<std::string> url = PostgresUrlFrom(args);
  if (!url.ok()) return Fail(url.status());
  absl::Status migrated = MigratePostgres(*url);
  if (!migrated.ok()) return Fail(migrated);
  std::printf("schema at version %d\n", LatestPostgresSchemaVersion());
  return 0;
}

// Exit status 0 when the schema is complete and current, 1 otherwise.
int CheckSchemaCommand(const Args& args) {
  absl::StatusOr<std::string> url = PostgresUrlFrom(args);
  if (!url.ok()) return Fail(url.status());
  absl::StatusOr<SchemaReport> report = CheckPostgresSchema(*url);
  if (!report.ok()) return Fail(report.status());
  std::printf("%s", report->ToString().c_str());
  return report->ok() ? 0 : 1;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  using namespace sluice;
  using namespace sluice::cli;
  absl::StatusOr<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "sluice: %s\n%s",
                 std::string(args.status().message()).c_str(), kUsage);
    return kExitUsage;
  }
  if (args->command == "demo") return Demo(*args);
  if (args->command == "runs") return ListRunsCommand(*args);
  if (args->command == "show") return ShowRun(*args);
  if (args->command == "start") return StartCommand(*args);
  if (args->command == "versions") return VersionsCommand(*args);
  if (args->command == "activate") return ActivateCommand(*args);
  if (args->command == "coverage") return CoverageCommand(*args);
  if (args->command == "migrate") return MigrateCommand(*args);
  if (args->command == "check-schema") return CheckSchemaCommand(*args);
  std::fprintf(stderr, "sluice: unknown command \"%s\"\n%s",
               args->command.c_str(), kUsage);
  return kExitUsage;
}
