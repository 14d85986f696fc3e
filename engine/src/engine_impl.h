// The engine's private state, shared by the files that implement its calls.
#ifndef SLUICE_ENGINE_ENGINE_IMPL_H_
#define SLUICE_ENGINE_ENGINE_IMPL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "compiled_flow.h"
#include "event_publisher.h"
#include "metrics_registry.h"
#include "queue_signals.h"
#include "server_claim_backoff.h"
#include "sluice/backend.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"

namespace sluice {

// What a transaction does besides its writes: events to publish and queues
// whose workers should wake, both only after it commits.
struct TransactionEffects {
  std::vector<Event> events;
  absl::flat_hash_set<std::string> queues_to_wake;
  // Runs started and ended, counted in the metrics once committed.
  RunTally runs;
  // Child reports were written (fan-out): the relay has work.
  bool child_reports = false;
};

// An enqueue inside a host's transaction (host_transaction.h): it begins on
// the backend borrowed on the host's connection, and its effects wait in
// `deferred` until the host says it committed.
struct HostScope {
  Backend* backend = nullptr;
  TransactionEffects deferred;
};

// Remembers the last flow looked up, so a batch of tasks of one flow costs
// one cache lookup rather than one per task.
class FlowLookup {
 public:
  FlowLookup(Engine::Impl& impl, Transaction& tx) : impl_(impl), tx_(&tx) {}
  // Only the engine's cache (Engine::Impl::CachedFlowFor), for plans made
  // before a transaction: a flow not cached is kFailedPrecondition.
  explicit FlowLookup(Engine::Impl& impl) : impl_(impl), tx_(nullptr) {}
  absl::StatusOr<const CompiledFlow*> Get(std::string_view slug);

 private:
  Engine::Impl& impl_;
  Transaction* tx_;
  std::shared_ptr<const CompiledFlow> last_;
};

// A stored flow's alias; rows written before aliases existed have none,
// which means the slug itself.
inline const std::string& AliasOf(const FlowRecord& flow) {
  return flow.alias.empty() ? flow.slug : flow.alias;
}

// Deletes runs (DeleteRuns) and the dedupe entries that name them.
absl::Status DeleteRunsAndKeys(Transaction& tx,
                               std::span<const RunRecord> runs);

// Reads one run locked for update, without payloads; kNotFound if it doesn't
// exist, its message starting with `prefix` (a caller's "Signal: ").
absl::StatusOr<RunRecord> LockRun(Transaction& tx, const RunId& run_id,
                                  std::string_view prefix = "");

class Engine::Impl {
 public:
  Impl(Backend& backend, EngineOptions options);

  Backend& backend() const { return backend_; }
  // Whether the backend keeps what it is given by moving it into its store
  // (sluice/internal/stores_payload_copies.h).
  bool backend_stores_copies() const { return backend_stores_copies_; }
  const EngineOptions& options() const { return options_; }
  Clock& clock() const { return *options_.clock; }
  absl::Time Now() const { return options_.clock->Now(); }
  EventPublisher& events() { return events_; }
  QueueSignals& signals() { return signals_; }
  MetricsRegistry& metrics() { return metrics_; }
  ServerClaimBackoff& server_claims() { return server_claims_; }
  bool wants_events() const { return events_.HasSubscribers(); }

  void Log(LogLevel level, std::string_view message) const;

  // The compiled flow for `slug`, read through `tx` on first use and cached.
  // Deployed flows change only by a development recompilation; with
  // development_recompile on, every call checks the stored generation.
  // kNotFound if not deployed.
  absl::StatusOr<std::shared_ptr<const CompiledFlow>> FlowFor(
      Transaction& tx, std::string_view slug);
  // The compiled flow FlowFor would return for `slug` without reading, or
  // null: not cached yet, or development_recompile makes FlowFor read.
  std::shared_ptr<const CompiledFlow> CachedFlowFor(std::string_view slug);
  // Caches `flow` at `generation`. A cached copy of an older generation is
  // replaced but kept alive, since running code may point into it.
  void RememberFlow(std::shared_ptr<const CompiledFlow> flow,
                    int64_t generation = 1);
  // Drops a deleted flow from the cache (keeping the copy alive).
  void ForgetFlow(std::string_view slug);

  // Deploy (deploy.cc), also returning the stored generation, which a
  // worker remembers to be fenced off by a later recompilation.
  struct Deployed {
    DeployOutcome outcome = DeployOutcome::kCompiled;
    int64_t generation = 1;
  };
  absl::StatusOr<Deployed> DeployFlow(const Flow& flow);

