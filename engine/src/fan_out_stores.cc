// Children in another store (docs/decisions/0039-cross-store-children.md):
// creating them there after the parent's ack, reading them for the
// sweeper, and finding the reports a relay owes.
//
// The parent's engine owns the whole protocol: the child's store holds
// runs and reports only, and its own engine needs no idea of the parent.
#include <map>
#include <string>
#include <vector>

#include "fan_out_internal.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "write_batch.h"

namespace sluice {
namespace {

// How many reports of other stores one peek steps over at most, so a
// backlog owed elsewhere cannot make a relay pass unbounded.
constexpr int kMaxPeekPages = 16;

// The links of each store, by store name.
std::map<std::string, std::vector<const ChildLinkRecord*>> ByStore(
    std::span<const ChildLinkRecord> links) {
  std::map<std::string, std::vector<const ChildLinkRecord*>> by_store;
  for (const ChildLinkRecord& link : links) {
    by_store[link.child_store].push_back(&link);
  }
  return by_store;
}

// Of `links`, those whose parent task still waits with the link pending
// (read in the parent's store): a child is created only for them.
absl::StatusOr<std::vector<const ChildLinkRecord*>> StillWanted(
    Engine::Impl& impl, std::span<const ChildLinkRecord* const> links) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl.Begin());
  std::map<TaskKey, std::vector<ChildLinkRecord>> pending;
  std::vector<const ChildLinkRecord*> wanted;
  for (const ChildLinkRecord* link : links) {
    auto it = pending.find(link->parent);
    if (it == pending.end()) {
      SLUICE_ASSIGN_OR_RETURN(
          std::vector<std::optional<TaskRecord>> task,
          tx->GetTasks(std::span(&link->parent, 1), Fields::kNoPayloads));
      std::vector<ChildLinkRecord> found;
      if (task[0] && task[0]->status == TaskStatus::kWaiting) {
        SLUICE_ASSIGN_OR_RETURN(
            found, tx->GetChildLinks(link->parent, Fields::kNoPayloads));
      }
      it = pending.emplace(link->parent, std::move(found)).first;
    }
    for (const ChildLinkRecord& current : it->second) {
      if (current.child_index == link->child_index &&
          current.status == ChildStatus::kPending) {
        wanted.push_back(link);
      }
    }
  }
  return wanted;
}

// Creates the missing children of `links` in one transaction of `peer`.
// Returns the links whose children this call created.
absl::StatusOr<std::vector<const ChildLinkRecord*>> CreateIn(
    Engine& peer, std::string_view parent_store,
    std::span<const ChildLinkRecord* const> links) {
  Engine::Impl& impl = peer.impl();
  std::vector<const ChildLinkRecord*> created;
  if (links.empty()) return created;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl.Begin());
  std::vector<RunId> ids;
  for (const ChildLinkRecord* link : links) ids.push_back(link->child_run_id);
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<RunRecord>> runs,
      tx->GetRuns(ids, LockMode::kNone, Fields::kNoPayloads));
  const absl::Time now = impl.Now();
  WriteBatch writes;
  TransactionEffects effects;
  for (size_t i = 0; i < links.size(); ++i) {
    if (runs[i]) continue;  // created before: ids are derived
    SLUICE_RETURN_IF_ERROR(CreateChildRun(impl, *tx, *links[i], parent_store,
                                          now, writes, effects));
    created.push_back(links[i]);
  }
  if (created.empty()) return created;
  SLUICE_RETURN_IF_ERROR(writes.Flush(*tx, now, effects));
  SLUICE_RETURN_IF_ERROR(impl.Commit(*tx, std::move(effects)));
  return created;
}

// The second half of a double check with the cancel path, which commits
// the parent's cancel (its links leave pending) and only then cancels the
// children it finds in their store. Here the children are committed in
// their store first, and only then are their links read again in the
// parent's store: a cancel (or fail-fast) that committed after
// StillWanted's read is seen here, and the children it could not find are
// cancelled now. Whichever side commits second sees the other, so no child
// of a stopped parent runs to its end unseen, without a lock across stores.
absl::Status CancelUnwanted(Engine::Impl& impl, Engine& peer,
                            std::span<const ChildLinkRecord* const> created) {
  if (created.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(std::vector<const ChildLinkRecord*> wanted,
                          StillWanted(impl, created));
  if (wanted.size() == created.size()) return absl::OkStatus();
  absl::Status first;
  size_t next = 0;
  for (const ChildLinkRecord* link : created) {
    if (next < wanted.size() && wanted[next] == link) {
      ++next;
      continue;
    }
    absl::Status s = peer.CancelRun(link->child_run_id, CancelMode::kImmediate);
    // Ended already (it ran, or the cascade got there first) or gone:
    // nothing is owed.
    if (s.ok() || absl::IsFailedPrecondition(s) || absl::IsNotFound(s)) {
      continue;
    }
    if (first.ok()) {
      first = absl::Status(
          s.code(), StrCat("cancelling child ", link->child_index, " of task ",
                           link->parent.run_id.ToString(),
                           " after its parent stopped: ", s.message()));
    }
  }
  return first;
}

}  // namespace

