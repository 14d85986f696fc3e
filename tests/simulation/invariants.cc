#include "invariants.h"

#include <map>
#include <utility>

#include "boost/json/array.hpp"
#include "sluice/internal/strings.h"

namespace sluice::simulation {
namespace {

std::optional<Violation> Broken(std::string invariant, std::string detail) {
  return Violation{std::move(invariant), std::move(detail)};
}

std::string Show(const std::optional<Json>& value) {
  return value ? SerializeJson(*value) : std::string("(none)");
}

int MaxAttempts(const SimFlow& flow, int step) {
  return flow.flow.shape().steps[step].spec.max_attempts.value_or(
      flow.flow.shape().options.max_attempts);
}

// A step's output as the engine must have aggregated it from its tasks.
Json AggregateOutput(const SimFlow& flow, int step,
                     const std::vector<const TaskSnapshot*>& tasks) {
  if (flow.flow.shape().steps[step].kind == StepKind::kSingle) {
    return tasks.empty() ? Json() : tasks[0]->task.output.value_or(Json());
  }
  boost::json::array outputs;
  for (const TaskSnapshot* t : tasks) {
    outputs.push_back(t->task.output.value_or(Json()));
  }
  return Json(std::move(outputs));
}

}  // namespace

InvariantChecker::InvariantChecker(const std::vector<SimFlow>& flows,
                                   RunNamer namer)
    : flows_(flows), namer_(std::move(namer)) {}

const SimFlow* InvariantChecker::FlowNamed(std::string_view slug) const {
  for (const SimFlow& f : flows_) {
    if (f.flow.slug() == slug) return &f;
  }
  return nullptr;
}

std::string InvariantChecker::TaskName(const TaskKey& key) const {
  return StrCat(namer_(key.run_id), " step ", key.step_index, " task ",
                key.task_index);
}

std::optional<Violation> InvariantChecker::Check(
    const StoreSnapshot& store, const ReportLedger& ledger,
    std::optional<absl::Time> prune_cutoff) {
  if (auto v = CheckLedger(ledger)) return v;
  if (auto v = CheckVanished(store, prune_cutoff)) return v;
  if (auto v = CheckReports(store)) return v;
  absl::flat_hash_map<RunId, std::vector<int>> pending;
  for (const OutboxReport& r : store.pending_reports) {
    if (r.kind != ReportKind::kCompleted) continue;
    std::vector<int>& counts = pending[r.task.run_id];
    if (counts.size() <= static_cast<size_t>(r.task.step_index)) {
      counts.resize(r.task.step_index + 1, 0);
    }
    ++counts[r.task.step_index];
  }
  for (const auto& run_pointer : store.runs) {
    if (checked_.contains(run_pointer.get())) continue;  // unchanged
    const RunSnapshot& run = *run_pointer;
    RunContext context{
        &run, FlowNamed(run.run.flow_slug), namer_(run.run.run_id), {}};
    if (context.flow == nullptr) {
      return Broken("unknown-flow", StrCat(context.name, " is of flow \"",
                                           run.run.flow_slug, "\""));
    }
    context.pending_completions = pending[run.run.run_id];
    context.pending_completions.resize(run.steps.size(), 0);
    if (auto v = CheckRun(context)) return v;
    if (auto v = CheckHistory(context)) return v;
  }
  last_runs_ = store.runs;
  checked_.clear();
  for (const auto& run : last_runs_) checked_.insert(run.get());
  return std::nullopt;
}

std::optional<Violation> InvariantChecker::CheckLedger(
    const ReportLedger& ledger) {
  auto task_of = [&](int64_t id) {
    auto it = ledger.appended.find(id);
    return it == ledger.appended.end() ? std::string("an unknown task")
                                       : TaskName(it->second);
  };
  if (!ledger.taken_twice.empty()) {
    int64_t id = ledger.taken_twice.front();
    return Broken("report-applied-twice",
                  StrCat("report ", id, " of ", task_of(id),
                         " was taken by two committed transactions"));
  }
  if (!ledger.taken_unknown.empty()) {
    return Broken("report-from-nowhere",
                  StrCat("report ", ledger.taken_unknown.front(),
                         " was applied but no committed transaction wrote it"));
  }
  if (!ledger.reported_twice.empty()) {
    return Broken("task-reported-twice",
                  StrCat(TaskName(ledger.reported_twice.front()),
                         " had two outbox reports appended"));
  }
  return std::nullopt;
}

std::optional<Violation> InvariantChecker::CheckVanished(
    const StoreSnapshot& store, std::optional<absl::Time> prune_cutoff) {
  absl::flat_hash_set<RunId> present;
  for (const auto& r : store.runs) present.insert(r->run.run_id);
  std::vector<RunId> gone;
  for (const auto& [id, seen] : seen_runs_) {
    if (!present.contains(id)) gone.push_back(id);
  }
  std::sort(gone.begin(), gone.end());
  for (const RunId& id : gone) {
    const SeenRun& seen = seen_runs_[id];
    bool pruned = prune_cutoff && IsTerminal(seen.status) && seen.finished_at &&
                  *seen.finished_at < *prune_cutoff;
    if (!pruned) {
      return Broken("run-vanished",
                    StrCat(namer_(id), " (", ToString(seen.status),
                           ") disappeared without being pruned"));
    }
    seen_runs_.erase(id);
    absl::erase_if(seen_tasks_,
                   [&](const auto& entry) { return entry.first.run_id == id; });
  }
  return std::nullopt;
}

std::optional<Violation> InvariantChecker::CheckReports(
    const StoreSnapshot& store) {
  if (store.pending_reports.empty()) return std::nullopt;
  absl::flat_hash_map<RunId, const RunSnapshot*> runs;
  for (const auto& r : store.runs) runs[r->run.run_id] = r.get();
  for (const OutboxReport& r : store.pending_reports) {
    const TaskRecord* task = nullptr;
    if (auto run = runs.find(r.task.run_id); run != runs.end()) {
      for (const TaskSnapshot& t : run->second->tasks) {
        if (t.task.key == r.task) task = &t.task;
      }
    }
    if (task == nullptr) {
      return Broken("report-of-missing-task",
                    StrCat("pending report ", r.report_id, " names ",
                           TaskName(r.task), ", which is not stored"));
    }
    TaskStatus want = r.kind == ReportKind::kCompleted ? TaskStatus::kCompleted
                                                       : TaskStatus::kFailed;
    if (task->status != want) {
      return Broken(
          "report-task-mismatch",
          StrCat("pending ", ToString(r.kind), " report ", r.report_id, " for ",
                 TaskName(r.task), ", which is ", ToString(task->status)));
    }
  }
  return std::nullopt;
}

std::optional<Violation> InvariantChecker::CheckRun(const RunContext& context) {
  const RunSnapshot& run = *context.run;
  int step_count = static_cast<int>(context.flow->flow.shape().steps.size());
  if (static_cast<int>(run.steps.size()) != step_count) {
    return Broken("step-states-missing",
                  StrCat(context.name, " has ", run.steps.size(),
                         " step states; its flow has ", step_count, " steps"));
  }
  for (const TaskSnapshot& task : run.tasks) {
    if (auto v = CheckTask(context, task)) return v;
  }
  if (IsTerminal(run.run.status)) return CheckEndedRun(context);
  return CheckCounters(context);
}

std::optional<Violation> InvariantChecker::CheckTask(
    const RunContext& context, const TaskSnapshot& snapshot) {
  const TaskRecord& task = snapshot.task;
  const RunRecord& run = context.run->run;
  std::string name = TaskName(task.key);
  if (task.key.step_index < 0 ||
      task.key.step_index >= static_cast<int>(context.run->steps.size())) {
    return Broken("task-of-unknown-step", name);
  }
  const StepStateRecord& step = context.run->steps[task.key.step_index];
  bool active = !IsTerminal(task.status);
  if (active && IsTerminal(run.status)) {
    return Broken("active-task-on-ended-run",
                  StrCat(name, " is ", ToString(task.status), " but ",
                         context.name, " is ", ToString(run.status)));
  }
  if (active && step.status != StepStatus::kStarted) {
    return Broken("active-task-on-ended-step",
                  StrCat(name, " is ", ToString(task.status), " but step \"",
                         step.step_slug, "\" is ", ToString(step.status)));
  }
  // A completed task's message is deleted, or archived where the path that
  // completed it archives (decision 0066); every other ended task's is
  // archived.
  bool live = snapshot.message_found && !snapshot.message_archived;
  if (!snapshot.message_found && task.status != TaskStatus::kCompleted) {
    return Broken("task-message-missing",
                  StrCat(name, " is ", ToString(task.status), ": message ",
                         task.message_id, " of queue \"", task.queue_name,
                         "\" is neither live nor archived"));
  }
  if (active && !live) {
    return Broken("active-task-without-live-message",
                  StrCat(name, " is ", ToString(task.status),
                         " but its message is not live: nobody can claim it"));
  }
  if (!active && live) {
    return Broken("ended-task-with-live-message",
                  StrCat(name, " is ", ToString(task.status),
                         " but its message is still live"));
  }
  int max_attempts = MaxAttempts(*context.flow, task.key.step_index);
  if (task.attempts > max_attempts) {
    return Broken("attempts-over-max",
                  StrCat(name, " has ", task.attempts, " attempts; its step",
                         " allows ", max_attempts));
  }
  if (task.status == TaskStatus::kStarted && !task.stall_at) {
    return Broken("started-task-without-lease",
                  StrCat(name, " is started with no stall time"));
  }
  if (task.status == TaskStatus::kCompleted && !task.output) {
    return Broken("completed-task-without-output", name);
  }
  if (task.error.find(kUnexpectedInput) != std::string::npos) {
    return Broken("handler-got-unexpected-input",
                  StrCat(name, " was given ", SerializeJson(task.input)));
  }
  return std::nullopt;
}

std::optional<Violation> InvariantChecker::CheckEndedRun(
    const RunContext& context) {
  const RunRecord& run = context.run->run;
  for (const StepStateRecord& s : context.run->steps) {
    if (!IsTerminal(s.status)) {
      return Broken(
          "ended-run-unfinished-step",
          StrCat(context.name, " is ", ToString(run.status), " but step \"",
                 s.step_slug, "\" is ", ToString(s.status)));
    }
  }
  switch (run.status) {
    case RunStatus::kCompleted: {
      for (const StepStateRecord& s : context.run->steps) {
        if (s.status != StepStatus::kCompleted &&
            s.status != StepStatus::kSkipped) {
          return Broken("completed-run-unfinished-step",
                        StrCat(context.name, " completed but step \"",
                               s.step_slug, "\" is ", ToString(s.status)));
        }
      }
      Json expected = context.flow->expected_output(run.input);
      if (!run.output || *run.output != expected) {
        return Broken(
            "run-output",
            StrCat(context.name, " (", run.flow_slug, " input ",
                   SerializeJson(run.input), ") completed with ",
                   Show(run.output), ", expected ", SerializeJson(expected)));
      }
      break;
    }
    case RunStatus::kFailed:
      // The causes the simulator makes: its handler failures, stalls, and
      // outputs the engine must refuse (a NaN, a non-array for a map).
      if (run.error.find(kSimFailure) == std::string::npos &&
          run.error.rfind("stalled:", 0) != 0 &&
          run.error.rfind("handler output", 0) != 0 &&
          run.error.rfind("[TYPE_VIOLATION]", 0) != 0) {
        return Broken("failed-run-unexplained",
                      StrCat(context.name, " failed: ", run.error));
      }
      break;
    case RunStatus::kCancelled:
      if (!cancel_requested_.contains(run.run_id)) {
        return Broken("cancelled-run-not-requested",
                      StrCat(context.name, " was cancelled: ", run.error));
      }
      break;
    case RunStatus::kStarted:
      break;
  }
  return std::nullopt;
}

std::optional<Violation> InvariantChecker::CheckCounters(
    const RunContext& context) {
  const RunSnapshot& run = *context.run;
  int unfinished = 0;
  for (const StepStateRecord& s : run.steps) {
    if (!IsTerminal(s.status)) ++unfinished;
  }
  if (run.run.remaining_steps != unfinished) {
    return Broken(
        "run-remaining-steps",
        StrCat(context.name, " has remaining_steps ", run.run.remaining_steps,
               " but ", unfinished, " steps are unfinished"));
  }
  for (size_t i = 0; i < run.steps.size(); ++i) {
    if (auto v = CheckStep(context, static_cast<int>(i))) return v;
  }
  return std::nullopt;
}

std::optional<Violation> InvariantChecker::CheckStep(const RunContext& context,
                                                     int step) {
  const RunSnapshot& run = *context.run;
  const StepStateRecord& st = run.steps[step];
  const FlowShape& shape = context.flow->flow.shape();
  std::string where = StrCat(context.name, " step \"", st.step_slug, "\"");
  std::vector<const TaskSnapshot*> tasks;
  int completed = 0;
  for (const TaskSnapshot& t : run.tasks) {
    if (t.task.key.step_index != step) continue;
    tasks.push_back(&t);
    if (t.task.status == TaskStatus::kCompleted) ++completed;
  }
  int unfinished_deps = 0;
  for (const std::string& dep : shape.steps[step].spec.depends_on) {
    if (!IsTerminal(run.steps[shape.StepIndex(dep)].status)) ++unfinished_deps;
  }
  int expected_deps = st.status == StepStatus::kCreated ? unfinished_deps : 0;
  if (st.status != StepStatus::kSkipped && st.remaining_deps != expected_deps) {
    return Broken(
        "step-remaining-deps",
        StrCat(where, " (", ToString(st.status), ") has remaining_deps ",
               st.remaining_deps, ", expected ", expected_deps));
  }
  switch (st.status) {
    case StepStatus::kCreated:
      if (unfinished_deps == 0) {
        return Broken("stuck-step",
                      StrCat(where, " is created with every dependency done"));
      }
      if (!tasks.empty()) {
        return Broken(
            "tasks-before-step-started",
            StrCat(where, " is created but has ", tasks.size(), " tasks"));
      }
      break;
    case StepStatus::kStarted: {
      int count = static_cast<int>(tasks.size());
      if (st.initial_tasks != count) {
        return Broken(
            "step-initial-tasks",
            StrCat(where, " has initial_tasks ", st.initial_tasks.value_or(-1),
                   " but ", count, " tasks"));
      }
      int applied = completed - context.pending_completions[step];
      int expected = count - applied;
      if (st.remaining_tasks != expected) {
        return Broken("step-remaining-tasks",
                      StrCat(where, " has remaining_tasks ",
                             st.remaining_tasks.value_or(-1), " but ", count,
                             " tasks of which ", applied,
                             " completed with their report applied"));
      }
      if (expected <= 0) {
        return Broken("stuck-step",
                      StrCat(where, " is started with every task completed"));
      }
      break;
    }
    case StepStatus::kCompleted: {
      if (completed != static_cast<int>(tasks.size())) {
        return Broken("completed-step-unfinished-task",
                      StrCat(where, " completed with ", completed, " of ",
                             tasks.size(), " tasks completed"));
      }
      if (st.remaining_tasks.value_or(0) != 0) {
        return Broken("step-remaining-tasks",
                      StrCat(where, " completed with remaining_tasks ",
                             *st.remaining_tasks));
      }
      Json expected = AggregateOutput(*context.flow, step, tasks);
      if (!st.output || *st.output != expected) {
        return Broken(
            "step-output",
            StrCat(where, " has output ", Show(st.output),
                   " but its tasks produced ", SerializeJson(expected)));
      }
      break;
    }
    case StepStatus::kSkipped:
      break;
    case StepStatus::kFailed:
    case StepStatus::kCancelled:
      return Broken("ended-step-on-started-run",
                    StrCat(where, " is ", ToString(st.status), " but ",
                           context.name, " is still started"));
  }
  return std::nullopt;
}

std::optional<Violation> InvariantChecker::CheckHistory(
    const RunContext& context) {
  const RunRecord& run = context.run->run;
  auto [seen, is_new] = seen_runs_.try_emplace(run.run_id);
  SeenRun& before = seen->second;
  if (!is_new && IsTerminal(before.status) &&
      (run.status != before.status || run.output != before.output)) {
    return Broken("ended-state-changed",
                  StrCat(context.name, " was ", ToString(before.status),
                         " with output ", Show(before.output), ", now ",
                         ToString(run.status), " with ", Show(run.output)));
  }
  if (is_new || before.status != run.status) {
    before = SeenRun{run.status, run.finished_at, run.output};
  }
  for (const TaskSnapshot& snapshot : context.run->tasks) {
    const TaskRecord& task = snapshot.task;
    auto [it, task_is_new] = seen_tasks_.try_emplace(task.key);
    SeenTask& seen_task = it->second;
    std::string name = TaskName(task.key);
    if (!task_is_new && IsTerminal(seen_task.status) &&
        (task.status != seen_task.status || task.output != seen_task.output)) {
      return Broken("ended-state-changed",
                    StrCat(name, " was ", ToString(seen_task.status), " ",
                           Show(seen_task.output), ", now ",
                           ToString(task.status), " ", Show(task.output)));
    }
    if (task.attempts < seen_task.attempts) {
      return Broken("attempts-decreased",
                    StrCat(name, " went from ", seen_task.attempts, " to ",
                           task.attempts, " attempts"));
    }
    bool newly_completed = task.status == TaskStatus::kCompleted &&
                           (task_is_new || seen_task.status != task.status);
    if (newly_completed) {
      const Handler& handler = context.flow->flow.handler(task.key.step_index);
      TaskContext handler_context(TaskContext::Info{}, CancelToken());
      absl::StatusOr<StepResult> expected =
          handler(task.input, handler_context);
      if (!expected.ok() || expected->is_fan_out() || !task.output ||
          *task.output != expected->output()) {
        return Broken("task-output",
                      StrCat(name, " completed with ", Show(task.output),
                             " for input ", SerializeJson(task.input)));
      }
    }
    if (task_is_new || seen_task.status != task.status) {
      seen_task = SeenTask{task.status, task.attempts, task.output};
    }
    seen_task.attempts = task.attempts;
  }
  return std::nullopt;
}

std::optional<Violation> InvariantChecker::CheckSettled(
    const StoreSnapshot& store) {
  for (const auto& run_pointer : store.runs) {
    const RunSnapshot& run = *run_pointer;
    if (IsTerminal(run.run.status)) continue;
    std::string detail =
        StrCat(namer_(run.run.run_id), " of ", run.run.flow_slug,
               " is still started after faults stopped; steps:");
    for (const StepStateRecord& s : run.steps) {
      StrAppend(&detail, " ", s.step_slug, "=", ToString(s.status));
    }
    StrAppend(&detail, "; tasks:");
    for (const TaskSnapshot& t : run.tasks) {
      StrAppend(&detail, " ", t.task.key.step_index, "/", t.task.key.task_index,
                "=", ToString(t.task.status), "@", t.task.attempts);
    }
    return Broken("run-never-ended", detail);
  }
  if (!store.pending_reports.empty()) {
    return Broken("reports-left-behind",
                  StrCat(store.pending_reports.size(),
                         " reports were never applied, the first for ",
                         TaskName(store.pending_reports.front().task)));
  }
  return std::nullopt;
}

}  // namespace sluice::simulation
