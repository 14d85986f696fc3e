// Enqueue, EnqueueMany and StartRun with options: ids, dedupe, priority,
// delays, metadata and per-run overrides. The decision order for an item is
// effect-mq's (docs/decisions/0017-jobs-are-runs.md):
//   1. an explicit id that a run of the flow already has: that run, as a
//      duplicate, nothing changed;
//   2. a dedupe entry for (flow, key):
//      a. `replace` and the keyed run still delayed (never claimed, its
//         message not yet visible): the run is re-created in place with the
//         new payload and options, keeping its id, start time and ledger;
//      b. a live throttle window: a duplicate (the window is pushed out
//         with `extend`);
//      c. pending mode and the keyed run unfinished: a duplicate;
//      d. otherwise the entry is dead and the new run takes the key over;
//   3. a new run; with dedupe, it registers the key.
// Every insert wakes the queue, a delayed one too, so idle workers learn
// the new earliest visibility. Keyed items hold the flow's slug lock, so
// concurrent decisions on one key are serialized.
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "engine_impl.h"
#include "enqueue_options.h"
#include "run_id_draw.h"
#include "run_progress.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "write_batch.h"

namespace sluice {
namespace {

// A job is a flow of one single step named "job".
bool IsJob(const CompiledFlow& flow) {
  return flow.step_count() == 1 && flow.step(0).shape->slug == "job" &&
         flow.step(0).shape->kind == StepKind::kSingle;
}

absl::Status ValidateInput(const CompiledFlow& flow, std::string_view owner,
                           const Json& input, size_t max_payload_bytes) {
  SLUICE_RETURN_IF_ERROR(
      CheckJsonPayload(input, StrCat(owner, ": input"), max_payload_bytes));
  int root_map = flow.root_map_step();
  if (root_map < 0 || input.is_array()) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(
      owner, ": flow \"", flow.slug(), "\" has a root map step \"",
      flow.step(root_map).shape->slug,
      "\", so its run input must be a JSON array, not ", JsonTypeName(input)));
}

// Adds items to one transaction. New runs gather in one write batch; an
// item whose id or dedupe key repeats a gathered item's first writes what
// gathered, so its checks see every earlier item of the same call.
class Enqueuer {
 public:
  // `traceparent`: the tracer's current one, for items without their own.
  // `tx` is null while items without an id or dedupe key are planned before
  // their transaction (PlanUnkeyed); Bind gives it before Flush. New runs
  // take their ids from `ids`.
  Enqueuer(Engine::Impl& impl, Transaction* tx, const CompiledFlow& flow,
           absl::Time now, std::string traceparent, RunIdDraw& ids)
      : impl_(impl),
        tx_(tx),
        flow_(flow),
        now_(now),
        traceparent_(std::move(traceparent)),
        ids_(ids) {}

  absl::StatusOr<EnqueueResult> Add(const Json& input,
                                    const EnqueueOptions& options);
  void Bind(Transaction& tx) { tx_ = &tx; }
  // Writes what is still gathered.
  absl::Status Flush();
  // Whether an item with this id or dedupe key is gathered, not written.
  bool SharesKeyWithGathered(const EnqueueOptions& options) const {
    return (options.id && gathered_ids_.contains(*options.id)) ||
           (options.dedupe && gathered_keys_.contains(options.dedupe->key));
  }
  TransactionEffects TakeEffects() { return std::move(effects_); }
  // Whether anything was written (else there is nothing to commit).
  bool wrote() const { return wrote_; }

