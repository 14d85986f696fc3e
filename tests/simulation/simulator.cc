#include "simulator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "sim_world.h"
#include "sluice/backends.h"
#include "sluice/internal/strings.h"
#include "store_snapshot.h"

namespace sluice::simulation {
namespace {

// Separate streams for the steps, the run ids and the injected failures,
// so that a change in one (say, another fault rate) leaves the others be.
constexpr uint64_t kIdStream = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kFaultStream = 0xbf58476d1ce4e5b9ULL;

SimProfile DrawProfile(SimRandom& random) {
  static constexpr double kFaultRates[] = {0, 0.01, 0.03, 0.1};
  SimProfile p;
  p.fault_rate = kFaultRates[random.Index(4)];
  p.handler_fails = static_cast<double>(random.Between(0, 30)) / 100;
  p.handler_fatal = static_cast<double>(random.Between(0, 3)) / 100;
  p.handler_hangs = static_cast<double>(random.Between(0, 8)) / 100;
  p.handler_poison = static_cast<double>(random.Between(0, 2)) / 100;
  p.workers = static_cast<int>(random.Between(1, 6));
  p.crash_weight = static_cast<int>(random.Between(0, 2));
  return p;
}

}  // namespace

SimResult Simulate(const SimOptions& options) {
  World world(options);
  return world.Run();
}

World::World(const SimOptions& options)
    : options_(options),
      random_(options.seed),
      ids_random_(options.seed ^ kIdStream),
      clock_(absl::FromUnixSeconds(1'900'000'000)),
      start_time_(clock_.Now()),
      flows_(MakeSimFlows()),
      checker_(flows_, [this](const RunId& id) { return RunName(id); }) {
  result_.seed = options.seed;
  profile_ = DrawProfile(random_);
  absl::StatusOr<std::unique_ptr<Backend>> store = OpenBackend("memory:");
  store_ = std::move(*store);
  Backend* target = store_.get();
  if (options_.interpose) {
    interposed_ = options_.interpose(*store_);
    target = interposed_.get();
  }
  faulty_ = std::make_unique<SimBackend>(*target, options.seed ^ kFaultStream);
  CreateEngine();
  for (int i = 0; i < profile_.workers; ++i) {
    workers_.push_back(NewWorker(static_cast<size_t>(i) % flows_.size()));
  }
}

void World::CreateEngine() {
  EngineOptions options;
  options.clock = &clock_;
  options.claim_grace = absl::Seconds(2);
  options.recovery_grace = absl::Seconds(5);
  options.stall_budget = 2;
  options.report_stale_after = absl::Seconds(10);
  options.log = [this](LogLevel, std::string_view line) {
    if (options_.trace) Trace(StrCat("    log: ", line));
  };
  options.run_id_source = [this] {
    // Version 7 like RunId::Random, from the simulated clock and the seed.
    uint64_t millis = static_cast<uint64_t>(absl::ToUnixMillis(clock_.Now()));
    uint64_t high =
        (millis << 16) | 0x7000ULL | (ids_random_.Next() & 0x0FFFULL);
    uint64_t low =
        (ids_random_.Next() & ~(0xC000ULL << 48)) | (0x8000ULL << 48);
    return RunId(high, low);
  };
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(*faulty_, std::move(options));
  engine_ = std::move(*engine);
}

SimWorker World::NewWorker(size_t flow) {
  SimWorker worker;
  worker.id = StrCat("w", next_worker_++);
  worker.flow = flow;
  return worker;
}

void World::Trace(std::string line) {
  if (options_.trace) options_.trace(line);
}

std::string World::RunName(const RunId& id) const {
  auto it = run_numbers_.find(id);
  return it == run_numbers_.end() ? StrCat("r?", id.ToString())
                                  : StrCat("r", it->second);
}

std::string World::TaskName(const TaskKey& key, int attempt) const {
  return StrCat(RunName(key.run_id), "/", key.step_index, ".", key.task_index,
                "@", attempt);
}

void World::Fail(std::string invariant, std::string detail) {
  if (result_.violation) return;
  result_.violation = Violation{std::move(invariant), std::move(detail)};
  result_.failed_step = step_;
}

bool World::Expect(const absl::Status& status, int64_t injected_before,
                   std::string_view call) {
  if (status.ok()) return true;
  if (faulty_->injected() > injected_before) {
    Trace(StrCat("    ", call, " failed: injected"));
    return true;
  }
  Fail("unexpected-engine-error", StrCat(call, ": ", status.ToString()));
  return false;
}

SimResult World::Run() {
  Trace(absl::StrFormat(
      "seed %d: fault rate %.2f, handler fails %.2f fatal %.2f hangs %.2f "
      "poison %.2f, %d workers, crash weight %d",
      options_.seed, profile_.fault_rate, profile_.handler_fails,
      profile_.handler_fatal, profile_.handler_hangs, profile_.handler_poison,
      profile_.workers, profile_.crash_weight));
  for (const SimFlow& flow : flows_) {
    int64_t before = faulty_->injected();
    if (!Expect(engine_->Deploy(flow.flow).status(), before, "deploy")) {
      return result_;
    }
  }
  faults_on_ = profile_.fault_rate > 0;
  faulty_->set_failure_rate(faults_on_ ? profile_.fault_rate : 0);
  for (step_ = 1; step_ <= options_.steps; ++step_) {
    if (!Step(step_)) break;
  }
  if (!result_.violation) Settle();
  result_.steps = step_;
  result_.injected_failures = faulty_->injected();
  if (absl::StatusOr<StoreSnapshot> store = ReadStore(*store_); store.ok()) {
    for (const auto& r : store->runs) {
      result_.runs_completed += r->run.status == RunStatus::kCompleted;
      result_.runs_failed += r->run.status == RunStatus::kFailed;
      result_.runs_cancelled += r->run.status == RunStatus::kCancelled;
    }
  }
  return result_;
}

bool World::Step(int number) {
  enum Kind {
    kStart,
    kClaim,
    kReport,
    kHeartbeat,
    kPush,
    kSweep,
    kRecover,
    kTick,
    kJump,
    kCancel,
    kCrash,
    kReplaceWorker,
    kPrune,
    kToggleFaults
  };
  std::vector<int> weights = {
      runs_.size() < static_cast<size_t>(options_.max_runs) ? 6 : 0,
      12,
      12,
      4,
      3,
      3,
      3,
      10,
      2,
      started_runs_.empty() ? 0 : 1,
      profile_.crash_weight,
      1,
      1,
      profile_.fault_rate > 0 ? 1 : 0};
  Kind kind = static_cast<Kind>(random_.Weighted(weights));
  SimWorker* worker = &workers_[random_.Index(workers_.size())];
  std::string prefix = absl::StrFormat(
      "#%d +%.3fs", number, absl::ToDoubleSeconds(clock_.Now() - start_time_));
  std::optional<absl::Time> prune_cutoff;
  bool ok = true;
  switch (kind) {
    case kStart:
      Trace(StrCat(prefix, " start runs"));
      ok = StartRuns();
      break;
    case kClaim:
      Trace(StrCat(prefix, " ", worker->id, " claim"));
      ok = ClaimTasks(*worker);
      break;
    case kReport:
      Trace(StrCat(prefix, " ", worker->id, " report"));
      ok = ReportResults(*worker, /*all_due=*/false);
      break;
    case kHeartbeat:
      Trace(StrCat(prefix, " ", worker->id, " heartbeat"));
      ok = Heartbeat(*worker);
      break;
    case kPush:
      Trace(StrCat(prefix, " ", worker->id, " push reports"));
      ok = PushReports(*worker);
      break;
    case kSweep:
      Trace(StrCat(prefix, " sweep stale reports"));
      ok = SweepReports();
      break;
    case kRecover:
      Trace(StrCat(prefix, " recover stalled tasks"));
      ok = RecoverStalled();
      break;
    case kTick: {
      absl::Duration d = absl::Milliseconds(random_.Between(100, 3000));
      Trace(StrCat(prefix, " clock +", absl::FormatDuration(d)));
      clock_.Advance(d);
      break;
    }
    case kJump: {
      absl::Duration d = absl::Seconds(random_.Between(10, 180));
      Trace(StrCat(prefix, " clock jumps +", absl::FormatDuration(d)));
      clock_.Advance(d);
      break;
    }
    case kCancel:
      Trace(StrCat(prefix, " cancel"));
      ok = CancelRun();
      break;
    case kCrash:
      Trace(StrCat(prefix, " crash: engine and workers dropped"));
      ok = Crash();
      break;
    case kReplaceWorker:
      Trace(StrCat(prefix, " ", worker->id, " dies; a new worker starts"));
      ok = ReplaceWorker(*worker);
      break;
    case kPrune:
      Trace(StrCat(prefix, " prune"));
      ok = PruneRuns(prune_cutoff);
      break;
    case kToggleFaults:
      faults_on_ = !faults_on_;
      faulty_->set_failure_rate(faults_on_ ? profile_.fault_rate : 0);
      Trace(StrCat(prefix, " faults ", faults_on_ ? "on" : "off"));
      break;
  }
  return ok && CheckNow(prune_cutoff);
}

bool World::CheckNow(std::optional<absl::Time> prune_cutoff, bool full) {
  if (result_.violation) return false;
  std::vector<RunId> touched = faulty_->TakeTouchedRuns();
  for (auto& message : faulty_->TakeEndedMessages()) {
    auto owner = message_runs_.find(message);
    if (owner == message_runs_.end()) {
      full = true;  // a message of no known task: read everything
    } else {
      touched.push_back(owner->second);
    }
  }
  // Every 25 steps, and whenever asked, every run is read again, as a guard
  // on the tracking of what changed.
  if (step_ % 25 == 0) full = true;
  absl::StatusOr<StoreSnapshot> store =
      ReadStore(*store_, full ? nullptr : &last_store_, touched);
  if (!store.ok()) {
    Fail("store-unreadable", store.status().ToString());
    return false;
  }
  if (std::optional<Violation> v =
          checker_.Check(*store, faulty_->ledger(), prune_cutoff)) {
    Fail(v->invariant, v->detail);
    return false;
  }
  absl::flat_hash_set<const RunSnapshot*> carried;
  for (const auto& r : last_store_.runs) carried.insert(r.get());
  started_runs_.clear();
  for (const auto& r : store->runs) {
    if (!carried.contains(r.get())) {
      for (const TaskSnapshot& t : r->tasks) {
        message_runs_.try_emplace({t.task.queue_name, t.task.message_id},
                                  r->run.run_id);
      }
    }
    if (r->run.status == RunStatus::kStarted) {
      started_runs_.push_back(r->run.run_id);
    }
  }
  last_store_ = std::move(*store);
  return true;
}

bool World::Settle() {
  faults_on_ = false;
  settling_ = true;
  faulty_->set_failure_rate(0);
  Trace(StrCat("settle: faults off; every worker stops"));
  // The workers die with whatever they hold; stall recovery takes it back.
  workers_.clear();
  for (size_t f = 0; f < flows_.size(); ++f) workers_.push_back(NewWorker(f));
  for (int round = 0; round < options_.settle_rounds; ++round, ++step_) {
    Trace(absl::StrFormat("#%d +%.3fs settle round %d", step_,
                          absl::ToDoubleSeconds(clock_.Now() - start_time_),
                          round + 1));
    if (!SettleRound() || !CheckNow()) return false;
    if (!checker_.CheckSettled(last_store_)) {
      // Settled: one last check that reads every run again.
      return CheckNow(std::nullopt, /*full=*/true);
    }
    clock_.Advance(absl::Seconds(30));
  }
  absl::StatusOr<StoreSnapshot> store = ReadStore(*store_);
  if (store.ok()) {
    if (std::optional<Violation> v = checker_.CheckSettled(*store)) {
      Fail(v->invariant, v->detail);
    }
  }
  return !result_.violation;
}

bool World::SettleRound() {
  for (SimWorker& worker : workers_) {
    // Claim and finish until the queue has nothing claimable now.
    for (int batch = 0; batch < 100; ++batch) {
      size_t before = worker.in_flight.size();
      if (!ClaimTasks(worker)) return false;
      if (worker.in_flight.size() == before) break;
      for (InFlight& f : worker.in_flight) f.report_at = clock_.Now();
      if (!ReportResults(worker, /*all_due=*/true)) return false;
    }
  }
  if (!SweepReports() || !RecoverStalled()) return false;
  return true;
}

}  // namespace sluice::simulation
