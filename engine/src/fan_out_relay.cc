// The fan-out relay, the cascade of cancels to children, and the sweeper's
// repair of stale links (docs/decisions/0028-fan-out-children.md,
// 0029-fan-out-crash-matrix.md).
//
// No leases: every step is idempotent. A report is deleted only in the
// transaction that applied it (same store) or after it (another store), a
// link settles only while pending, and a parent task moves only from
// kWaiting, so a report applied twice, late or after a crash changes
// nothing the second time.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fan_out_internal.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "write_batch.h"

namespace sluice {
namespace {

constexpr int kMaxBatch = 10'000;
// Nested parents settle in rounds (a settled parent's run may end and
// report to its own parent); the depth cap bounds how many are useful.
constexpr int kMaxRounds = 64;

ChildSettlement SettlementOf(const ChildReport& report) {
  ChildSettlement s{.parent = report.parent,
                    .child_index = report.child_index,
                    .outcome = report.outcome,
                    .output = report.output,
                    .error = report.error};
  if (!report.unreadable.empty()) {
    s.outcome = ChildStatus::kFailed;
    s.output.reset();
    s.error = StrCat("child report ", report.report_id,
                     " can't be read: ", report.unreadable);
  }
  return s;
}

// The children's results in child order, as the parent's output.
Json ResultsOf(const std::vector<ChildLinkRecord>& links) {
  boost::json::array results;
  results.reserve(links.size());
  for (const ChildLinkRecord& link : links) {
    boost::json::object r{{"status", ToString(link.status)}};
    if (link.status == ChildStatus::kCompleted) {
      r["output"] = link.output.value_or(Json());
    } else {
      r["error"] = link.error;
    }
    results.push_back(std::move(r));
  }
  return Json(std::move(results));
}

bool FailFast(const std::vector<ChildLinkRecord>& links) {
  if (links.empty() || !links[0].spec.is_object()) return false;
  const Json* v = links[0].spec.as_object().if_contains("fail_fast");
  return v != nullptr && v->is_bool() && v->as_bool();
}

}  // namespace

absl::Status SettleParent(Transaction& tx, const TaskKey& parent,
                          absl::Time now, std::vector<OutboxReport>& reports) {
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<TaskRecord>> tasks,
      tx.GetTasks(std::span(&parent, 1), Fields::kNoPayloads));
  if (!tasks[0] || tasks[0]->status != TaskStatus::kWaiting) {
    return absl::OkStatus();  // settled before, or gone with its run
  }
  // Counted first: with children still pending and none failed the parent
  // can't settle, which is what nearly every relay of a large fan-out
  // finds; reading (and decoding) every link each time made a relay's cost
  // grow with the number of children (docs/decisions/0042).
  SLUICE_ASSIGN_OR_RETURN(ChildCounts counts,
                          tx.CountChildLinks(parent, /*up_to=*/1));
  if (counts.pending > 0 && counts.failed == 0) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(std::vector<ChildLinkRecord> links,
                          tx.GetChildLinks(parent, Fields::kAll));
  const ChildLinkRecord* failed = nullptr;
  bool pending = false;
  for (const ChildLinkRecord& link : links) {
    if (link.status == ChildStatus::kPending) pending = true;
    if (link.status == ChildStatus::kFailed && failed == nullptr) {
      failed = &link;
    }
  }
  const bool fail = failed != nullptr && FailFast(links);
  if (!fail && pending) return absl::OkStatus();
  TaskRecord& task = *tasks[0];
  TaskUpdate update{.task = task,
                    .expected_status = TaskStatus::kWaiting,
                    .expected_attempts = task.attempts};
  update.task.finished_at = now;
  ReportKind kind = ReportKind::kCompleted;
  if (fail) {
    update.task.status = TaskStatus::kFailed;
    update.task.error =
        StrCat("child ", failed->child_index, " failed: ", failed->error);
    kind = ReportKind::kFailed;
  } else {
    update.task.status = TaskStatus::kCompleted;
    update.task.output = ResultsOf(links);
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied,
                          tx.UpdateTasks(std::span(&update, 1)));
  if (!applied[0]) return absl::OkStatus();
  if (fail) {
    SLUICE_RETURN_IF_ERROR(
        tx.CancelPendingChildLinks(parent,
                                   "cancelled: a sibling failed (fail-fast)")
            .status());
  }
  reports.push_back(OutboxReport{.task = parent,
                                 .flow_slug = task.flow_slug,
                                 .kind = kind,
                                 .created_at = now});
  return absl::OkStatus();
}