 private:
  RunProgress::Context ContextFor(WriteBatch& writes) {
    return RunProgress::Context{
        tx_,
        flow_,
        now_,
        writes,
        impl_.wants_events() ? &effects_.events : nullptr,
        &effects_.runs};
  }
  absl::Status CreateRun(WriteBatch& writes, RunId id, const Json& input,
                         RunProgress::NewRunSettings settings);
  absl::StatusOr<std::optional<EnqueueResult>> ExistingById(
      const std::string& id);
  absl::StatusOr<std::optional<EnqueueResult>> ByDedupe(
      const Json& input, const EnqueueOptions& options);
  absl::StatusOr<bool> IsDelayed(const RunRecord& run);
  absl::Status Replace(const RunRecord& keyed, const Json& input,
                       const EnqueueOptions& options);
  Engine::Impl& impl_;
  Transaction* tx_;
  const CompiledFlow& flow_;
  absl::Time now_;
  const std::string traceparent_;
  RunIdDraw& ids_;
  TransactionEffects effects_;
  std::unique_ptr<WriteBatch> gathered_ = std::make_unique<WriteBatch>();
  bool gathered_any_ = false;
  // Ids and dedupe keys of the gathered items, so that only an item that
  // repeats one makes the batch be written before its checks.
  absl::flat_hash_set<std::string> gathered_ids_;
  absl::flat_hash_set<std::string> gathered_keys_;
  bool wrote_ = false;
};

absl::Status Enqueuer::CreateRun(WriteBatch& writes, RunId id,
                                 const Json& input,
                                 RunProgress::NewRunSettings settings) {
  RunProgress run = RunProgress::ForNewRun(ContextFor(writes), id, input,
                                           std::move(settings));
  SLUICE_RETURN_IF_ERROR(run.Advance());
  run.Finish();
  return absl::OkStatus();
}

absl::Status Enqueuer::Flush() {
  if (!gathered_any_) return absl::OkStatus();
  SLUICE_RETURN_IF_ERROR(gathered_->Flush(*tx_, now_, effects_));
  gathered_ = std::make_unique<WriteBatch>();
  gathered_any_ = false;
  gathered_ids_.clear();
  gathered_keys_.clear();
  wrote_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<EnqueueResult>> Enqueuer::ExistingById(
    const std::string& id) {
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<RunRecord>> found,
      tx_->FindRunsByKey(flow_.slug(), std::span(&id, 1), Fields::kNoPayloads));
  if (found.empty() || !found[0]) return std::nullopt;
  return EnqueueResult{found[0]->run_id, true};
}

absl::StatusOr<bool> Enqueuer::IsDelayed(const RunRecord& run) {
  if (run.status != RunStatus::kStarted) return false;
  SLUICE_ASSIGN_OR_RETURN(std::vector<TaskRecord> tasks,
                          tx_->ListTasks(run.run_id));
  if (tasks.empty()) return false;
  for (const TaskRecord& task : tasks) {
    if (task.status != TaskStatus::kQueued || task.attempts != 0) return false;
    SLUICE_ASSIGN_OR_RETURN(
        std::optional<MessageLocation> message,
        tx_->LookupMessage(task.queue_name, task.message_id));
    if (!message || message->archived || message->message.visible_at <= now_) {
      return false;
    }
  }
  return true;
}

absl::Status Enqueuer::Replace(const RunRecord& keyed, const Json& input,
                               const EnqueueOptions& options) {
  // Deleting and re-creating under the same id is the one way to rewrite a
  // run's input and creation-time fields; the ledger is carried over (a
  // never-claimed run normally has none).
  SLUICE_ASSIGN_OR_RETURN(std::vector<AttemptRecord> ledger,
                          tx_->ListAttempts(keyed.run_id));
  SLUICE_RETURN_IF_ERROR(tx_->DeleteRuns(std::span(&keyed.run_id, 1)).status());
  RunProgress::NewRunSettings settings =
      SettingsFor(flow_, options, now_, traceparent_);
  settings.external_key = keyed.external_key;
  settings.started_at = keyed.started_at;
  WriteBatch writes;
  SLUICE_RETURN_IF_ERROR(
      CreateRun(writes, keyed.run_id, input, std::move(settings)));
  SLUICE_RETURN_IF_ERROR(writes.Flush(*tx_, now_, effects_));
  if (!ledger.empty()) SLUICE_RETURN_IF_ERROR(tx_->AppendAttempts(ledger));
  wrote_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<EnqueueResult>> Enqueuer::ByDedupe(
    const Json& input, const EnqueueOptions& options) {
  const Dedupe& dedupe = *options.dedupe;
  SLUICE_ASSIGN_OR_RETURN(std::optional<DedupeRecord> entry,
                          tx_->GetDedupe(flow_.slug(), dedupe.key));
  if (!entry) return std::nullopt;
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<RunRecord>> runs,
      tx_->GetRuns(std::span(&entry->run_id, 1), LockMode::kForUpdate,
                   Fields::kNoPayloads));
  const std::optional<RunRecord>& keyed = runs[0];
  EnqueueResult duplicate{entry->run_id, true};
  if (dedupe.replace && keyed) {
    SLUICE_ASSIGN_OR_RETURN(bool delayed, IsDelayed(*keyed));
    if (delayed) {
      SLUICE_RETURN_IF_ERROR(Replace(*keyed, input, options));
      if (dedupe.ttl) {
        entry->expires_at = now_ + *dedupe.ttl;
        SLUICE_RETURN_IF_ERROR(tx_->PutDedupe(*entry));
      }
      return duplicate;
    }
  }
  if (entry->expires_at && now_ < *entry->expires_at) {
    if (dedupe.extend && dedupe.ttl) {
      entry->expires_at = now_ + *dedupe.ttl;
      SLUICE_RETURN_IF_ERROR(tx_->PutDedupe(*entry));
      wrote_ = true;
    }
    return duplicate;
  }
  if (!entry->expires_at && keyed && !IsTerminal(keyed->status)) {
    return duplicate;
  }
  return std::nullopt;  // a dead entry: the new run takes the key over
}

absl::StatusOr<EnqueueResult> Enqueuer::Add(const Json& input,
                                            const EnqueueOptions& options) {
  bool keyed = options.id.has_value() || options.dedupe.has_value();
  if (keyed && SharesKeyWithGathered(options)) {
    // The checks below read the transaction, so an earlier item of this
    // call with the same id or key must be written first.
    SLUICE_RETURN_IF_ERROR(Flush());
  }
  if (options.id) {
    SLUICE_ASSIGN_OR_RETURN(std::optional<EnqueueResult> existing,
                            ExistingById(*options.id));
    if (existing) return *existing;
  }
  if (options.dedupe) {
    SLUICE_ASSIGN_OR_RETURN(std::optional<EnqueueResult> duplicate,
                            ByDedupe(input, options));
    if (duplicate) return *duplicate;
  }
  RunId id = ids_.Next();
  SLUICE_RETURN_IF_ERROR(CreateRun(
      *gathered_, id, input, SettingsFor(flow_, options, now_, traceparent_)));
  gathered_any_ = true;
  if (options.id) gathered_ids_.insert(*options.id);
  if (options.dedupe) {
    // The registry has no reference to runs, so the entry may point at a
    // run that is still gathered; both commit together.
    DedupeRecord entry{flow_.slug(), options.dedupe->key, id, std::nullopt};
    if (options.dedupe->ttl) entry.expires_at = now_ + *options.dedupe->ttl;
    SLUICE_RETURN_IF_ERROR(tx_->PutDedupe(entry));
    gathered_keys_.insert(options.dedupe->key);
    wrote_ = true;
  }
  return EnqueueResult{id, false};
}

// The order in which to create `items`: highest priority first, the call's
// order kept within a priority. Rows created together are stored together,
// so claims, which take the highest priority first, touch neighbouring rows
// rather than one row per page (SQLite's WAL grows by the page). Claims
// order by (priority desc, FIFO sequence), so the only order a claim can
// observe, the one within a priority, is kept. Only when no id or dedupe
// key repeats in the call: then no item's decision depends on another's, so
// the order can't change an outcome.
std::vector<size_t> CreationOrder(const CompiledFlow& flow,
                                  std::span<const Engine::EnqueueItem> items) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  absl::flat_hash_set<std::string_view> ids, keys;
  for (const Engine::EnqueueItem& item : items) {
    const EnqueueOptions& o = item.options;
    if ((o.id && !ids.insert(*o.id).second) ||
        (o.dedupe && !keys.insert(o.dedupe->key).second)) {
      return order;
    }
  }
  const int default_priority = flow.shape().options.priority;
  auto priority = [&](size_t i) {
    return items[i].options.priority.value_or(default_priority);
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return priority(a) > priority(b);
  });
  return order;
}

