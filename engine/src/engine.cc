// Engine: construction, deployment, runs, and the admin reads.
#include "sluice/engine.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "engine_impl.h"
#include "ledger.h"
#include "queue_registry.h"
#include "run_id_draw.h"
#include "run_options.h"
#include "run_progress.h"
#include "sluice/internal/implicit_steps.h"
#include "sluice/internal/one_trip_reads.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/stores_payload_copies.h"
#include "sluice/internal/strings.h"
#include "write_batch.h"

namespace sluice {

std::string_view ToString(DeployOutcome outcome) {
  switch (outcome) {
    case DeployOutcome::kCompiled:
      return "compiled";
    case DeployOutcome::kVerified:
      return "verified";
    case DeployOutcome::kRecompiled:
      return "recompiled";
  }
  return "unknown";
}

std::string_view ToString(EventKind kind) {
  switch (kind) {
    case EventKind::kRunStarted:
      return "run:started";
    case EventKind::kRunCompleted:
      return "run:completed";
    case EventKind::kRunFailed:
      return "run:failed";
    case EventKind::kRunCancelled:
      return "run:cancelled";
    case EventKind::kStepStarted:
      return "step:started";
    case EventKind::kStepCompleted:
      return "step:completed";
    case EventKind::kStepFailed:
      return "step:failed";
    case EventKind::kStepSkipped:
      return "step:skipped";
  }
  return "unknown";
}

// --- Engine::Impl -----------------------------------------------------------

Engine::Impl::Impl(Backend& backend, EngineOptions options)
    : backend_(backend),
      backend_stores_copies_(
          dynamic_cast<internal::StoresPayloadCopies*>(&backend) != nullptr),
      options_(std::move(options)) {
  if (options_.clock == nullptr) options_.clock = Clock::Real();
}

void Engine::Impl::Log(LogLevel level, std::string_view message) const {
  if (options_.log) {
    options_.log(level, message);
    return;
  }
  if (level == LogLevel::kInfo) return;
  std::fprintf(stderr, "sluice %s: %.*s\n",
               level == LogLevel::kError ? "error" : "warning",
               static_cast<int>(message.size()), message.data());
}

absl::StatusOr<std::shared_ptr<const CompiledFlow>> Engine::Impl::FlowFor(
    Transaction& tx, std::string_view slug) {
  // Only a development recompilation changes a stored flow, so only then
  // does the cache need checking against the stored generation.
  if (std::shared_ptr<const CompiledFlow> cached = CachedFlowFor(slug)) {
    return cached;
  }
  SLUICE_ASSIGN_OR_RETURN(std::optional<FlowRecord> record, tx.GetFlow(slug));
  if (!record) {
    return absl::NotFoundError(
        StrCat("flow \"", slug,
               "\" is not deployed; deploy it (Engine::Deploy, or start a "
               "worker for it) first"));
  }
  if (options_.development_recompile) {
    absl::MutexLock lock(&flows_mu_);
    auto it = flows_.find(ToAbsl(slug));
    if (it != flows_.end() && it->second.generation == record->generation) {
      return it->second.flow;
    }
  }
  SLUICE_ASSIGN_OR_RETURN(FlowShape shape,
                          FlowShape::FromJson(record->definition));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledFlow> flow,
                          CompiledFlow::Compile(std::move(shape)));
  RememberFlow(flow, record->generation);
  return flow;
}

std::shared_ptr<const CompiledFlow> Engine::Impl::CachedFlowFor(
    std::string_view slug) {
  if (options_.development_recompile) return nullptr;
  absl::MutexLock lock(&flows_mu_);
  auto it = flows_.find(ToAbsl(slug));
  return it == flows_.end() ? nullptr : it->second.flow;
}

void Engine::Impl::RememberFlow(std::shared_ptr<const CompiledFlow> flow,
                                int64_t generation) {
  // A copy, once cached, stays alive for the engine's lifetime: pointers
  // into it (steps, shapes) must remain valid for code still using them.
  absl::MutexLock lock(&flows_mu_);
  std::string slug = flow->slug();
  auto [it, inserted] =
      flows_.try_emplace(std::move(slug), CachedFlow{flow, generation});
  if (inserted || it->second.generation == generation) return;
  retired_flows_.push_back(std::move(it->second.flow));
  it->second = CachedFlow{std::move(flow), generation};
}

void Engine::Impl::ForgetFlow(std::string_view slug) {
  absl::MutexLock lock(&flows_mu_);
  auto it = flows_.find(ToAbsl(slug));
  if (it == flows_.end()) return;
  retired_flows_.push_back(std::move(it->second.flow));
  flows_.erase(it);
}