namespace {

// Applies settlements, then settles each touched parent in ascending order
// (the lock order: links, then the parent task and run). Returns the
// parents' report ids.
absl::StatusOr<std::vector<int64_t>> ApplySettlements(
    Transaction& tx, std::vector<ChildSettlement> settlements, absl::Time now) {
  if (settlements.empty()) return std::vector<int64_t>();
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied,
                          tx.SettleChildLinks(std::span(settlements)));
  std::set<TaskKey> touched;
  for (size_t i = 0; i < applied.size(); ++i) {
    if (applied[i]) touched.insert(settlements[i].parent);
  }
  std::vector<OutboxReport> reports;
  for (const TaskKey& parent : touched) {
    SLUICE_RETURN_IF_ERROR(SettleParent(tx, parent, now, reports));
  }
  if (reports.empty()) return std::vector<int64_t>();
  return tx.AppendReports(reports);
}

// Whether the parents' reports a relay applied wrote child reports (their
// runs ended and report to their own parents); a failure is logged, and
// the sweeper applies them.
bool Reported(Engine::Impl& impl, const absl::StatusOr<bool>& applied) {
  if (applied.ok()) return *applied;
  impl.Log(LogLevel::kWarning, StrCat("relay: applying parent reports failed (",
                                      applied.status().ToString(),
                                      "); the sweeper will apply them"));
  return false;
}

absl::Status CheckLimit(std::string_view what, int limit) {
  if (limit >= 1 && limit <= kMaxBatch) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat(what, " limit ", limit, " is out of range 1..", kMaxBatch));
}

}  // namespace

absl::StatusOr<int> Engine::RelayChildReports(int limit) {
  SLUICE_RETURN_IF_ERROR(CheckLimit("RelayChildReports", limit));
  int consumed = 0;
  // A cancelled child may owe cancels to its own children: go round until
  // no cancel is delivered. (A settled parent whose run ended and reported
  // to its own parent is relayed again inside RelayOnce / RelayPeerOnce.)
  for (int round = 0; round < kMaxRounds; ++round) {
    SLUICE_ASSIGN_OR_RETURN(int relayed, RelayOnce(limit));
    // Children in other stores: a store that does not answer is logged and
    // left to the next pass; the others go on.
    bool full_page = false;
    for (const auto& [store, peer] : impl_->peers()) {
      absl::StatusOr<int> from_peer = RelayPeerOnce(store, *peer, limit);
      if (from_peer.ok()) {
        relayed += *from_peer;
        full_page = full_page || *from_peer >= limit;
      } else {
        impl_->Log(LogLevel::kWarning,
                   StrCat("relay: store \"", store,
                          "\": ", from_peer.status().ToString(),
                          "; its reports wait for the next pass"));
      }
    }
    SLUICE_ASSIGN_OR_RETURN(int cascaded, CascadeChildCancels(limit));
    consumed += relayed;
    // Another round only if this one left work: delivered cancels (the
    // children they ended wrote reports) or a full page from a peer. Going
    // round after every relayed report cost each pass of a large fan-out an
    // empty round, a peek and a look for owed cancels (decision 0042).
    if (cascaded == 0 && !full_page) break;
  }
  return consumed;
}