// One EnqueueItems call, for each of its attempts.
struct EnqueueCall {
  std::string_view name;
  Engine::Impl::Target target;
  bool as_job;
  std::span<const Engine::EnqueueItem> items;
  HostScope* host;
  const std::function<absl::Status(Transaction&)>& in_transaction;
  std::string traceparent;
  RunIdDraw* ids;  // shared by the call's plans

  std::string_view kind() const { return as_job ? "job" : "flow"; }
  // How errors name item `i`.
  std::string owner(size_t i) const {
    return items.size() > 1 ? StrCat(kind(), " \"", name, "\" item ", i)
                            : StrCat(kind(), " \"", name, "\"");
  }
};

// A call's items added to an Enqueuer, and their results.
struct Gathered {
  const CompiledFlow* flow = nullptr;
  std::unique_ptr<Enqueuer> enqueuer;
  std::vector<EnqueueResult> results;
};

// Checks `call`'s items against `flow` and adds them to a new Enqueuer on
// `tx`; with `tx` null, before the transaction, which only items without
// an id or dedupe key may be (they read nothing).
absl::StatusOr<Gathered> Gather(Engine::Impl& impl, const EnqueueCall& call,
                                const CompiledFlow& flow, Transaction* tx) {
  std::span<const Engine::EnqueueItem> items = call.items;
  for (size_t i = 0; i < items.size(); ++i) {
    SLUICE_RETURN_IF_ERROR(ValidateInput(flow, call.owner(i), items[i].payload,
                                         impl.options().max_payload_bytes));
  }
  call.ids->Restart();
  Gathered gathered{
      .flow = &flow,
      .enqueuer = std::make_unique<Enqueuer>(impl, tx, flow, impl.Now(),
                                             call.traceparent, *call.ids),
      .results = std::vector<EnqueueResult>(items.size())};
  for (size_t i : CreationOrder(flow, items)) {
    SLUICE_ASSIGN_OR_RETURN(
        gathered.results[i],
        gathered.enqueuer->Add(items[i].payload, items[i].options));
  }
  return gathered;
}

