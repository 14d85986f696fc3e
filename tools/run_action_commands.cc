// `sluice cancel`, `sluice retry` and `sluice delete`: one action on one
// run, through the engine (which refuses what the run's state forbids).
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "cli.h"

namespace sluice::cli {
namespace {

struct ActionArgs {
  std::string url;
  std::string run;
  bool now = false;  // cancel: at once, not by request
  bool json = false;
};

// Runs `action` on the run and prints `done` (or a JSON object saying so).
int RunAction(const ActionArgs& args, std::string_view verb,
              const std::function<absl::Status(Engine&, const RunId&)>& action,
              std::string_view done) {
  absl::StatusOr<RunId> id = RunId::Parse(args.run);
  if (!id.ok()) return Fail(id.status());
  absl::StatusOr<Session> session = OpenSession(args.url);
  if (!session.ok()) return Fail(session.status());
  absl::Status status = action(*session->engine, *id);
  if (!status.ok()) return Fail(status);
  // The run's status afterwards (a cancel request may end it at once);
  // none once deleted.
  std::string now_status = "none";
  if (verb != "delete") {
    absl::StatusOr<RunView> view = session->engine->GetRun(*id);
    if (!view.ok()) return Fail(view.status());
    now_status = ToString(view->run.status);
  }
  if (args.json) {
    PrintJson(boost::json::object{{"run_id", id->ToString()},
                                  {"action", std::string(verb)},
                                  {"result", std::string(done)},
                                  {"status", now_status}});
  } else {
    std::printf("run %s: %s (status: %s)\n", id->ToString().c_str(),
                std::string(done).c_str(), now_status.c_str());
  }
  return kExitOk;
}

std::shared_ptr<ActionArgs> AddAction(CLI::App& app, const char* name,
                                      const char* description) {
  auto args = std::make_shared<ActionArgs>();
  CLI::App* command = app.add_subcommand(name, description);
  AddUrl(*command, args->url);
  command->add_option("RUN", args->run, "the run id")
      ->required()
      ->check(RunIdValidator());
  AddJsonFlag(*command, args->json);
  return args;
}

}  // namespace

void AddRunActionCommands(CLI::App& app, Outcome& outcome) {
  auto cancel = AddAction(
      app, "cancel",
      "Cancel a started run: queued tasks at once, started ones are asked to "
      "stop (with --now: cancelled at once)");
  app.get_subcommand("cancel")->add_flag(
      "--now", cancel->now,
      "cancel started tasks at once too; their late results are ignored");
  app.get_subcommand("cancel")->callback([&outcome, cancel] {
    outcome.exit_code = RunAction(
        *cancel, "cancel",
        [now = cancel->now](Engine& engine, const RunId& id) {
          return engine.CancelRun(
              id, now ? CancelMode::kImmediate : CancelMode::kRequest);
        },
        cancel->now ? "cancelled" : "cancel requested");
  });

  auto retry = AddAction(
      app, "retry",
      "Retry a failed or cancelled run: its unfinished steps get a fresh "
      "attempt budget; completed steps keep their outputs");
  app.get_subcommand("retry")->callback([&outcome, retry] {
    outcome.exit_code = RunAction(
        *retry, "retry",
        [](Engine& engine, const RunId& id) { return engine.RetryRun(id); },
        "retrying");
  });

  auto remove = AddAction(
      app, "delete",
      "Delete a run with its steps, tasks, attempts and messages (refused "
      "while a task is started: cancel it first)");
  app.get_subcommand("delete")->callback([&outcome, remove] {
    outcome.exit_code = RunAction(
        *remove, "delete",
        [](Engine& engine, const RunId& id) { return engine.RemoveRun(id); },
        "deleted");
  });
}

}  // namespace sluice::cli