  // The concrete slug `name` starts: the active version of the alias
  // `name` (versions.cc). One primary-key read; kNotFound, never a
  // fallback, if no such alias exists. Remembers what it read.
  absl::StatusOr<std::string> ResolveAlias(Transaction& tx,
                                           std::string_view name,
                                           std::string_view kind);
  // The version this engine last read `alias` active at: a hint that a
  // start checks in its transaction (ExpectAlias), never trusts.
  std::optional<std::string> KnownAlias(std::string_view alias);
  void ForgetAlias(std::string_view alias);
  // The slug a start by `alias` pins in `tx`: `known` checked with
  // ExpectAlias (no read: on Postgres it costs no round trip), or, without
  // it, the alias resolved by reading.
  absl::StatusOr<std::string> PinAlias(Transaction& tx, std::string_view alias,
                                       std::string_view kind,
                                       std::optional<std::string_view> known);
  // Runs `attempt(known)` (one whole transaction that pins with PinAlias)
  // with the alias's known version if there is one; if the alias moved,
  // that attempt failed with kNotFound having changed nothing, and it runs
  // again with a fresh read (decision 0057). Only for transactions that
  // can run twice: not a host's.
  template <typename Attempt>
  auto WithKnownAlias(std::string_view alias, const Attempt& attempt)
      -> decltype(attempt(std::nullopt)) {
    if (std::optional<std::string> known = KnownAlias(alias)) {
      auto result = attempt(std::optional<std::string_view>(*known));
      if (!absl::IsNotFound(result.status())) return result;
      ForgetAlias(alias);
    }
    return attempt(std::nullopt);
  }

  // How EnqueueItems finds the flow: an alias to resolve (StartRun,
  // Enqueue by name) or a concrete slug (StartRunBySlug, Enqueue(job)).
  enum class Target { kAlias, kSlug };
  // Enqueue, EnqueueMany and StartRun with options (enqueue.cc): one
  // result per item; `as_job` refuses a flow that is not a job.
  // With `host`, inside the host's transaction (HostTransaction).
  // `in_transaction`, if set, runs first in the same transaction (a
  // scheduler's cursor move); its error fails the call, and when it is set
  // the transaction commits even if every item was a duplicate.
  absl::StatusOr<std::vector<EnqueueResult>> EnqueueItems(
      std::string_view name, Target target, bool as_job,
      std::span<const Engine::EnqueueItem> items, HostScope* host = nullptr,
      const std::function<absl::Status(Transaction&)>& in_transaction = {});

  // The tracer's traceparent for the calling thread ("" without a tracer or
  // a current context); kInvalidArgument if the tracer gives a bad one.
  absl::StatusOr<std::string> CurrentTraceparent() const;
  // Ids for tracing spans, shared with workers' handler threads.
  const std::shared_ptr<std::atomic<uint64_t>>& span_ids() const {
    return span_ids_;
  }

  // The engine on the peer store `name` (EngineOptions::stores), or null.
  Engine* Peer(std::string_view name) const;
  const std::map<std::string, std::unique_ptr<Engine>>& peers() const {
    return peers_;
  }
  void AddPeer(std::string name, std::unique_ptr<Engine> peer) {
    peers_.emplace(std::move(name), std::move(peer));
  }

  // PauseQueue / ResumeQueue (queue_admin.cc).
  absl::Status SetPaused(std::string_view queue, bool paused);

  absl::StatusOr<std::unique_ptr<Transaction>> Begin();
  // Commits `tx`, then publishes the events and wakes the queues.
  absl::Status Commit(Transaction& tx, TransactionEffects effects);
  // Publishes the events and wakes the queues of transactions a host has
  // committed (HostTransaction::Committed).
  void PublishCommitted(TransactionEffects effects);

 private:
  Backend& backend_;
  bool backend_stores_copies_;
  EngineOptions options_;
  EventPublisher events_;
  QueueSignals signals_;
  MetricsRegistry metrics_;
  ServerClaimBackoff server_claims_;
  // Engines on the peer stores of cross-store children, by name.
  std::map<std::string, std::unique_ptr<Engine>> peers_;
  std::shared_ptr<std::atomic<uint64_t>> span_ids_ =
      std::make_shared<std::atomic<uint64_t>>(0);
  struct CachedFlow {
    std::shared_ptr<const CompiledFlow> flow;
    int64_t generation = 1;
  };
  absl::Mutex flows_mu_;
  absl::flat_hash_map<std::string, CachedFlow> flows_
      ABSL_GUARDED_BY(flows_mu_);
  // Copies replaced by a recompilation or dropped by DeleteVersion: kept for
  // the engine's lifetime, because code may still point into them.
  std::vector<std::shared_ptr<const CompiledFlow>> retired_flows_
      ABSL_GUARDED_BY(flows_mu_);
  absl::flat_hash_map<std::string, std::string> known_aliases_
      ABSL_GUARDED_BY(flows_mu_);  // alias -> active slug
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_ENGINE_IMPL_H_