// The call's items planned before its transaction (decision 0089), so that
// a backend which serializes writers holds its lock only for the writes; or
// nullopt, and they are planned in the transaction. Only for a call of its
// own (not in a host's transaction, no work of its own in it) whose items
// carry no id or dedupe key, of a flow this engine has compiled, named by
// slug or by a known alias. A failed plan is planned again in the
// transaction, which reports it.
std::optional<Gathered> PlanUnkeyed(Engine::Impl& impl, const EnqueueCall& call,
                                    bool keyed,
                                    std::optional<std::string_view> known) {
  if (keyed || call.host != nullptr || call.in_transaction) return std::nullopt;
  std::optional<std::string_view> slug =
      call.target == Engine::Impl::Target::kSlug ? call.name : known;
  if (!slug) return std::nullopt;
  std::shared_ptr<const CompiledFlow> flow = impl.CachedFlowFor(*slug);
  if (flow == nullptr || (call.as_job && !IsJob(*flow))) return std::nullopt;
  absl::StatusOr<Gathered> early = Gather(impl, call, *flow, nullptr);
  if (!early.ok()) return std::nullopt;
  return *std::move(early);
}

// One attempt, in one transaction; `known_alias` as for PinAlias.
absl::StatusOr<std::vector<EnqueueResult>> EnqueueOnce(
    Engine::Impl& impl, const EnqueueCall& call,
    std::optional<std::string_view> known_alias) {
  std::span<const Engine::EnqueueItem> items = call.items;
  bool keyed = std::any_of(items.begin(), items.end(), [](const auto& item) {
    return item.options.id.has_value() || item.options.dedupe.has_value();
  });
  std::optional<Gathered> gathered =
      PlanUnkeyed(impl, call, keyed, known_alias);
  SLUICE_ASSIGN_OR_RETURN(
      std::unique_ptr<Transaction> tx,
      call.host ? call.host->backend->Begin() : impl.Begin());
  if (call.in_transaction) SLUICE_RETURN_IF_ERROR(call.in_transaction(*tx));
  // An alias resolves in the transaction that creates the runs, so each
  // run pins the version active when it was created.
  std::string flow_slug(call.name);
  if (call.target == Engine::Impl::Target::kAlias) {
    SLUICE_ASSIGN_OR_RETURN(
        flow_slug, impl.PinAlias(*tx, call.name, call.kind(), known_alias));
  }
  // Ids and dedupe keys are decided by reading, then writing: two
  // transactions that both read "no such key" would both insert. Holding
  // the flow's slug lock serializes keyed enqueues of one job or flow
  // (across processes on Postgres), so each decision sees the one before.
  if (keyed) SLUICE_RETURN_IF_ERROR(tx->LockFlowSlug(flow_slug));
  absl::StatusOr<std::shared_ptr<const CompiledFlow>> flow =
      impl.FlowFor(*tx, flow_slug);
  if (call.as_job &&
      (absl::IsNotFound(flow.status()) || (flow.ok() && !IsJob(**flow)))) {
    return absl::NotFoundError(
        StrCat("job \"", call.name, "\" is not deployed",
               flow.ok() ? " (a flow of that name is; use StartRun)" : "",
               "; deploy it (Engine::Deploy(job), or start a worker for it) "
               "first"));
  }
  if (!flow.ok()) return flow.status();
  if (gathered && gathered->flow == flow->get()) {
    gathered->enqueuer->Bind(*tx);
  } else {
    SLUICE_ASSIGN_OR_RETURN(gathered, Gather(impl, call, **flow, tx.get()));
  }
  Enqueuer& enqueuer = *gathered->enqueuer;
  std::vector<EnqueueResult>& results = gathered->results;
  SLUICE_RETURN_IF_ERROR(enqueuer.Flush());
  if (!enqueuer.wrote() && !call.in_transaction) {
    return std::move(results);  // duplicates only: nothing to commit
  }
  if (call.host != nullptr) {
    // Releases the savepoint; the host's own COMMIT makes it visible, so
    // events and wake-ups wait for HostTransaction::Committed().
    SLUICE_RETURN_IF_ERROR(tx->Commit());
    TransactionEffects effects = enqueuer.TakeEffects();
    TransactionEffects& deferred = call.host->deferred;
    for (Event& event : effects.events) {
      deferred.events.push_back(std::move(event));
    }
    deferred.queues_to_wake.insert(effects.queues_to_wake.begin(),
                                   effects.queues_to_wake.end());
    return std::move(results);
  }
  SLUICE_RETURN_IF_ERROR(impl.Commit(*tx, enqueuer.TakeEffects()));
  return std::move(results);
}

}  // namespace