absl::StatusOr<const CompiledFlow*> FlowLookup::Get(std::string_view slug) {
  if (last_ != nullptr && last_->slug() == slug) return last_.get();
  if (tx_ != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(last_, impl_.FlowFor(*tx_, slug));
    return last_.get();
  }
  last_ = impl_.CachedFlowFor(slug);
  if (last_ == nullptr) {
    return absl::FailedPreconditionError(
        StrCat("flow \"", slug, "\" is not cached; read it in a transaction"));
  }
  return last_.get();
}

absl::StatusOr<std::string> Engine::Impl::CurrentTraceparent() const {
  if (options_.tracer == nullptr) return std::string();
  std::string traceparent = options_.tracer->CurrentTraceparent();
  if (traceparent.empty()) return traceparent;
  if (absl::Status bad = ValidateTraceparent(traceparent); !bad.ok()) {
    return absl::InvalidArgumentError(
        StrCat("EngineOptions::tracer's CurrentTraceparent: ", bad.message()));
  }
  return traceparent;
}

absl::StatusOr<std::unique_ptr<Transaction>> Engine::Impl::Begin() {
  return backend_.Begin();
}

absl::Status Engine::Impl::Commit(Transaction& tx, TransactionEffects effects) {
  SLUICE_RETURN_IF_ERROR(events_.CommitAndPublish([&tx] { return tx.Commit(); },
                                                  std::move(effects.events)));
  if (!effects.runs.empty()) metrics_.AddRuns(effects.runs);
  for (const std::string& queue : effects.queues_to_wake) {
    signals_.Notify(queue);
  }
  return absl::OkStatus();
}

void Engine::Impl::PublishCommitted(TransactionEffects effects) {
  events_
      .CommitAndPublish([] { return absl::OkStatus(); },
                        std::move(effects.events))
      .IgnoreError();  // the no-op commit can't fail
  for (const std::string& queue : effects.queues_to_wake) {
    signals_.Notify(queue);
  }
}

// --- Engine -----------------------------------------------------------------

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

