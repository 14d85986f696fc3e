#include "child_tables.h"

#include <algorithm>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "sluice/internal/strings.h"

namespace sluice::memory {
namespace {

constexpr int kFirstIndex = std::numeric_limits<int>::min();

ChildLinkRecord CopyOf(const ChildLinkRecord& link, Fields fields) {
  if (fields == Fields::kAll) return link;
  ChildLinkRecord copy = link;
  copy.output.reset();
  copy.spec = Json();
  return copy;
}

}  // namespace

absl::Status ChildTables::InsertLinks(std::span<ChildLinkRecord> links,
                                      UndoLog& undo) {
  absl::flat_hash_set<LinkKey> seen;
  for (const ChildLinkRecord& link : links) {
    const LinkKey key{link.parent, link.child_index};
    if (links_.contains(key) || !seen.insert(key).second) {
      return absl::AlreadyExistsError(
          StrCat("child link ", link.child_index, " of task ",
                 link.parent.run_id.ToString(), "/", link.parent.step_index,
                 "/", link.parent.task_index, " already exists"));
    }
  }
  for (ChildLinkRecord& link : links) {
    const LinkKey key{link.parent, link.child_index};
    Change(key, std::move(link), undo);
  }
  return absl::OkStatus();
}

std::vector<ChildLinkRecord> ChildTables::GetLinks(const TaskKey& parent,
                                                   Fields fields) const {
  std::vector<ChildLinkRecord> found;
  for (auto it = links_.lower_bound({parent, kFirstIndex});
       it != links_.end() && it->first.first == parent; ++it) {
    found.push_back(CopyOf(it->second, fields));
  }
  return found;
}

ChildCounts ChildTables::CountLinks(const TaskKey& parent,
                                    int64_t up_to) const {
  ChildCounts counts;
  for (auto it = links_.lower_bound({parent, kFirstIndex});
       it != links_.end() && it->first.first == parent; ++it) {
    switch (it->second.status) {
      case ChildStatus::kPending:
        ++counts.pending;
        break;
      case ChildStatus::kCompleted:
        ++counts.completed;
        break;
      case ChildStatus::kFailed:
        ++counts.failed;
        break;
      case ChildStatus::kCancelled:
        ++counts.cancelled;
        break;
    }
  }
  const int64_t cap = std::max<int64_t>(up_to, 0);
  for (int64_t* count : {&counts.pending, &counts.completed, &counts.failed,
                         &counts.cancelled}) {
    *count = std::min(*count, cap);
  }
  return counts;
}

std::vector<bool> ChildTables::Settle(std::span<ChildSettlement> settlements,
                                      UndoLog& undo) {
  std::vector<bool> applied;
  applied.reserve(settlements.size());
  for (ChildSettlement& s : settlements) {
    const LinkKey key{s.parent, s.child_index};
    auto it = links_.find(key);
    if (it == links_.end() || it->second.status != ChildStatus::kPending ||
        s.outcome == ChildStatus::kPending) {
      applied.push_back(false);
      continue;
    }
    ChildLinkRecord next = it->second;
    next.status = s.outcome;
    next.output = std::move(s.output);
    next.error = std::move(s.error);
    next.cascaded = s.cascaded;
    Change(key, std::move(next), undo);
    applied.push_back(true);
  }
  return applied;
}

int64_t ChildTables::CancelPending(const TaskKey& parent,
                                   std::string_view error, UndoLog& undo) {
  std::vector<LinkKey> keys;
  for (auto it = links_.lower_bound({parent, kFirstIndex});
       it != links_.end() && it->first.first == parent; ++it) {
    if (it->second.status == ChildStatus::kPending) keys.push_back(it->first);
  }
  for (const LinkKey& key : keys) {
    ChildLinkRecord next = links_.at(key);
    next.status = ChildStatus::kCancelled;
    next.error = std::string(error);
    next.cascaded = false;
    Change(key, std::move(next), undo);
  }
  return static_cast<int64_t>(keys.size());
}

std::vector<ChildLinkRecord> ChildTables::TakeStale(absl::Time pending_before,
                                                    absl::Time now, int limit,
                                                    UndoLog& undo) {
  std::vector<LinkKey> keys;
  for (const auto& [since, key] : pending_) {
    if (since >= pending_before || keys.size() >= static_cast<size_t>(limit)) {
      break;
    }
    keys.push_back(key);
  }
  std::vector<ChildLinkRecord> taken;
  taken.reserve(keys.size());
  for (const LinkKey& key : keys) {
    ChildLinkRecord next = links_.at(key);
    next.pending_since = now;
    taken.push_back(next);
    Change(key, std::move(next), undo);
  }
  return taken;
}

std::vector<ChildLinkRecord> ChildTables::FindUncascaded(int limit) const {
  std::vector<ChildLinkRecord> found;
  for (const LinkKey& key : uncascaded_) {
    if (found.size() >= static_cast<size_t>(limit)) break;
    found.push_back(links_.at(key));
  }
  return found;
}

void ChildTables::MarkCascaded(std::span<const ChildLinkRecord> links,
                               UndoLog& undo) {
  for (const ChildLinkRecord& link : links) {
    const LinkKey key{link.parent, link.child_index};
    auto it = links_.find(key);
    if (it == links_.end() || it->second.cascaded) continue;
    ChildLinkRecord next = it->second;
    next.cascaded = true;
    Change(key, std::move(next), undo);
  }
}

void ChildTables::DeleteLinksOf(const absl::flat_hash_set<RunId>& run_ids,
                                UndoLog& undo) {
  std::vector<LinkKey> keys;
  for (const auto& [key, link] : links_) {
    if (run_ids.contains(key.first.run_id)) keys.push_back(key);
  }
  for (const LinkKey& key : keys) Change(key, std::nullopt, undo);
}

std::vector<int64_t> ChildTables::AppendReports(
    std::span<const ChildReport> reports, UndoLog& undo) {
  std::vector<int64_t> ids;
  if (reports.empty()) return ids;
  ids.reserve(reports.size());
  undo.Add(undo::ChildReportsAppended{.first_id = next_report_id_});
  for (const ChildReport& report : reports) {
    const int64_t id = next_report_id_++;
    ChildReport& stored = reports_.try_emplace(id, report).first->second;
    stored.report_id = id;
    ids.push_back(id);
  }
  return ids;
}

std::vector<ChildReport> ChildTables::PeekReports(int64_t after_id,
                                                  int limit) const {
  std::vector<ChildReport> found;
  for (auto it = reports_.upper_bound(after_id);
       it != reports_.end() && found.size() < static_cast<size_t>(limit);
       ++it) {
    found.push_back(it->second);
  }
  return found;
}

void ChildTables::DeleteReports(std::span<const int64_t> report_ids,
                                UndoLog& undo) {
  for (const int64_t id : report_ids) {
    auto it = reports_.find(id);
    if (it == reports_.end()) continue;
    undo.Add(undo::ChildReportDeleted{}, std::move(it->second));
    reports_.erase(it);
  }
}

void ChildTables::UndoLinkChange(SavedChildLink saved) {
  auto it = links_.find(saved.key);
  if (it != links_.end()) {
    Unindex(it->second);
    links_.erase(it);
  }
  if (saved.previous.has_value()) {
    Index(*saved.previous);
    links_.emplace(saved.key, std::move(*saved.previous));
  }
}

void ChildTables::UndoAppendReports(int64_t first_id) {
  reports_.erase(reports_.lower_bound(first_id), reports_.end());
  next_report_id_ = first_id;
}

void ChildTables::UndoDeleteReport(ChildReport report) {
  const int64_t id = report.report_id;
  reports_.emplace(id, std::move(report));
}

void ChildTables::Change(const LinkKey& key,
                         std::optional<ChildLinkRecord> next, UndoLog& undo) {
  SavedChildLink saved{.key = key};
  auto it = links_.find(key);
  if (it != links_.end()) {
    Unindex(it->second);
    saved.previous = std::move(it->second);
    links_.erase(it);
  }
  if (next.has_value()) {
    Index(*next);
    links_.emplace(key, std::move(*next));
  }
  undo.Add(undo::ChildLinkChanged{}, std::move(saved));
}

void ChildTables::Index(const ChildLinkRecord& link) {
  const LinkKey key{link.parent, link.child_index};
  if (link.status == ChildStatus::kPending) {
    pending_.insert({link.pending_since, key});
  }
  if (link.status == ChildStatus::kCancelled && !link.cascaded) {
    uncascaded_.insert(key);
  }
}

void ChildTables::Unindex(const ChildLinkRecord& link) {
  const LinkKey key{link.parent, link.child_index};
  pending_.erase({link.pending_since, key});
  uncascaded_.erase(key);
}

}  // namespace sluice::memory