absl::StatusOr<int> Engine::RelayOnce(int limit) {
  // Reports owed to a parent in another store are that store's engine's
  // to relay (RelayPeerOnce there); they stay.
  const std::string& own = impl_->options().store_name;
  auto relays = [&own](const ChildReport& r) {
    return r.parent_store.empty() || r.parent_store == own;
  };
  int consumed = 0;
  // Another pass only while one may have left reports: a full page, or
  // parents whose runs ended and wrote reports to their own parents.
  for (int pass = 0; pass < kMaxRounds; ++pass) {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
    const absl::Time now = impl_->Now();
    absl::StatusOr<std::vector<ChildReport>> peeked =
        PeekReportsFor(*tx, relays, limit);
    if (absl::IsUnimplemented(peeked.status())) return consumed;
    if (!peeked.ok()) return peeked.status();
    if (peeked->empty()) return consumed;
    std::vector<ChildSettlement> settlements;
    std::vector<int64_t> ids;
    for (const ChildReport& report : *peeked) {
      ids.push_back(report.report_id);
      if (report.parent.run_id.IsNil()) {
        impl_->Log(
            LogLevel::kWarning,
            StrCat("child report ", report.report_id, " names no parent (",
                   report.unreadable, "); dropped it"));
        continue;
      }
      settlements.push_back(SettlementOf(report));
    }
    SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> report_ids,
                            ApplySettlements(*tx, std::move(settlements), now));
    SLUICE_RETURN_IF_ERROR(tx->DeleteChildReports(ids));
    SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
    consumed += static_cast<int>(ids.size());
    // The push path for the parents' runs; a run that ends here may write
    // a child report of its own, which the next pass relays.
    const bool reported = Reported(*impl_, ApplyReportsOnly(report_ids));
    if (!reported && static_cast<int>(ids.size()) < limit) break;
  }
  return consumed;
}

absl::StatusOr<int> Engine::RelayPeerOnce(const std::string& store,
                                          Engine& peer, int limit) {
  // 1. Read what the peer holds for parents here.
  const std::string& own = impl_->options().store_name;
  std::vector<ChildReport> peeked;
  {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx,
                            peer.impl().Begin());
    absl::StatusOr<std::vector<ChildReport>> got = PeekReportsFor(
        *tx, [&own](const ChildReport& r) { return r.parent_store == own; },
        limit);
    if (absl::IsUnimplemented(got.status())) return 0;
    if (!got.ok()) return got.status();
    peeked = *std::move(got);
  }
  if (peeked.empty()) return 0;
  // 2. Apply them here, in one transaction: a link settles only while
  // pending, so a report applied before (a crash before step 3) settles
  // nothing again.
  std::vector<ChildSettlement> settlements;
  std::vector<int64_t> ids;
  for (const ChildReport& report : peeked) {
    ids.push_back(report.report_id);
    settlements.push_back(SettlementOf(report));
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<int64_t> report_ids,
      ApplySettlements(*tx, std::move(settlements), impl_->Now()));
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
  // 3. Only now delete them from the peer. If this fails they are applied
  // again next pass, changing nothing, and deleted then.
  absl::Status deleted = [&]() -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> peer_tx,
                            peer.impl().Begin());
    SLUICE_RETURN_IF_ERROR(peer_tx->DeleteChildReports(ids));
    return peer.impl().Commit(*peer_tx, {});
  }();
  if (!deleted.ok()) {
    impl_->Log(LogLevel::kWarning,
               StrCat("relay: deleting ", ids.size(),
                      " applied report(s) in "
                      "store \"",
                      store, "\" failed (", deleted.ToString(),
                      "); they will be applied again, changing nothing"));
  }
  // A parent here whose run ended may have reported to its own parent
  // here: relayed now, as RelayOnce would in its next pass.
  int local = 0;
  if (Reported(*impl_, ApplyReportsOnly(report_ids))) {
    SLUICE_ASSIGN_OR_RETURN(local, RelayOnce(limit));
  }
  // Consumed only once deleted: a store that keeps refusing the delete does
  // not keep the relay's rounds going.
  return local + (deleted.ok() ? static_cast<int>(ids.size()) : 0);
}