namespace {

// A store name of EngineOptions (store_name, a key of stores).
absl::Status CheckStoreName(std::string_view what, std::string_view name) {
  bool ok = !name.empty() && name.size() <= 64;
  for (char c : name) {
    ok = ok && (absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                c == '_' || c == '.' || c == ':' || c == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("engine options: ", what, " \"", name,
             "\" must be 1..64 characters of [A-Za-z0-9_.:-]"));
}

absl::Status CheckStores(const EngineOptions& options, const Backend& own) {
  if (options.stores.empty()) {
    if (options.store_name.empty()) return absl::OkStatus();
    return CheckStoreName("store_name", options.store_name);
  }
  if (options.store_name.empty()) {
    return absl::InvalidArgumentError(
        "engine options: stores are set but store_name is empty; children "
        "in another store name their parent's store by it");
  }
  SLUICE_RETURN_IF_ERROR(CheckStoreName("store_name", options.store_name));
  for (const auto& [name, backend] : options.stores) {
    SLUICE_RETURN_IF_ERROR(CheckStoreName("stores key", name));
    if (name == options.store_name) {
      return absl::InvalidArgumentError(
          StrCat("engine options: stores names \"", name,
                 "\", this engine's own store_name"));
    }
    if (backend == nullptr || backend == &own) {
      return absl::InvalidArgumentError(
          StrCat("engine options: store \"", name, "\" is ",
                 backend == nullptr ? "null" : "this engine's own backend"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(Backend& backend,
                                                       EngineOptions options) {
  if (backend.interface_version() != Backend::kInterfaceVersion) {
    return absl::FailedPreconditionError(
        StrCat("backend \"", backend.name(), "\" implements interface version ",
               backend.interface_version(), " but this engine needs version ",
               Backend::kInterfaceVersion, "; rebuild the backend"));
  }
  if (options.stall_budget < 0 || options.claim_grace < absl::ZeroDuration() ||
      options.recovery_grace < options.claim_grace ||
      options.report_stale_after < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "engine options: stall_budget, claim_grace and report_stale_after "
        "must be >= 0 and recovery_grace >= claim_grace");
  }
  if (options.worker_retention <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        StrCat("engine options: worker_retention ",
               absl::FormatDuration(options.worker_retention),
               " must be positive (InfiniteDuration() keeps every row)"));
  }
  SLUICE_RETURN_IF_ERROR(CheckStores(options, backend));
  // A peer engine creates, reads and cancels children in its store; it
  // shares the clock and log, and knows no stores of its own.
  std::vector<std::pair<std::string, std::unique_ptr<Engine>>> peers;
  for (const auto& [name, peer_backend] : options.stores) {
    EngineOptions peer_options;
    peer_options.clock = options.clock;
    peer_options.log = options.log;
    peer_options.report_stale_after = options.report_stale_after;
    peer_options.max_payload_bytes = options.max_payload_bytes;
    peer_options.max_fan_out_depth = options.max_fan_out_depth;
    peer_options.store_name = name;
    absl::StatusOr<std::unique_ptr<Engine>> peer =
        Create(*peer_backend, std::move(peer_options));
    if (!peer.ok()) {
      return absl::Status(peer.status().code(),
                          StrCat("engine options: store \"", name,
                                 "\": ", peer.status().message()));
    }
    peers.emplace_back(name, *std::move(peer));
  }
  auto impl = std::make_unique<Impl>(backend, std::move(options));
  for (auto& [name, peer] : peers) impl->AddPeer(name, std::move(peer));
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine* Engine::Impl::Peer(std::string_view name) const {
  auto it = peers_.find(std::string(name));
  return it == peers_.end() ? nullptr : it->second.get();
}

Clock& Engine::clock() const { return impl_->clock(); }
Backend& Engine::backend() const { return impl_->backend(); }
const EngineOptions& Engine::options() const { return impl_->options(); }

int Engine::Subscribe(EventHandler handler) {
  return impl_->events().Subscribe(std::move(handler));
}
void Engine::Unsubscribe(int id) { impl_->events().Unsubscribe(id); }
void Engine::Wake(std::string_view queue) { impl_->signals().Notify(queue); }

absl::StatusOr<DeployOutcome> Engine::Deploy(const Flow& flow) {
  SLUICE_ASSIGN_OR_RETURN(Impl::Deployed deployed, impl_->DeployFlow(flow));
  return deployed.outcome;
}

absl::StatusOr<DeployOutcome> Engine::Deploy(const Job& job) {
  SLUICE_RETURN_IF_ERROR(job.Validate());
  return Deploy(job.flow());
}

absl::StatusOr<RunId> Engine::StartRun(std::string_view flow_slug,
                                       const Json& input) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<RunId> ids,
                          StartRuns(flow_slug, std::span(&input, 1)));
  return ids.front();
}

namespace {

std::string RunInputName(size_t index, size_t count) {
  return count > 1 ? StrCat("run input ", index) : "run input";
}

absl::Status ValidateRunInput(const CompiledFlow& flow, const Json& input,
                              size_t index, size_t count) {
  int root_map = flow.root_map_step();
  if (root_map < 0 || input.is_array()) return absl::OkStatus();
  std::string which = count > 1 ? StrCat(" (input ", index, ")") : "";
  return absl::InvalidArgumentError(
      StrCat("flow \"", flow.slug(), "\" has a root map step \"",
             flow.step(root_map).shape->slug,
             "\", so its run input must be a JSON array, not ",
             JsonTypeName(input), which));
}

// The writes of new runs of `flow`, made without the store: the runs, their
// first tasks and messages, and what their commit publishes.
struct NewRuns {
  const CompiledFlow* flow = nullptr;
  absl::Time now;
  WriteBatch writes;
  TransactionEffects effects;
  std::vector<RunId> ids;
};

absl::StatusOr<std::unique_ptr<NewRuns>> PlanNewRuns(
    Engine::Impl& impl, const CompiledFlow& flow, std::span<const Json> inputs,
    RunProgress::NewRunSettings settings, RunIdDraw& ids) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    SLUICE_RETURN_IF_ERROR(ValidateRunInput(flow, inputs[i], i, inputs.size()));
  }
  ids.Restart();
  auto plan = std::make_unique<NewRuns>();
  plan->flow = &flow;
  plan->now = impl.Now();
  RunProgress::Context context{
      nullptr,
      flow,
      plan->now,
      plan->writes,
      impl.wants_events() ? &plan->effects.events : nullptr,
      &plan->effects.runs};
  plan->ids.reserve(inputs.size());
  plan->writes.ReserveNewRuns(inputs.size());
  for (const Json& input : inputs) {
    RunId id = ids.Next();
    // `inputs` outlive the Flush, so the run keeps no copy.
    settings.lasting_input = &input;
    RunProgress run = RunProgress::ForNewRun(context, id, Json(), settings);
    SLUICE_RETURN_IF_ERROR(run.Advance());
    run.Finish();
    plan->ids.push_back(id);
  }
  return plan;
}

// One attempt of StartRuns, in one transaction; `known_alias` as for
// PinAlias. With a known alias whose flow is cached, the runs are planned
// before the transaction begins, so a backend that serializes writers
// (SQLite, memory) holds its lock only for the writes; the transaction
// then checks that the alias still names that flow.
absl::StatusOr<std::vector<RunId>> StartRunsOnce(
    Engine::Impl& impl, std::string_view flow_slug,
    std::optional<std::string_view> known_alias, std::span<const Json> inputs,
    const RunProgress::NewRunSettings& settings, RunIdDraw& ids) {
  std::unique_ptr<NewRuns> plan;
  std::shared_ptr<const CompiledFlow> cached =
      known_alias ? impl.CachedFlowFor(*known_alias) : nullptr;
  if (cached != nullptr) {
    // On any error, planned again in the transaction, which reports it.
    absl::StatusOr<std::unique_ptr<NewRuns>> early =
        PlanNewRuns(impl, *cached, inputs, settings, ids);
    if (early.ok()) {
      plan = *std::move(early);
      // Copied here, not in the transaction, where the store is locked.
      if (impl.backend_stores_copies()) plan->writes.OwnLentInputs();
    }
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl.Begin());
  // Resolved in the transaction that creates the runs: each pins the
  // version active now.
  SLUICE_ASSIGN_OR_RETURN(std::string slug,
                          impl.PinAlias(*tx, flow_slug, "flow", known_alias));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledFlow> flow,
                          impl.FlowFor(*tx, slug));
  if (plan == nullptr || plan->flow != flow.get()) {
    SLUICE_ASSIGN_OR_RETURN(plan,
                            PlanNewRuns(impl, *flow, inputs, settings, ids));
  }
  SLUICE_RETURN_IF_ERROR(plan->writes.Flush(*tx, plan->now, plan->effects));
  SLUICE_RETURN_IF_ERROR(impl.Commit(*tx, std::move(plan->effects)));
  return std::move(plan->ids);
}

}  // namespace

absl::StatusOr<std::vector<RunId>> Engine::StartRuns(
    std::string_view flow_slug, std::span<const Json> inputs) {
  SLUICE_RETURN_IF_ERROR(ValidateSlug(flow_slug, "flow"));
  if (inputs.empty()) return std::vector<RunId>();
  for (size_t i = 0; i < inputs.size(); ++i) {
    SLUICE_RETURN_IF_ERROR(
        CheckJsonPayload(inputs[i], RunInputName(i, inputs.size()),
                         impl_->options().max_payload_bytes));
  }
  SLUICE_ASSIGN_OR_RETURN(std::string traceparent, impl_->CurrentTraceparent());
  RunProgress::NewRunSettings settings;
  if (!traceparent.empty()) {
    settings.options =
        RunOptionsToJson(RunOptions{.task = {.traceparent = traceparent}});
  }
  RunIdDraw ids(impl_->options().run_id_source);
  return impl_->WithKnownAlias(
      flow_slug, [&](std::optional<std::string_view> known) {
        return StartRunsOnce(*impl_, flow_slug, known, inputs, settings, ids);
      });
}

// CancelRun and RetryRun: lifecycle.cc.

namespace {

// The run's view as stored, in one round trip where the backend offers it;
// nullopt if there is no such run.
absl::StatusOr<std::optional<RunView>> ReadRunView(Transaction& tx,
                                                   const RunId& run_id) {
  if (auto* one_trip = dynamic_cast<internal::OneTripRunReads*>(&tx)) {
    SLUICE_ASSIGN_OR_RETURN(std::optional<internal::RunWithParts> parts,
                            one_trip->ReadRunWithParts(run_id));
    if (!parts) return std::nullopt;
    return RunView{.run = std::move(parts->run),
                   .steps = std::move(parts->steps),
                   .tasks = std::move(parts->tasks),
                   .attempts = std::move(parts->attempts)};
  }
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<RunRecord>> runs,
      tx.GetRuns(std::span(&run_id, 1), LockMode::kNone, Fields::kAll));
  if (!runs[0]) return std::nullopt;
  RunView view;
  view.run = std::move(*runs[0]);
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::vector<StepStateRecord>> steps,
      tx.GetStepStates(std::span(&run_id, 1), Fields::kAll));
  view.steps = std::move(steps[0]);
  SLUICE_ASSIGN_OR_RETURN(view.tasks, tx.ListTasks(run_id));
  SLUICE_ASSIGN_OR_RETURN(view.attempts, tx.ListAttempts(run_id));
  return view;
}

}  // namespace