absl::Status CreateRemoteChildren(Engine::Impl& impl,
                                  std::span<const ChildLinkRecord> links) {
  if (links.empty()) return absl::OkStatus();
  absl::Status first;
  for (const auto& [store, of_store] : ByStore(links)) {
    Engine* peer = impl.Peer(store);
    absl::Status s;
    if (peer == nullptr) {
      s = absl::FailedPreconditionError(
          StrCat("store \"", store, "\" is not one of EngineOptions::stores"));
    } else {
      absl::StatusOr<std::vector<const ChildLinkRecord*>> wanted =
          StillWanted(impl, of_store);
      absl::StatusOr<std::vector<const ChildLinkRecord*>> created =
          wanted.ok() ? CreateIn(*peer, impl.options().store_name, *wanted)
                      : wanted.status();
      s = created.ok() ? CancelUnwanted(impl, *peer, *created)
                       : created.status();
    }
    if (!s.ok() && first.ok()) {
      first = absl::Status(s.code(),
                           StrCat("store \"", store, "\": ", s.message()));
    }
  }
  return first;
}

absl::StatusOr<std::vector<ChildState>> ReadChildren(
    Engine::Impl& impl, Transaction& tx, std::span<const ChildLinkRecord> links,
    absl::Time now) {
  std::vector<ChildState> states(links.size());
  std::map<std::string, std::vector<size_t>> by_store;
  for (size_t i = 0; i < links.size(); ++i) {
    by_store[links[i].child_store].push_back(i);
  }
  for (const auto& [store, indexes] : by_store) {
    Engine* peer = store.empty() ? nullptr : impl.Peer(store);
    Engine::Impl& owner = peer != nullptr ? peer->impl() : impl;
    std::unique_ptr<Transaction> peer_tx;
    if (!store.empty()) {
      absl::StatusOr<std::unique_ptr<Transaction>> begun =
          absl::FailedPreconditionError("not one of EngineOptions::stores");
      if (peer != nullptr) begun = peer->impl().Begin();
      if (!begun.ok()) {
        impl.Log(LogLevel::kWarning,
                 StrCat("fan-out repair: store \"", store, "\" (",
                        begun.status().ToString(), "); its ", indexes.size(),
                        " link(s) wait for the next sweep"));
        for (size_t i : indexes) states[i].reachable = false;
        continue;
      }
      peer_tx = *std::move(begun);
    }
    Transaction& read = peer_tx != nullptr ? *peer_tx : tx;
    std::vector<RunId> ids;
    for (size_t i : indexes) ids.push_back(links[i].child_run_id);
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<RunRecord>> runs,
                            read.GetRuns(ids, LockMode::kNone, Fields::kAll));
    for (size_t k = 0; k < indexes.size(); ++k) {
      ChildState& state = states[indexes[k]];
      state.run = std::move(runs[k]);
      if (!state.run || !IsTerminal(state.run->status)) continue;
      SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledFlow> flow,
                              owner.FlowFor(read, state.run->flow_slug));
      state.report = ChildReportFor(*state.run, *flow, now);
    }
  }
  return states;
}

absl::StatusOr<std::vector<ChildReport>> PeekReportsFor(
    Transaction& tx, const std::function<bool(const ChildReport&)>& relays,
    int limit) {
  std::vector<ChildReport> taken;
  int64_t after = 0;
  for (int page = 0; page < kMaxPeekPages; ++page) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<ChildReport> peeked,
                            tx.PeekChildReports(after, limit));
    for (ChildReport& report : peeked) {
      after = report.report_id;
      if (relays(report) && static_cast<int>(taken.size()) < limit) {
        taken.push_back(std::move(report));
      }
    }
    if (static_cast<int>(peeked.size()) < limit ||
        static_cast<int>(taken.size()) >= limit) {
      break;
    }
  }
  return taken;
}

}  // namespace sluice
