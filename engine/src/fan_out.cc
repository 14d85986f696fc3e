// Fan-out: StepResult, child ids, the parent envelope, the child report and
// the ack of a FanOut result (docs/decisions/0028-fan-out-children.md).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "enqueue_options.h"
#include "fan_out_internal.h"
#include "lease.h"
#include "ledger.h"
#include "run_options.h"
#include "run_progress.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "write_batch.h"

namespace sluice {

StepResult::StepResult(FanOut fan_out)
    : fan_out_(std::make_shared<const FanOut>(std::move(fan_out))) {}

namespace {

// FNV-1a, 64 bits: fixed in every build and process (absl::Hash is not).
uint64_t Fnv1a(std::string_view bytes, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Finalizer of splitmix64, so nearby inputs spread over all bits.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t IntOr(const boost::json::object& o, std::string_view key,
              int64_t fallback) {
  const Json* v = o.if_contains(key);
  return v != nullptr && v->is_int64() ? v->as_int64() : fallback;
}

std::string StringOr(const boost::json::object& o, std::string_view key) {
  const Json* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : "";
}

std::string TaskName(const TaskKey& key) {
  return StrCat(key.run_id.ToString(), "/", key.step_index, "/",
                key.task_index);
}

}  // namespace

RunId ChildRunId(const TaskKey& parent, int child_index) {
  const std::string text = StrCat(TaskName(parent), "#", child_index);
  uint64_t high = Mix(Fnv1a(text, 0x5157ULL));
  uint64_t low = Mix(Fnv1a(text, 0x1ce5ULL));
  // A version 8 (custom) UUID with the RFC 4122 variant.
  high = (high & ~0xF000ULL) | 0x8000ULL;
  low = (low & ~(0xC000ULL << 48)) | (0x8000ULL << 48);
  return RunId(high, low);
}

Json EnvelopeToJson(const ParentEnvelope& e) {
  return boost::json::object{{"store", e.store},
                             {"run", e.parent.run_id.ToString()},
                             {"step", e.parent.step_index},
                             {"task", e.parent.task_index},
                             {"child", e.child_index},
                             {"depth", e.depth}};
}

std::optional<ParentEnvelope> EnvelopeOf(const Json& run_options) {
  if (!run_options.is_object()) return std::nullopt;
  const Json* v = run_options.as_object().if_contains(kParentKey);
  if (v == nullptr || !v->is_object()) return std::nullopt;
  const boost::json::object& o = v->as_object();
  absl::StatusOr<RunId> run = RunId::Parse(StringOr(o, "run"));
  if (!run.ok()) return std::nullopt;
  ParentEnvelope e;
  e.store = StringOr(o, "store");
  e.parent = TaskKey{*run, static_cast<int>(IntOr(o, "step", 0)),
                     static_cast<int>(IntOr(o, "task", 0))};
  e.child_index = static_cast<int>(IntOr(o, "child", 0));
  e.depth = static_cast<int>(IntOr(o, "depth", 1));
  return e;
}

bool IsJobFlow(const CompiledFlow& flow) {
  return flow.step_count() == 1 && flow.step(0).shape->slug == "job" &&
         flow.step(0).shape->kind == StepKind::kSingle;
}

std::optional<ChildReport> ChildReportFor(const RunRecord& run,
                                          const CompiledFlow& flow,
                                          absl::Time now) {
  if (!IsTerminal(run.status)) return std::nullopt;
  std::optional<ParentEnvelope> envelope = EnvelopeOf(run.options);
  if (!envelope) return std::nullopt;
  ChildReport report{.parent_store = envelope->store,
                     .parent = envelope->parent,
                     .child_index = envelope->child_index,
                     .child_run_id = run.run_id,
                     .created_at = now};
  switch (run.status) {
    case RunStatus::kCompleted: {
      report.outcome = ChildStatus::kCompleted;
      // A job's result is its step's output, not {"job": output}.
      const Json output = run.output.value_or(Json());
      const Json* job =
          output.is_object() ? output.as_object().if_contains("job") : nullptr;
      report.output = IsJobFlow(flow) && job != nullptr ? *job : output;
      break;
    }
    case RunStatus::kCancelled:
      report.outcome = ChildStatus::kCancelled;
      report.error = run.error.empty() ? "cancelled" : run.error;
      break;
    default:
      report.outcome = ChildStatus::kFailed;
      report.error = run.error;
      break;
  }
  return report;
}

namespace {

// Whether a failed lookup is about the child's name (so retrying can't help)
// rather than the store (a failure the attempt may retry).
bool IsRefusal(const absl::Status& status) {
  return absl::IsNotFound(status) || absl::IsInvalidArgument(status);
}
absl::Status Refusal(std::string_view owner, const absl::Status& status) {
  if (!IsRefusal(status)) return status;
  return absl::InvalidArgumentError(StrCat(owner, ": ", status.message()));
}

// A child's name resolved once per fan-out: a FanOut of 10,000 children
// of one job looks its alias up once, not 10,000 times.
struct ResolvedName {
  std::string slug;
  std::shared_ptr<const CompiledFlow> flow;
};
using ResolvedNames = absl::flat_hash_map<std::string, ResolvedName>;

// The link of one child, with everything needed to create it again. A
// child without a traceparent of its own continues its parent's trace.
absl::StatusOr<ChildLinkRecord> PlanChild(Engine::Impl& impl, Transaction& tx,
                                          ResolvedNames& resolved,
                                          const TaskKey& parent, int index,
                                          const ChildSpec& child, int depth,
                                          bool fail_fast, absl::Time now,
                                          std::string_view traceparent) {
  const std::string owner = StrCat(
      "fan-out child ", index, " (\"", child.name, "\")",
      child.store.empty() ? "" : StrCat(" in store \"", child.store, "\""));
  EnqueueOptions options = child.options;
  options.id.reset();  // the derived id is the idempotency
  options.dedupe.reset();
  const size_t max_bytes = impl.options().max_payload_bytes;
  SLUICE_RETURN_IF_ERROR(ValidateEnqueueOptions(owner, options, max_bytes));
  auto known = resolved.find(child.name);
  if (known == resolved.end()) {
    absl::StatusOr<std::string> slug =
        impl.ResolveAlias(tx, child.name, "job or flow");
    if (!slug.ok()) return Refusal(owner, slug.status());
    absl::StatusOr<std::shared_ptr<const CompiledFlow>> flow =
        impl.FlowFor(tx, *slug);
    if (!flow.ok()) return Refusal(owner, flow.status());
    known = resolved.emplace(child.name, ResolvedName{*slug, *flow}).first;
  }
  const std::string& slug = known->second.slug;
  const CompiledFlow& flow = *known->second.flow;
  SLUICE_RETURN_IF_ERROR(
      CheckJsonPayload(child.payload, StrCat(owner, ": payload"), max_bytes));
  int root_map = flow.root_map_step();
  if (root_map >= 0 && !child.payload.is_array()) {
    return absl::InvalidArgumentError(
        StrCat(owner, ": flow \"", slug,
               "\" has a root map step, so its input must be a JSON array, "
               "not ",
               JsonTypeName(child.payload)));
  }
  RunProgress::NewRunSettings settings =
      SettingsFor(flow, options, now, traceparent);
  ChildLinkRecord link;
  link.parent = parent;
  link.child_index = index;
  link.child_store = child.store;
  link.child_run_id = ChildRunId(parent, index);
  link.pending_since = now;
  link.spec = boost::json::object{{"name", child.name},
                                  {"slug", slug},
                                  {"payload", child.payload},
                                  {"priority", settings.priority},
                                  {"metadata", settings.metadata},
                                  {"options", settings.options},
                                  {"depth", depth},
                                  {"fail_fast", fail_fast}};
  return link;
}

// Plans each child in the store it will live in: its name resolves there.
// The peers' transactions only read, and roll back when this returns.
class ChildPlanner {
 public:
  ChildPlanner(Engine::Impl& impl, Transaction& tx) : impl_(impl), tx_(tx) {}