absl::StatusOr<RunView> Engine::GetRun(const RunId& run_id) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(std::optional<RunView> view,
                          ReadRunView(*tx, run_id));
  if (!view) {
    return absl::NotFoundError(
        StrCat("run ", run_id.ToString(), " does not exist"));
  }
  AddDerivedAttempts(view->tasks, view->attempts);
  if (view->steps.empty()) {
    // A one-step run whose row says its step's state (implicit_steps.h).
    // Without its flow's definition the view still has the run and tasks.
    absl::StatusOr<std::shared_ptr<const CompiledFlow>> flow =
        impl_->FlowFor(*tx, view->run.flow_slug);
    if (flow.ok()) {
      internal::AddImplicitStepState((*flow)->shape(), view->run, view->steps);
    }
  }
  return *std::move(view);
}

absl::Status Engine::DeleteRun(const RunId& run_id) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(RunRecord run, LockRun(*tx, run_id));
  if (!IsTerminal(run.status)) {
    return absl::FailedPreconditionError(
        StrCat("run ", run_id.ToString(),
               " is still started; cancel it (Engine::CancelRun) before "
               "deleting it"));
  }
  SLUICE_RETURN_IF_ERROR(tx->DeleteRuns(std::span(&run_id, 1)).status());
  return impl_->Commit(*tx, {});
}

