// The memory backend's outbox of task reports.
#ifndef SLUICE_BACKENDS_MEMORY_OUTBOX_H_
#define SLUICE_BACKENDS_MEMORY_OUTBOX_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "sluice/ids.h"
#include "sluice/records.h"
#include "undo_log.h"

namespace sluice::memory {

// Reports by id, plus a (created_at, id) index for the stale sweep. Ids come
// from a counter starting at 1; a rolled-back append gives its ids back.
//
// Every change records its undo in the given UndoLog. Not thread-safe: the
// store's lock guards it.
class Outbox {
 public:
  // Stores copies of `reports` under fresh increasing ids; returns the ids.
  std::vector<int64_t> Append(std::span<const OutboxReport> reports,
                              UndoLog& undo);
  // Deletes and returns the reports of `report_ids` still present, by id.
  std::vector<OutboxReport> Take(std::span<const int64_t> report_ids,
                                 UndoLog& undo);
  // Deletes and returns up to `limit` reports with created_at <
  // created_before, oldest first (ties by id).
  std::vector<OutboxReport> TakeStale(absl::Time created_before, int limit,
                                      UndoLog& undo);
  // Deletes the reports of tasks of `run_ids`. Costs O(reports held): the
  // outbox is normally short, since reports are applied as they come.
  void DeleteReportsOf(const absl::flat_hash_set<RunId>& run_ids,
                       UndoLog& undo);
  int64_t size() const { return static_cast<int64_t>(reports_.size()); }

  // Reverts, newest change first.
  void UndoAppend(int64_t first_id);
  void UndoTake(OutboxReport report);

 private:
  using CreatedKey = std::pair<absl::Time, int64_t>;

  // Removes the report at `it`, saving it in `undo`.
  void Remove(absl::flat_hash_map<int64_t, OutboxReport>::iterator it,
              UndoLog& undo);

  int64_t next_id_ = 1;
  absl::flat_hash_map<int64_t, OutboxReport> reports_;
  absl::btree_set<CreatedKey> by_created_;
};

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_OUTBOX_H_