absl::StatusOr<std::vector<EnqueueResult>> Engine::Impl::EnqueueItems(
    std::string_view name, Target target, bool as_job,
    std::span<const Engine::EnqueueItem> items, HostScope* host,
    const std::function<absl::Status(Transaction&)>& in_transaction) {
  RunIdDraw ids(options().run_id_source);
  EnqueueCall call{name, target, as_job, items, host, in_transaction, "", &ids};
  SLUICE_RETURN_IF_ERROR(ValidateSlug(name, call.kind()));
  for (size_t i = 0; i < items.size(); ++i) {
    SLUICE_RETURN_IF_ERROR(ValidateEnqueueOptions(
        call.owner(i), items[i].options, options().max_payload_bytes));
  }
  if (items.empty()) return std::vector<EnqueueResult>();
  SLUICE_ASSIGN_OR_RETURN(call.traceparent, CurrentTraceparent());
  // A host's transaction, or one with work of its own, can't run twice, so
  // it reads the alias.
  if (target == Target::kAlias && host == nullptr && !in_transaction) {
    return WithKnownAlias(name, [&](std::optional<std::string_view> known) {
      return EnqueueOnce(*this, call, known);
    });
  }
  return EnqueueOnce(*this, call, std::nullopt);
}

absl::StatusOr<EnqueueResult> Engine::Enqueue(const Job& job,
                                              const Json& payload,
                                              const EnqueueOptions& options) {
  // The job's own definition names its version: no alias to resolve.
  EnqueueItem item{payload, options};
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<EnqueueResult> results,
      impl_->EnqueueItems(job.flow().slug(), Impl::Target::kSlug,
                          /*as_job=*/true, std::span(&item, 1)));
  return results.front();
}

absl::StatusOr<EnqueueResult> Engine::Enqueue(std::string_view job_name,
                                              const Json& payload,
                                              const EnqueueOptions& options) {
  EnqueueItem item{payload, options};
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<EnqueueResult> results,
      impl_->EnqueueItems(job_name, Impl::Target::kAlias, /*as_job=*/true,
                          std::span(&item, 1)));
  return results.front();
}

absl::StatusOr<std::vector<EnqueueResult>> Engine::EnqueueMany(
    std::string_view job_name, std::span<const EnqueueItem> items) {
  return impl_->EnqueueItems(job_name, Impl::Target::kAlias, /*as_job=*/true,
                             items);
}

absl::StatusOr<EnqueueResult> Engine::StartRun(std::string_view flow_slug,
                                               const Json& input,
                                               const EnqueueOptions& options) {
  EnqueueItem item{input, options};
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<EnqueueResult> results,
      impl_->EnqueueItems(flow_slug, Impl::Target::kAlias, /*as_job=*/false,
                          std::span(&item, 1)));
  return results.front();
}

}  // namespace sluice
