// The memory backend's fan-out tables: child links (in the parent's store)
// and child reports (in the child's store).
#ifndef SLUICE_BACKENDS_MEMORY_CHILD_TABLES_H_
#define SLUICE_BACKENDS_MEMORY_CHILD_TABLES_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "sluice/backend.h"
#include "sluice/ids.h"
#include "sluice/records.h"
#include "undo_log.h"

namespace sluice::memory {

// Links keyed by (parent, child_index), plus a (pending_since, key) index of
// the pending ones for the sweeper; reports by id from a counter starting at
// 1 (a rolled-back append gives its ids back, as the outbox does).
//
// Every change records its undo in the given UndoLog. Not thread-safe: the
// store's lock guards it.
class ChildTables {
 public:
  using LinkKey = std::pair<TaskKey, int>;

  // Inserts every link or, on a duplicate key, none (kAlreadyExists).
  absl::Status InsertLinks(std::span<ChildLinkRecord> links, UndoLog& undo);
  std::vector<ChildLinkRecord> GetLinks(const TaskKey& parent,
                                        Fields fields) const;
  // Each status counted up to `up_to` (nothing when it is 0 or less).
  ChildCounts CountLinks(const TaskKey& parent, int64_t up_to) const;
  std::vector<bool> Settle(std::span<ChildSettlement> settlements,
                           UndoLog& undo);
  int64_t CancelPending(const TaskKey& parent, std::string_view error,
                        UndoLog& undo);
  std::vector<ChildLinkRecord> TakeStale(absl::Time pending_before,
                                         absl::Time now, int limit,
                                         UndoLog& undo);
  std::vector<ChildLinkRecord> FindUncascaded(int limit) const;
  void MarkCascaded(std::span<const ChildLinkRecord> links, UndoLog& undo);
  // Deletes the links under parents of `run_ids` (their runs are deleted).
  void DeleteLinksOf(const absl::flat_hash_set<RunId>& run_ids, UndoLog& undo);

  std::vector<int64_t> AppendReports(std::span<const ChildReport> reports,
                                     UndoLog& undo);
  std::vector<ChildReport> PeekReports(int64_t after_id, int limit) const;
  void DeleteReports(std::span<const int64_t> report_ids, UndoLog& undo);
  int64_t report_count() const { return static_cast<int64_t>(reports_.size()); }

  // Reverts, newest change first.
  void UndoLinkChange(SavedChildLink saved);
  void UndoAppendReports(int64_t first_id);
  void UndoDeleteReport(ChildReport report);

 private:
  using PendingKey = std::pair<absl::Time, LinkKey>;

  // Saves `link` as it is and replaces it with `next` (nullopt: deletes it).
  void Change(const LinkKey& key, std::optional<ChildLinkRecord> next,
              UndoLog& undo);
  void Index(const ChildLinkRecord& link);
  void Unindex(const ChildLinkRecord& link);

  absl::btree_map<LinkKey, ChildLinkRecord> links_;
  absl::btree_set<PendingKey> pending_;
  absl::btree_set<LinkKey> uncascaded_;
  int64_t next_report_id_ = 1;
  absl::btree_map<int64_t, ChildReport> reports_;
};

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_CHILD_TABLES_H_
