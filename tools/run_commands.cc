// `sluice runs`, `sluice show` and `sluice start`: listing, inspecting and
// starting runs.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "sluice/internal/strings.h"

namespace sluice::cli {
namespace {

Json OptionalJson(const std::optional<Json>& value) {
  return value ? *value : Json(nullptr);
}

// A run without its input and output (listings).
boost::json::object RunSummaryJson(const RunRecord& r) {
  boost::json::object o;
  o["run_id"] = r.run_id.ToString();
  o["flow"] = r.flow_slug;
  o["status"] = std::string(ToString(r.status));
  o["started_at"] = TimeJson(r.started_at);
  o["finished_at"] = TimeJson(r.finished_at);
  o["priority"] = r.priority;
  o["external_key"] = r.external_key;
  o["metadata"] = r.metadata;
  o["cancel_requested"] = r.cancel_requested;
  o["error"] = r.error;
  o["unreadable"] = r.unreadable;
  return o;
}

Json StepJson(const StepStateRecord& s) {
  boost::json::object o;
  o["step_index"] = s.step_index;
  o["step"] = s.step_slug;
  o["status"] = std::string(ToString(s.status));
  o["skip_reason"] = std::string(ToString(s.skip_reason));
  o["tasks"] = s.initial_tasks ? Json(*s.initial_tasks) : Json(nullptr);
  o["remaining_tasks"] =
      s.remaining_tasks ? Json(*s.remaining_tasks) : Json(nullptr);
  o["started_at"] = TimeJson(s.started_at);
  o["finished_at"] = TimeJson(s.finished_at);
  o["output"] = OptionalJson(s.output);
  o["error"] = s.error;
  o["unreadable"] = s.unreadable;
  return o;
}

Json TaskJson(const TaskRecord& t) {
  boost::json::object o;
  o["step_index"] = t.key.step_index;
  o["task_index"] = t.key.task_index;
  o["status"] = std::string(ToString(t.status));
  o["attempts"] = t.attempts;
  o["queue"] = t.queue_name;
  o["message_id"] = t.message_id;
  o["queued_at"] = TimeJson(t.queued_at);
  o["started_at"] = TimeJson(t.started_at);
  o["finished_at"] = TimeJson(t.finished_at);
  o["worker_id"] = t.worker_id;
  o["input"] = t.input;
  o["output"] = OptionalJson(t.output);
  o["error"] = t.error;
  o["unreadable"] = t.unreadable;
  return o;
}

Json AttemptJson(const AttemptRecord& a) {
  boost::json::object o;
  o["step_index"] = a.task.step_index;
  o["task_index"] = a.task.task_index;
  o["attempt"] = a.attempt;
  o["worker_id"] = a.worker_id;
  o["started_at"] = TimeJson(a.started_at);
  o["finished_at"] = TimeJson(a.finished_at);
  o["outcome"] = std::string(ToString(a.outcome));
  o["error"] = a.error;
  o["unreadable"] = a.unreadable;
  return o;
}

Json RunViewJson(const RunView& view) {
  boost::json::object run = RunSummaryJson(view.run);
  run["input"] = view.run.input;
  run["output"] = OptionalJson(view.run.output);
  boost::json::array steps, tasks, attempts;
  for (const StepStateRecord& s : view.steps) steps.push_back(StepJson(s));
  for (const TaskRecord& t : view.tasks) tasks.push_back(TaskJson(t));
  for (const AttemptRecord& a : view.attempts) {
    attempts.push_back(AttemptJson(a));
  }
  run["steps"] = std::move(steps);
  run["tasks"] = std::move(tasks);
  run["attempts"] = std::move(attempts);
  return run;
}

// --- runs --------------------------------------------------------------

struct RunsArgs {
  std::string url;
  std::vector<std::string> flows;
  std::vector<std::string> statuses;
  int limit = 20;
  std::string cursor;
  bool json = false;
};

int ListRuns(const RunsArgs& args) {
  RunFilter filter;
  filter.names = args.flows;
  filter.limit = args.limit;
  filter.cursor = args.cursor;
  for (const std::string& s : args.statuses) {
    absl::StatusOr<RunStatus> status = ParseRunStatus(s);
    if (!status.ok()) return Fail(status.status());
    filter.statuses.push_back(*status);
  }
  absl::StatusOr<Session> session = OpenSession(args.url);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<RunPage> page = session->engine->ListRuns(filter);
  if (!page.ok()) return Fail(page.status());
  if (args.json) {
    boost::json::array runs;
    for (const RunRecord& r : page->runs) runs.push_back(RunSummaryJson(r));
    PrintJson(boost::json::object{
        {"runs", std::move(runs)},
        {"next_cursor",
         page->cursor.empty() ? Json(nullptr) : Json(page->cursor)}});
    return kExitOk;
  }
  std::printf("%-36s  %-20s %-10s %-19s\n", "RUN", "FLOW", "STATUS",
              "STARTED (UTC)");
  for (const RunRecord& r : page->runs) {
    std::printf(
        "%s  %-20s %-10s %s%s%s\n", r.run_id.ToString().c_str(),
        r.flow_slug.c_str(), std::string(ToString(r.status)).c_str(),
        UtcTime(r.started_at).c_str(),
        r.unreadable.empty() ? "" : "  unreadable: ", r.unreadable.c_str());
  }
  if (!page->cursor.empty()) {
    std::printf("more: --cursor %s\n", page->cursor.c_str());
  }
  return kExitOk;
}

// --- show --------------------------------------------------------------

void PrintRunView(const RunView& view) {
  const RunRecord& run = view.run;
  std::printf("run %s (%s): %s\n", run.run_id.ToString().c_str(),
              run.flow_slug.c_str(), std::string(ToString(run.status)).c_str());
  std::printf("started %s", UtcTime(run.started_at).c_str());
  if (run.finished_at) {
    std::printf("  finished %s", UtcTime(*run.finished_at).c_str());
  }
  std::printf("\n");
  if (!run.error.empty()) std::printf("error: %s\n", run.error.c_str());
  if (!run.unreadable.empty()) {
    std::printf("unreadable: %s\n", run.unreadable.c_str());
  }
  std::printf("steps:\n");
  for (const StepStateRecord& s : view.steps) {
    std::printf(
        "  step %-20s %-10s tasks=%d%s%s\n", s.step_slug.c_str(),
        std::string(ToString(s.status)).c_str(), s.initial_tasks.value_or(-1),
        s.unreadable.empty() ? "" : "  unreadable: ", s.unreadable.c_str());
  }
  std::printf("tasks:\n");
  for (const TaskRecord& t : view.tasks) {
    std::printf(
        "  task %d/%d %-10s attempts=%d queue=%s%s%s\n", t.key.step_index,
        t.key.task_index, std::string(ToString(t.status)).c_str(), t.attempts,
        t.queue_name.c_str(),
        t.unreadable.empty() ? "" : " unreadable: ", t.unreadable.c_str());
  }
  std::printf("attempts:\n");
  for (const AttemptRecord& a : view.attempts) {
    std::printf("  task %d/%d attempt %d %-9s worker=%s finished %s%s%s\n",
                a.task.step_index, a.task.task_index, a.attempt,
                std::string(ToString(a.outcome)).c_str(), a.worker_id.c_str(),
                UtcTime(a.finished_at).c_str(), a.error.empty() ? "" : "  ",
                a.error.c_str());
  }
  if (run.output) {
    std::printf("output: %s\n", SerializeJson(*run.output).c_str());
  }
}

int ShowRun(const std::string& url, const std::string& run_text, bool json) {
  absl::StatusOr<RunId> id = RunId::Parse(run_text);
  if (!id.ok()) return Fail(id.status());
  absl::StatusOr<Session> session = OpenSession(url);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<RunView> view = session->engine->GetRun(*id);
  if (!view.ok()) return Fail(view.status());
  if (json) {
    PrintJson(RunViewJson(*view));
  } else {
    PrintRunView(*view);
  }
  return kExitOk;
}

// --- start -------------------------------------------------------------

int StartRun(const std::string& url, const std::string& flow,
             const std::string& input_text, bool json) {
  absl::StatusOr<Json> input = ParseJson(input_text, "run input");
  if (!input.ok()) return Fail(input.status());
  absl::StatusOr<Session> session = OpenSession(url);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<RunId> run = session->engine->StartRun(flow, *input);
  if (!run.ok()) return Fail(run.status());
  if (json) {
    PrintJson(boost::json::object{{"run_id", run->ToString()}});
  } else {
    std::printf("%s\n", run->ToString().c_str());
  }
  return kExitOk;
}

}  // namespace

void AddRunCommands(CLI::App& app, Outcome& outcome) {
  auto runs_args = std::make_shared<RunsArgs>();
  CLI::App* runs = app.add_subcommand("runs", "List runs, newest first");
  AddUrl(*runs, runs_args->url);
  runs->add_option("--flow", runs_args->flows,
                   "only runs of this flow or job (repeatable)");
  runs->add_option("--status", runs_args->statuses,
                   "only runs with this status (repeatable)")
      ->check(CLI::IsMember({"started", "completed", "failed", "cancelled"}));
  runs->add_option("--limit", runs_args->limit, "at most this many runs")
      ->check(CLI::Range(1, 10'000))
      ->capture_default_str();
  runs->add_option("--cursor", runs_args->cursor,
                   "the next page: the cursor the previous page printed");
  AddJsonFlag(*runs, runs_args->json);
  runs->callback(
      [&outcome, runs_args] { outcome.exit_code = ListRuns(*runs_args); });

  struct ShowArgs {
    std::string url, run;
    bool json = false;
  };
  auto show_args = std::make_shared<ShowArgs>();
  CLI::App* show = app.add_subcommand(
      "show", "Show a run: its steps, tasks and attempts ledger");
  AddUrl(*show, show_args->url);
  show->add_option("RUN", show_args->run, "the run id")
      ->required()
      ->check(RunIdValidator());
  AddJsonFlag(*show, show_args->json);
  show->callback([&outcome, show_args] {
    outcome.exit_code =
        ShowRun(show_args->url, show_args->run, show_args->json);
  });

  struct StartArgs {
    std::string url, flow, input;
    bool json = false;
  };
  auto start_args = std::make_shared<StartArgs>();
  CLI::App* start = app.add_subcommand(
      "start", "Start a run of a flow's active version; prints its id");
  AddUrl(*start, start_args->url);
  start->add_option("FLOW", start_args->flow, "the flow (alias) to run")
      ->required();
  start->add_option("INPUT", start_args->input, "the run input, as JSON")
      ->required();
  AddJsonFlag(*start, start_args->json);
  start->callback([&outcome, start_args] {
    outcome.exit_code = StartRun(start_args->url, start_args->flow,
                                 start_args->input, start_args->json);
  });
}

}  // namespace sluice::cli
