// Fan-out children inside the engine: the parent envelope a child run
// carries, the ack of a FanOut result, and the terminal report every child
// run writes (docs/decisions/0028-fan-out-children.md).
#ifndef SLUICE_ENGINE_FAN_OUT_INTERNAL_H_
#define SLUICE_ENGINE_FAN_OUT_INTERNAL_H_

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiled_flow.h"
#include "engine_impl.h"
#include "sluice/engine.h"
#include "sluice/fan_out.h"
#include "sluice/records.h"

namespace sluice {

class WriteBatch;

// Where a child run's parent is: RunRecord::options["parent"].
struct ParentEnvelope {
  std::string store;  // empty: the child's own store
  TaskKey parent;
  int child_index = 0;
  int depth = 1;  // a top-level run's children are at depth 1
};

// The key of the envelope in a run's options.
inline constexpr char kParentKey[] = "parent";

Json EnvelopeToJson(const ParentEnvelope& envelope);
// The envelope in a run's options, if it has a readable one.
std::optional<ParentEnvelope> EnvelopeOf(const Json& run_options);

// A job is a flow of one single step named "job".
bool IsJobFlow(const CompiledFlow& flow);

// The report a child run (one with an envelope) writes when it ends with
// `run`'s status; nullopt for a run without an envelope or not ended.
std::optional<ChildReport> ChildReportFor(const RunRecord& run,
                                          const CompiledFlow& flow,
                                          absl::Time now);

// Records a FanOut result of one started attempt in its own transaction:
// the task parks, its links and (same-store) children are created.
// kCompleted, or kStale if the attempt no longer owns the task. A FanOut
// that can't be honoured (unknown name, too deep, bad payload or options)
// changes nothing and returns `invalid` set: the caller fails the attempt
// with it, without retry.
struct FanOutAck {
  ResultDisposition disposition = ResultDisposition::kStale;
  absl::Status invalid;
  // The task's run asked it to stop before its fan-out was recorded: the
  // caller ends the attempt cancelled, and no child is created.
  bool cancel_requested = false;
  std::vector<int64_t> report_ids;  // to apply (a parent settled at once)
  // Links whose children live in another store: created there after the
  // ack commits (CreateRemoteChildren).
  std::vector<ChildLinkRecord> remote;
};
absl::StatusOr<FanOutAck> AckFanOut(Engine::Impl& impl, const TaskKey& key,
                                    int attempt, const FanOut& fan_out);

// Creates the run of one child from its link's spec in `tx` (the ack, and
// the sweeper re-creating a missing child).
// The spec says the child's depth and its resolved flow slug.
// `impl` and `tx` are the child's store's; `parent_store` is the name its
// envelope gives the parent's store ("" for the same store).
absl::Status CreateChildRun(Engine::Impl& impl, Transaction& tx,
                            const ChildLinkRecord& link,
                            std::string_view parent_store, absl::Time now,
                            WriteBatch& writes, TransactionEffects& effects);

// --- Children in another store (fan_out_stores.cc) ---

// Creates, in their stores, the children of `links` (cross-store links of
// one or more parents) that do not exist yet, while their parent task still
// waits and their link is pending. Idempotent: ids are derived. After
// their commit the links are read again: children whose parent stopped in
// between (a cancel, fail-fast) are cancelled in their store
// (docs/decisions/0039, the double check).
absl::Status CreateRemoteChildren(Engine::Impl& impl,
                                  std::span<const ChildLinkRecord> links);

// Up to `limit` child reports of this store that `relays` accepts, by id,
// paging past those it does not (reports owed to other stores' parents).
absl::StatusOr<std::vector<ChildReport>> PeekReportsFor(
    Transaction& tx, const std::function<bool(const ChildReport&)>& relays,
    int limit);

// What the sweeper knows of one link's child run, wherever it lives.
struct ChildState {
  bool reachable = true;  // false: its store is unknown or did not answer
  std::optional<RunRecord> run;
  std::optional<ChildReport> report;  // the run ended: what it would report
};
// The child of each link, read through `tx` (same store) or its peer.
absl::StatusOr<std::vector<ChildState>> ReadChildren(
    Engine::Impl& impl, Transaction& tx, std::span<const ChildLinkRecord> links,
    absl::Time now);

// Settles one parked parent task whose links moved, if it can settle: with
// fail-fast and a failed child it fails (its pending links are cancelled,
// their children owed a cancel); once no link is pending it completes with
// every result. Appends the task's report (for its run) to `reports`.
absl::Status SettleParent(Transaction& tx, const TaskKey& parent,
                          absl::Time now, std::vector<OutboxReport>& reports);

}  // namespace sluice

#endif  // SLUICE_ENGINE_FAN_OUT_INTERNAL_H_
