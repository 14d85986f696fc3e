// The simulator's steps: each drives one engine call (or a few, as a worker
// would) and traces what it did.
#include <algorithm>
#include <limits>
#include <utility>

#include "sim_world.h"
#include "sluice/errors.h"
#include "sluice/internal/strings.h"

namespace sluice::simulation {
namespace {

std::string_view DispositionName(ResultDisposition d) {
  switch (d) {
    case ResultDisposition::kCompleted:
      return "completed";
    case ResultDisposition::kRetrying:
      return "retrying";
    case ResultDisposition::kFailed:
      return "failed";
    case ResultDisposition::kStale:
      return "stale";
    case ResultDisposition::kCancelled:
      return "cancelled";
    case ResultDisposition::kNotFound:
      return "not_found";
  }
  return "?";
}

}  // namespace

bool World::Deploy(SimWorker& worker) {
  int64_t before = faulty_->injected();
  absl::StatusOr<DeployOutcome> deployed =
      engine_->Deploy(flows_[worker.flow].flow);
  if (!deployed.ok()) return Expect(deployed.status(), before, "Deploy");
  worker.deployed = true;
  return true;
}

bool World::StartRuns() {
  const SimFlow& flow = flows_[random_.Index(flows_.size())];
  int64_t room = options_.max_runs - static_cast<int64_t>(runs_.size());
  int64_t count = random_.Between(1, std::min<int64_t>(3, room));
  std::vector<Json> inputs;
  std::string line = StrCat("    ", flow.flow.slug());
  for (int64_t i = 0; i < count; ++i) {
    inputs.push_back(flow.make_input(random_));
    StrAppend(&line, " ", SerializeJson(inputs.back()));
  }
  int64_t before = faulty_->injected();
  absl::StatusOr<std::vector<RunId>> ids =
      engine_->StartRuns(flow.flow.slug(), inputs);
  Trace(line);
  if (!ids.ok()) return Expect(ids.status(), before, "StartRuns");
  line = "    started";
  for (const RunId& id : *ids) {
    runs_.push_back(id);
    run_numbers_[id] = static_cast<int>(runs_.size());
    ++result_.runs_started;
    StrAppend(&line, " ", RunName(id));
  }
  Trace(line);
  return true;
}

InFlight World::RunHandler(const ClaimedTask& task) {
  const SimFlow* flow = nullptr;
  for (const SimFlow& f : flows_) {
    if (f.flow.slug() == task.flow_slug) flow = &f;
  }
  absl::Time now = clock_.Now();
  InFlight f{task, Json(), now, false};
  TaskContext context(
      TaskContext::Info{task.key.run_id, task.flow_slug, task.step_slug,
                        task.key.task_index, task.attempt, task.max_attempts,
                        task.deadline},
      CancelToken());
  f.outcome = flow->flow.handler(task.key.step_index)(task.input, context);
  if (settling_) return f;
  int64_t lease_ms = absl::ToInt64Milliseconds(task.deadline - now);
  f.report_at =
      now + absl::Milliseconds(random_.Between(0, lease_ms * 14 / 10));
  if (random_.Chance(profile_.handler_hangs)) {
    f.hangs = true;
  } else if (random_.Chance(profile_.handler_fatal)) {
    f.outcome = NonRetryable(StrCat(kSimFailure, ": fatal"));
  } else if (random_.Chance(profile_.handler_poison)) {
    // The one step whose output feeds a map gets a non-array (a type
    // violation); any other step a NaN (refused as handler output).
    bool feeds_map = task.flow_slug == "fanout" && task.key.step_index == 0;
    f.outcome = feeds_map ? Json("not an array")
                          : Json(std::numeric_limits<double>::quiet_NaN());
  } else if (random_.Chance(profile_.handler_fails)) {
    f.outcome = random_.Chance(0.25)
                    ? RetryAfter(absl::Seconds(random_.Between(0, 20)),
                                 StrCat(kSimFailure, ": rate limited"))
                    : absl::UnavailableError(StrCat(kSimFailure, ": flaky"));
  }
  return f;
}

bool World::ClaimTasks(SimWorker& worker) {
  if (!worker.deployed && !Deploy(worker)) return false;
  if (!worker.deployed) return true;  // an injected failure; try again later
  const Flow& flow = flows_[worker.flow].flow;
  ClaimRequest request;
  request.queue = flow.shape().steps.front().queue_name;
  request.worker_id = worker.id;
  request.served.AddFlow(flow.shape());
  request.limit = settling_ ? 50 : static_cast<int>(random_.Between(1, 4));
  int64_t before = faulty_->injected();
  absl::StatusOr<std::vector<ClaimedTask>> claimed = engine_->Claim(request);
  if (!claimed.ok()) return Expect(claimed.status(), before, "Claim");
  std::string line = StrCat("    ", flow.slug(), " got ", claimed->size());
  for (const ClaimedTask& task : *claimed) {
    StrAppend(&line, " ", TaskName(task.key, task.attempt));
  }
  Trace(line);
  for (const ClaimedTask& task : *claimed) {
    if (!claimed_attempts_.insert({task.key, task.attempt}).second) {
      Fail("task-claimed-twice",
           StrCat(TaskName(task.key, task.attempt),
                  " was claimed again with the same attempt number"));
      return false;
    }
    ++result_.tasks_claimed;
    worker.in_flight.push_back(RunHandler(task));
  }
  return true;
}

bool World::ReportResults(SimWorker& worker, bool all_due) {
  absl::Time now = clock_.Now();
  std::vector<TaskResult> results = std::move(worker.unsent);
  worker.unsent.clear();
  std::vector<InFlight> waiting;
  for (InFlight& f : worker.in_flight) {
    if (!f.hangs && (all_due || f.report_at <= now)) {
      results.push_back({f.task.key, f.task.attempt, std::move(f.outcome)});
    } else {
      waiting.push_back(std::move(f));
    }
  }
  worker.in_flight = std::move(waiting);
  // One result per task: a result kept from a failed call may be for an
  // attempt this worker has since claimed again; the newest attempt wins.
  std::stable_sort(results.begin(), results.end(),
                   [](const TaskResult& a, const TaskResult& b) {
                     return a.key != b.key ? a.key < b.key
                                           : a.attempt > b.attempt;
                   });
  results.erase(std::unique(results.begin(), results.end(),
                            [](const TaskResult& a, const TaskResult& b) {
                              return a.key == b.key;
                            }),
                results.end());
  if (results.empty()) return true;
  int64_t before = faulty_->injected();
  absl::StatusOr<FinishOutcome> outcome = engine_->FinishTasks(results);
  if (!outcome.ok()) {
    if (!Expect(outcome.status(), before, "FinishTasks")) return false;
    if (settling_ || random_.Chance(0.7)) worker.unsent = std::move(results);
    return true;
  }
  std::string line = "   ";
  for (size_t i = 0; i < results.size(); ++i) {
    StrAppend(&line, " ", TaskName(results[i].key, results[i].attempt), " ",
              results[i].outcome.ok() ? "ok" : "error", "->",
              DispositionName(outcome->dispositions[i]));
  }
  Trace(line);
  if (outcome->report_ids.empty()) return true;
  if (!settling_ && random_.Chance(0.15)) {
    Trace("    reports left for later");
    worker.unapplied.insert(worker.unapplied.end(), outcome->report_ids.begin(),
                            outcome->report_ids.end());
    return true;
  }
  before = faulty_->injected();
  absl::Status applied = engine_->ApplyReports(outcome->report_ids);
  if (!applied.ok()) {
    if (!Expect(applied, before, "ApplyReports")) return false;
    if (random_.Chance(0.5)) {
      worker.unapplied.insert(worker.unapplied.end(),
                              outcome->report_ids.begin(),
                              outcome->report_ids.end());
    }
  }
  return true;
}

bool World::Heartbeat(SimWorker& worker) {
  std::vector<Lease> leases;
  std::vector<size_t> index;
  // One lease per task (ExtendLeases refuses a key twice): a worker that
  // claimed a task again while an older attempt's handler still runs extends
  // the newest attempt only, as the real worker does.
  absl::flat_hash_map<TaskKey, size_t> newest;
  for (size_t i = 0; i < worker.in_flight.size(); ++i) {
    const InFlight& f = worker.in_flight[i];
    if (f.hangs) continue;  // a hung handler is silent
    auto [it, inserted] = newest.try_emplace(f.task.key, i);
    if (!inserted && worker.in_flight[it->second].task.attempt < f.task.attempt)
      it->second = i;
  }
  for (size_t i = 0; i < worker.in_flight.size(); ++i) {
    const InFlight& f = worker.in_flight[i];
    auto it = newest.find(f.task.key);
    if (it == newest.end() || it->second != i) continue;
    leases.push_back({f.task.key, f.task.attempt});
    index.push_back(i);
  }
  if (leases.empty()) return true;
  int64_t before = faulty_->injected();
  absl::StatusOr<std::vector<LeaseState>> owned = engine_->ExtendLeases(leases);
  if (!owned.ok()) return Expect(owned.status(), before, "ExtendLeases");
  std::vector<bool> drop(worker.in_flight.size(), false);
  std::string line = StrCat("    extended ", leases.size());
  for (size_t l = 0; l < leases.size(); ++l) {
    if ((*owned)[l] == LeaseState::kOwned) continue;
    StrAppend(&line, "; lost ", TaskName(leases[l].key, leases[l].attempt));
    // Half the handlers notice the cancel token and stop; the others finish
    // and report late.
    if (random_.Chance(0.5)) drop[index[l]] = true;
  }
  Trace(line);
  std::vector<InFlight> kept;
  for (size_t i = 0; i < worker.in_flight.size(); ++i) {
    if (!drop[i]) kept.push_back(std::move(worker.in_flight[i]));
  }
  worker.in_flight = std::move(kept);
  return true;
}

bool World::PushReports(SimWorker& worker) {
  if (worker.unapplied.empty()) return true;
  std::vector<int64_t> ids = std::move(worker.unapplied);
  worker.unapplied.clear();
  Trace(StrCat("    ", ids.size(), " reports"));
  int64_t before = faulty_->injected();
  absl::Status applied = engine_->ApplyReports(ids);
  if (applied.ok()) return true;
  if (!Expect(applied, before, "ApplyReports")) return false;
  if (random_.Chance(0.5)) worker.unapplied = std::move(ids);
  return true;
}

bool World::SweepReports() {
  int limit = settling_ ? 10'000 : static_cast<int>(random_.Between(1, 20));
  for (int round = 0; round < 100; ++round) {
    int64_t before = faulty_->injected();
    absl::StatusOr<int> applied = engine_->ApplyStaleReports(limit);
    if (!applied.ok()) return Expect(applied.status(), before, "Sweep");
    Trace(StrCat("    applied ", *applied, " stale reports"));
    if (!settling_ || *applied < limit) break;
  }
  return true;
}

bool World::RecoverStalled() {
  int limit = settling_ ? 10'000 : static_cast<int>(random_.Between(1, 20));
  int64_t before = faulty_->injected();
  absl::StatusOr<int> handled = engine_->RecoverStalledTasks(limit);
  if (!handled.ok()) return Expect(handled.status(), before, "Recover");
  Trace(StrCat("    recovered ", *handled, " stalled tasks"));
  return true;
}

bool World::CancelRun() {
  const RunId& id = started_runs_[random_.Index(started_runs_.size())];
  checker_.NoteCancelRequested(id);
  Trace(StrCat("    ", RunName(id)));
  int64_t before = faulty_->injected();
  return Expect(engine_->CancelRun(id, CancelMode::kImmediate), before,
                "CancelRun");
}

bool World::Crash() {
  ++result_.crashes;
  engine_.reset();
  size_t count = workers_.size();
  workers_.clear();
  CreateEngine();
  for (size_t i = 0; i < count; ++i) {
    workers_.push_back(NewWorker(random_.Index(flows_.size())));
  }
  return true;
}

bool World::ReplaceWorker(SimWorker& worker) {
  worker = NewWorker(random_.Index(flows_.size()));
  Trace(StrCat("    ", worker.id, " serves ", flows_[worker.flow].flow.slug()));
  return true;
}

bool World::PruneRuns(std::optional<absl::Time>& cutoff) {
  absl::Time before_time = clock_.Now() - absl::Minutes(1);
  int limit = static_cast<int>(random_.Between(1, 5));
  int64_t before = faulty_->injected();
  absl::StatusOr<int> deleted = engine_->PruneRuns(before_time, limit);
  if (!deleted.ok()) return Expect(deleted.status(), before, "PruneRuns");
  Trace(StrCat("    deleted ", *deleted, " runs"));
  cutoff = before_time;
  return true;
}

}  // namespace sluice::simulation