absl::StatusOr<int> Engine::PruneRuns(absl::Time finished_before, int limit) {
  if (limit < 1 || limit > 10'000) {
    return absl::InvalidArgumentError(
        StrCat("PruneRuns limit ", limit, " is out of range 1..10000"));
  }
  if (finished_before == absl::InfiniteFuture() ||
      finished_before == absl::InfinitePast()) {
    return absl::InvalidArgumentError("PruneRuns needs a finite cutoff time");
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(std::vector<RunRecord> ended,
                          tx->FindFinishedRuns(finished_before, limit));
  if (ended.empty()) return 0;
  std::vector<RunId> ids;
  ids.reserve(ended.size());
  for (const RunRecord& r : ended) ids.push_back(r.run_id);
  SLUICE_ASSIGN_OR_RETURN(int deleted, tx->DeleteRuns(ids));
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
  return deleted;
}

absl::StatusOr<std::vector<RunRecord>> Engine::ListRuns(
    std::string_view flow_slug, int limit) {
  if (!flow_slug.empty())
    SLUICE_RETURN_IF_ERROR(ValidateSlug(flow_slug, "flow"));
  if (limit < 1 || limit > 10'000) {
    return absl::InvalidArgumentError(
        StrCat("ListRuns limit ", limit, " is out of range 1..10000"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  return tx->ListRuns(RunQuery::OfFlow(flow_slug, limit), Fields::kAll);
}

absl::StatusOr<int> Engine::PruneWorkers(absl::Time inactive_before,
                                         int limit) {
  if (limit < 1 || limit > 10'000) {
    return absl::InvalidArgumentError(
        StrCat("PruneWorkers limit ", limit, " is out of range 1..10000"));
  }
  if (inactive_before == absl::InfiniteFuture() ||
      inactive_before == absl::InfinitePast()) {
    return absl::InvalidArgumentError(
        "PruneWorkers needs a finite cutoff time");
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(int deleted,
                          tx->DeleteInactiveWorkers(inactive_before, limit));
  if (deleted == 0) return 0;
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
  return deleted;
}

// Coverage: coverage.cc.

void StepSet::Add(std::string_view flow_slug, int step_index) {
  auto it = std::find_if(flows_.begin(), flows_.end(),
                         [&](const auto& f) { return f.first == flow_slug; });
  if (it == flows_.end()) {
    flows_.emplace_back(std::string(flow_slug), std::vector<bool>());
    it = std::prev(flows_.end());
  }
  if (it->second.size() <= static_cast<size_t>(step_index)) {
    it->second.resize(step_index + 1, false);
  }
  it->second[step_index] = true;
}

void StepSet::AddFlow(const FlowShape& flow) {
  for (size_t i = 0; i < flow.steps.size(); ++i) {
    Add(flow.slug, static_cast<int>(i));
  }
}

bool StepSet::Contains(std::string_view flow_slug, int step_index) const {
  for (const auto& [slug, steps] : flows_) {
    if (slug != flow_slug) continue;
    return step_index >= 0 && static_cast<size_t>(step_index) < steps.size() &&
           steps[step_index];
  }
  return false;
}

}  // namespace sluice
