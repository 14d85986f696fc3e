#include "schedule_table.h"

namespace sluice::memory {

void ScheduleTable::Put(const ScheduleRecord& schedule, UndoLog& undo) {
  Key key{schedule.group, schedule.name};
  SavedSchedule saved{.group = schedule.group, .name = schedule.name};
  auto it = rows_.find(key);
  if (it == rows_.end()) {
    rows_.emplace(std::move(key), schedule);
  } else {
    saved.previous = it->second;
    it->second.definition = schedule.definition;
    it->second.updated_at = schedule.updated_at;
    it->second.unreadable.clear();
  }
  undo.Add(undo::ScheduleChanged{}, std::move(saved));
}

std::vector<ScheduleRecord> ScheduleTable::List(std::string_view group) const {
  std::vector<ScheduleRecord> out;
  auto it = group.empty() ? rows_.begin()
                          : rows_.lower_bound(Key{std::string(group), ""});
  for (; it != rows_.end(); ++it) {
    if (!group.empty() && it->first.first != group) break;
    out.push_back(it->second);
  }
  return out;
}

bool ScheduleTable::Delete(std::string_view group, std::string_view name,
                           UndoLog& undo) {
  auto it = rows_.find(Key{std::string(group), std::string(name)});
  if (it == rows_.end()) return false;
  SavedSchedule saved{.group = std::string(group),
                      .name = std::string(name),
                      .previous = std::move(it->second)};
  rows_.erase(it);
  undo.Add(undo::ScheduleChanged{}, std::move(saved));
  return true;
}

bool ScheduleTable::AdvanceCursor(std::string_view group, std::string_view name,
                                  absl::Time expected, absl::Time next,
                                  UndoLog& undo) {
  auto it = rows_.find(Key{std::string(group), std::string(name)});
  if (it == rows_.end() || it->second.cursor != expected) return false;
  undo.Add(undo::ScheduleChanged{},
           SavedSchedule{.group = std::string(group),
                         .name = std::string(name),
                         .previous = it->second});
  it->second.cursor = next;
  return true;
}

void ScheduleTable::Undo(SavedSchedule saved) {
  Key key{std::move(saved.group), std::move(saved.name)};
  if (saved.previous.has_value()) {
    rows_.insert_or_assign(std::move(key), std::move(*saved.previous));
  } else {
    rows_.erase(key);
  }
}

}  // namespace sluice::memory
