// The memory backend's schedules, keyed by (group, name).
#ifndef SLUICE_BACKENDS_MEMORY_SCHEDULE_TABLE_H_
#define SLUICE_BACKENDS_MEMORY_SCHEDULE_TABLE_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "sluice/records.h"
#include "undo_log.h"

namespace sluice::memory {

// Every change saves the row as it was (SavedSchedule), so a rollback puts
// it back. Not thread-safe: the store's lock guards it.
class ScheduleTable {
 public:
  void Put(const ScheduleRecord& schedule, UndoLog& undo);
  // Of `group`, or of every group if empty; by (group, name).
  std::vector<ScheduleRecord> List(std::string_view group) const;
  bool Delete(std::string_view group, std::string_view name, UndoLog& undo);
  bool AdvanceCursor(std::string_view group, std::string_view name,
                     absl::Time expected, absl::Time next, UndoLog& undo);

  void Undo(SavedSchedule saved);

 private:
  using Key = std::pair<std::string, std::string>;
  absl::btree_map<Key, ScheduleRecord> rows_;
};

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_SCHEDULE_TABLE_H_
