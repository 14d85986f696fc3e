// The memory backend's dedupe registry: which run holds each (flow, key).
#ifndef SLUICE_BACKENDS_MEMORY_DEDUPE_REGISTRY_H_
#define SLUICE_BACKENDS_MEMORY_DEDUPE_REGISTRY_H_

#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "sluice/ids.h"
#include "sluice/records.h"
#include "undo_log.h"

namespace sluice::memory {

// Entries by flow then key, plus the throttle entries (those with an
// expires_at) by (expires_at, flow, key), so the expiry sweep takes the
// earliest without a scan.
//
// Every change records its undo in the given UndoLog. Not thread-safe: the
// store's lock guards it.
class DedupeRegistry {
 public:
  const DedupeRecord* Find(std::string_view flow_slug,
                           std::string_view key) const;
  // Inserts or overwrites the entry for (entry.flow_slug, entry.key).
  void Put(const DedupeRecord& entry, UndoLog& undo);
  // Deletes the entry if it names `run_id`; returns whether it did.
  bool Delete(std::string_view flow_slug, std::string_view key,
              const RunId& run_id, UndoLog& undo);
  // Deletes up to `limit` entries whose expires_at <= now, earliest first;
  // returns how many.
  int DeleteExpired(absl::Time now, int limit, UndoLog& undo);

  // Reverts a Put or a deletion, newest change first.
  void Undo(SavedDedupe saved);

 private:
  using Entries = absl::flat_hash_map<std::string, DedupeRecord>;
  using ExpiryKey = std::tuple<absl::Time, std::string, std::string>;

  // Removes the entry (which must exist) and saves it for the undo.
  void Erase(Entries& entries, Entries::iterator it, UndoLog& undo);
  void IndexExpiry(const DedupeRecord& entry);
  void UnindexExpiry(const DedupeRecord& entry);

  absl::flat_hash_map<std::string, Entries> by_flow_;
  absl::btree_set<ExpiryKey> expiring_;
};

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_DEDUPE_REGISTRY_H_
