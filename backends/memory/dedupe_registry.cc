#include "dedupe_registry.h"

#include <utility>
#include <vector>

#include "sluice/internal/strings.h"

namespace sluice::memory {

const DedupeRecord* DedupeRegistry::Find(std::string_view flow_slug,
                                         std::string_view key) const {
  auto flow_it = by_flow_.find(ToAbsl(flow_slug));
  if (flow_it == by_flow_.end()) return nullptr;
  auto it = flow_it->second.find(ToAbsl(key));
  return it == flow_it->second.end() ? nullptr : &it->second;
}

void DedupeRegistry::Put(const DedupeRecord& entry, UndoLog& undo) {
  Entries& entries = by_flow_[entry.flow_slug];
  auto [it, inserted] = entries.try_emplace(entry.key, entry);
  SavedDedupe saved{.flow_slug = entry.flow_slug, .key = entry.key};
  if (!inserted) {
    UnindexExpiry(it->second);
    saved.previous = std::exchange(it->second, entry);
  }
  IndexExpiry(it->second);
  undo.Add(undo::DedupeChanged{}, std::move(saved));
}

bool DedupeRegistry::Delete(std::string_view flow_slug, std::string_view key,
                            const RunId& run_id, UndoLog& undo) {
  auto flow_it = by_flow_.find(ToAbsl(flow_slug));
  if (flow_it == by_flow_.end()) return false;
  auto it = flow_it->second.find(ToAbsl(key));
  if (it == flow_it->second.end() || it->second.run_id != run_id) return false;
  Erase(flow_it->second, it, undo);
  if (flow_it->second.empty()) by_flow_.erase(flow_it);
  return true;
}

int DedupeRegistry::DeleteExpired(absl::Time now, int limit, UndoLog& undo) {
  // Collect first: erasing changes the index being walked.
  std::vector<std::pair<std::string, std::string>> expired;
  for (auto it = expiring_.begin();
       it != expiring_.end() && std::get<absl::Time>(*it) <= now &&
       static_cast<int>(expired.size()) < limit;
       ++it) {
    expired.emplace_back(std::get<1>(*it), std::get<2>(*it));
  }
  for (const auto& [flow_slug, key] : expired) {
    auto flow_it = by_flow_.find(flow_slug);
    Erase(flow_it->second, flow_it->second.find(key), undo);
    if (flow_it->second.empty()) by_flow_.erase(flow_it);
  }
  return static_cast<int>(expired.size());
}

void DedupeRegistry::Undo(SavedDedupe saved) {
  Entries& entries = by_flow_[saved.flow_slug];
  auto it = entries.find(saved.key);
  if (it != entries.end()) {
    UnindexExpiry(it->second);
    if (!saved.previous.has_value()) {
      entries.erase(it);
      if (entries.empty()) by_flow_.erase(saved.flow_slug);
      return;
    }
    it->second = std::move(*saved.previous);
  } else {
    it = entries.try_emplace(saved.key, std::move(*saved.previous)).first;
  }
  IndexExpiry(it->second);
}

void DedupeRegistry::Erase(Entries& entries, Entries::iterator it,
                           UndoLog& undo) {
  UnindexExpiry(it->second);
  SavedDedupe saved{.flow_slug = it->second.flow_slug,
                    .key = it->second.key,
                    .previous = std::move(it->second)};
  entries.erase(it);
  undo.Add(undo::DedupeChanged{}, std::move(saved));
}

void DedupeRegistry::IndexExpiry(const DedupeRecord& entry) {
  if (entry.expires_at.has_value()) {
    expiring_.insert({*entry.expires_at, entry.flow_slug, entry.key});
  }
}

void DedupeRegistry::UnindexExpiry(const DedupeRecord& entry) {
  if (entry.expires_at.has_value()) {
    expiring_.erase({*entry.expires_at, entry.flow_slug, entry.key});
  }
}

}  // namespace sluice::memory