absl::StatusOr<int> Engine::CascadeChildCancels(int limit) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  absl::StatusOr<std::vector<ChildLinkRecord>> owed =
      tx->FindUncascadedChildLinks(limit);
  if (absl::IsUnimplemented(owed.status())) return 0;
  if (!owed.ok()) return owed.status();
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
  if (owed->empty()) return 0;
  std::vector<ChildLinkRecord> delivered;
  for (const ChildLinkRecord& link : *owed) {
    absl::Status s;
    if (link.child_store.empty()) {
      s = CancelRunOnly(link.child_run_id, CancelMode::kImmediate);
    } else if (Engine* peer = impl_->Peer(link.child_store)) {
      // Its own relay runs there (reports of that store's own parents).
      s = peer->CancelRun(link.child_run_id, CancelMode::kImmediate);
    } else {
      s = absl::FailedPreconditionError("not one of EngineOptions::stores");
      impl_->Log(LogLevel::kWarning,
                 StrCat("cascade: store \"", link.child_store, "\" ",
                        s.message(), "; the cancel stays owed"));
      continue;
    }
    // Ended already, or never created: nothing more is owed.
    if (s.ok() || absl::IsFailedPrecondition(s) || absl::IsNotFound(s)) {
      delivered.push_back(link);
      continue;
    }
    if (link.child_store.empty()) return s;
    // Another store that did not answer: the next pass tries again.
    impl_->Log(LogLevel::kWarning,
               StrCat("cascade: cancelling child ", link.child_index,
                      " in store \"", link.child_store, "\" failed (",
                      s.ToString(), "); the cancel stays owed"));
  }
  if (delivered.empty()) return 0;
  SLUICE_ASSIGN_OR_RETURN(tx, impl_->Begin());
  SLUICE_RETURN_IF_ERROR(tx->MarkChildLinksCascaded(delivered));
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
  return static_cast<int>(delivered.size());
}

absl::StatusOr<int> Engine::RepairChildLinks(int limit) {
  SLUICE_RETURN_IF_ERROR(CheckLimit("RepairChildLinks", limit));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  const absl::Time now = impl_->Now();
  absl::StatusOr<std::vector<ChildLinkRecord>> stale = tx->TakeStaleChildLinks(
      now - impl_->options().report_stale_after, now, limit);
  if (absl::IsUnimplemented(stale.status())) return 0;
  if (!stale.ok()) return stale.status();
  // Each child wherever it lives; a store that does not answer leaves its
  // links for the next sweep.
  SLUICE_ASSIGN_OR_RETURN(std::vector<ChildState> children,
                          ReadChildren(*impl_, *tx, *stale, now));
  std::vector<ChildSettlement> settlements;
  std::vector<ChildLinkRecord> remote;  // to create in their stores
  WriteBatch writes;
  TransactionEffects effects;
  for (size_t i = 0; i < stale->size(); ++i) {
    const ChildLinkRecord& link = (*stale)[i];
    ChildState& child = children[i];
    if (!child.reachable) continue;
    if (!child.run) {
      // Lost (or deleted by hand, or its store was down after the ack):
      // create it again while its parent waits.
      if (!link.child_store.empty()) {
        remote.push_back(link);  // CreateRemoteChildren re-checks the parent
        continue;
      }
      SLUICE_ASSIGN_OR_RETURN(
          std::vector<std::optional<TaskRecord>> parent,
          tx->GetTasks(std::span(&link.parent, 1), Fields::kNoPayloads));
      if (parent[0] && parent[0]->status == TaskStatus::kWaiting) {
        SLUICE_RETURN_IF_ERROR(
            CreateChildRun(*impl_, *tx, link, "", now, writes, effects));
      }
      continue;
    }
    // Live: its report will come. Ended: settle as its report would.
    std::optional<ChildReport>& report = child.report;
    if (!report) continue;
    report->parent = link.parent;
    report->child_index = link.child_index;
    settlements.push_back(SettlementOf(*report));
  }
  SLUICE_RETURN_IF_ERROR(writes.Flush(*tx, now, effects));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> report_ids,
                          ApplySettlements(*tx, std::move(settlements), now));
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, std::move(effects)));
  SLUICE_RETURN_IF_ERROR(CreateRemoteChildren(*impl_, remote));
  SLUICE_RETURN_IF_ERROR(ApplyReports(report_ids));
  SLUICE_RETURN_IF_ERROR(RelayChildReports().status());
  return static_cast<int>(stale->size());
}

}  // namespace sluice