  absl::StatusOr<ChildLinkRecord> Plan(const TaskKey& parent, int index,
                                       const ChildSpec& child, int depth,
                                       bool fail_fast, absl::Time now,
                                       std::string_view traceparent) {
    if (child.store.empty()) {
      return PlanChild(impl_, tx_, resolved_[child.store], parent, index, child,
                       depth, fail_fast, now, traceparent);
    }
    Engine* peer = impl_.Peer(child.store);
    if (peer == nullptr) {
      return absl::InvalidArgumentError(
          StrCat("fan-out child ", index, " (\"", child.name, "\"): store \"",
                 child.store, "\" is not one of EngineOptions::stores",
                 impl_.peers().empty() ? " (none is set)" : ""));
    }
    std::unique_ptr<Transaction>& tx = peer_txs_[child.store];
    if (tx == nullptr) {
      // Unreachable: not a refusal; the attempt fails and is retried.
      SLUICE_ASSIGN_OR_RETURN(tx, peer->impl().Begin());
    }
    return PlanChild(peer->impl(), *tx, resolved_[child.store], parent, index,
                     child, depth, fail_fast, now, traceparent);
  }

 private:
  Engine::Impl& impl_;
  Transaction& tx_;
  std::map<std::string, std::unique_ptr<Transaction>> peer_txs_;
  // Names resolve in their own store: one cache per store.
  std::map<std::string, ResolvedNames> resolved_;
};

}  // namespace

absl::Status CreateChildRun(Engine::Impl& impl, Transaction& tx,
                            const ChildLinkRecord& link,
                            std::string_view parent_store, absl::Time now,
                            WriteBatch& writes, TransactionEffects& effects) {
  if (!link.spec.is_object()) {
    return absl::DataLossError(StrCat("child link ", link.child_index,
                                      " of task ", TaskName(link.parent),
                                      " has no readable spec"));
  }
  const boost::json::object& spec = link.spec.as_object();
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledFlow> flow,
                          impl.FlowFor(tx, StringOr(spec, "slug")));
  RunProgress::NewRunSettings settings;
  settings.priority = static_cast<int>(IntOr(spec, "priority", 0));
  if (const Json* m = spec.if_contains("metadata")) settings.metadata = *m;
  boost::json::object options;
  if (const Json* o = spec.if_contains("options"); o && o->is_object()) {
    options = o->as_object();
  }
  options[kParentKey] = EnvelopeToJson(
      ParentEnvelope{.store = std::string(parent_store),
                     .parent = link.parent,
                     .child_index = link.child_index,
                     .depth = static_cast<int>(IntOr(spec, "depth", 1))});
  settings.options = std::move(options);
  const Json* payload = spec.if_contains("payload");
  RunProgress run = RunProgress::ForNewRun(
      RunProgress::Context{&tx, *flow, now, writes,
                           impl.wants_events() ? &effects.events : nullptr},
      link.child_run_id, payload != nullptr ? *payload : Json(),
      std::move(settings));
  SLUICE_RETURN_IF_ERROR(run.Advance());
  run.Finish();
  return absl::OkStatus();
}

absl::StatusOr<FanOutAck> AckFanOut(Engine::Impl& impl, const TaskKey& key,
                                    int attempt, const FanOut& fan_out) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl.Begin());
  const absl::Time now = impl.Now();
  // The run first, locked: a CancelRun (which locks it too) then either
  // sees the task parked or is seen here as the task's cancel request,
  // never lost to this update (docs/decisions/0039).
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<RunRecord>> runs,
      tx->GetRuns(std::span(&key.run_id, 1), LockMode::kForUpdate,
                  Fields::kNoPayloads));
  FanOutAck ack;
  if (!runs[0]) return ack;
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<TaskRecord>> tasks,
      tx->GetTasks(std::span(&key, 1), Fields::kNoPayloads));
  if (!AttemptHolds(tasks[0], attempt)) {
    return ack;  // stale: another attempt or path owns the task
  }
  TaskRecord& task = *tasks[0];
  if (task.cancel_requested) {
    // Its run is being cancelled: the cancel wins, nothing is spawned.
    ack.cancel_requested = true;
    return ack;
  }
  std::optional<ParentEnvelope> own = EnvelopeOf(runs[0]->options);
  const int depth = own ? own->depth + 1 : 1;
  if (depth > impl.options().max_fan_out_depth) {
    ack.invalid = absl::InvalidArgumentError(
        StrCat("fan-out too deep: its children would be at depth ", depth,
               ", past the limit of ", impl.options().max_fan_out_depth,
               " (EngineOptions::max_fan_out_depth)"));
    return ack;
  }
  // A task fanned out before (RetryRun of its failed run) keeps its
  // manifest: it parks again over the same links and never spawns twice.
  absl::StatusOr<std::vector<ChildLinkRecord>> found =
      tx->GetChildLinks(key, Fields::kNoPayloads);
  if (absl::IsUnimplemented(found.status())) {
    ack.invalid = found.status();  // this backend cannot park a task
    return ack;
  }
  if (!found.ok()) return found.status();
  const std::vector<ChildLinkRecord>& existing = *found;
  std::vector<ChildLinkRecord> links;
  links.reserve(fan_out.children.size());
  ChildPlanner planner(impl, *tx);
  const std::string traceparent(TraceparentOf(task.options));
  for (size_t i = 0; existing.empty() && i < fan_out.children.size(); ++i) {
    absl::StatusOr<ChildLinkRecord> link =
        planner.Plan(key, static_cast<int>(i), fan_out.children[i], depth,
                     fan_out.fail_fast, now, traceparent);
    if (!link.ok()) {
      if (absl::IsInvalidArgument(link.status())) {
        ack.invalid = link.status();
        return ack;
      }
      return link.status();
    }
    links.push_back(*std::move(link));
  }
  TaskUpdate update{.task = task,
                    .expected_status = TaskStatus::kStarted,
                    .expected_attempts = attempt};
  update.task.status = TaskStatus::kWaiting;
  update.task.stall_at.reset();
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied,
                          tx->UpdateTasks(std::span(&update, 1)));
  if (!applied[0]) return ack;
  const int64_t message_id = task.message_id;
  SLUICE_RETURN_IF_ERROR(
      tx->ArchiveMessages(task.queue_name, std::span(&message_id, 1), now));
  AttemptRecord entry = EndedAttempt(task, AttemptOutcome::kFannedOut, now);
  SLUICE_RETURN_IF_ERROR(tx->AppendAttempts(std::span(&entry, 1)));
  WriteBatch writes;
  TransactionEffects effects;
  if (existing.empty()) {
    for (const ChildLinkRecord& link : links) {
      if (!link.child_store.empty()) {
        ack.remote.push_back(link);  // created in its store after commit
        continue;
      }
      SLUICE_RETURN_IF_ERROR(
          CreateChildRun(impl, *tx, link, "", now, writes, effects));
    }
    SLUICE_RETURN_IF_ERROR(tx->InsertChildLinks(std::span(links)));
    SLUICE_RETURN_IF_ERROR(writes.Flush(*tx, now, effects));
  } else {
    std::vector<OutboxReport> reports;
    SLUICE_RETURN_IF_ERROR(SettleParent(*tx, key, now, reports));
    if (!reports.empty()) {
      SLUICE_ASSIGN_OR_RETURN(ack.report_ids, tx->AppendReports(reports));
    }
  }
  SLUICE_RETURN_IF_ERROR(impl.Commit(*tx, std::move(effects)));
  ack.disposition = ResultDisposition::kCompleted;
  return ack;
}

}  // namespace sluice
