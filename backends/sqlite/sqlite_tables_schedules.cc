// Interface v6 (schedules): the schedules table of schema version 4.
#include <string>
#include <utility>

#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_rows.h"
#include "sqlite_tables.h"

namespace sluice::sqlite_internal {
namespace {

constexpr std::string_view kPutSchedule =
    "INSERT INTO schedules (group_name, name, cursor, created_at, updated_at, "
    "definition) VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
    "ON CONFLICT (group_name, name) DO UPDATE SET "
    "updated_at = excluded.updated_at, definition = excluded.definition";
constexpr std::string_view kListSchedules =
    "SELECT group_name, name, cursor, created_at, updated_at, definition "
    "FROM schedules WHERE ?1 = '' OR group_name = ?1 "
    "ORDER BY group_name, name";
constexpr std::string_view kDeleteSchedule =
    "DELETE FROM schedules WHERE group_name = ?1 AND name = ?2";
constexpr std::string_view kAdvanceScheduleCursor =
    "UPDATE schedules SET cursor = ?4 "
    "WHERE group_name = ?1 AND name = ?2 AND cursor = ?3";

ScheduleRecord ReadSchedule(const Statement& row) {
  ScheduleRecord schedule{.group = std::string(row.Text(0)),
                          .name = std::string(row.Text(1)),
                          .cursor = row.Time(2),
                          .created_at = row.Time(3),
                          .updated_at = row.Time(4)};
  absl::StatusOr<Json> definition =
      ParseStoredJson(row.Text(5), "schedule definition");
  if (definition.ok()) {
    schedule.definition = *std::move(definition);
  } else {
    schedule.unreadable = ToStd(definition.status().message());
  }
  return schedule;
}

}  // namespace

absl::Status SqliteTables::PutSchedule(const ScheduleRecord& schedule) {
  SLUICE_ASSIGN_OR_RETURN(Statement put,
                          Prepare(kPutSchedule, "PutSchedule"));
  put.BindText(1, schedule.group);
  put.BindText(2, schedule.name);
  put.BindTime(3, schedule.cursor);
  put.BindTime(4, schedule.created_at);
  put.BindTime(5, schedule.updated_at);
  BindJson(put, 6, schedule.definition);
  return put.Run();
}

absl::StatusOr<std::vector<ScheduleRecord>> SqliteTables::ListSchedules(
    std::string_view group) {
  SLUICE_ASSIGN_OR_RETURN(Statement list,
                          Prepare(kListSchedules, "ListSchedules"));
  list.BindText(1, group);
  std::vector<ScheduleRecord> schedules;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, list.Step());
    if (!row) return schedules;
    schedules.push_back(ReadSchedule(list));
  }
}

absl::StatusOr<bool> SqliteTables::DeleteSchedule(std::string_view group,
                                                  std::string_view name) {
  SLUICE_ASSIGN_OR_RETURN(Statement remove,
                          Prepare(kDeleteSchedule, "DeleteSchedule"));
  remove.BindText(1, group);
  remove.BindText(2, name);
  SLUICE_RETURN_IF_ERROR(remove.Run());
  return remove.Changes() > 0;
}

absl::StatusOr<bool> SqliteTables::AdvanceScheduleCursor(
    std::string_view group, std::string_view name, absl::Time expected,
    absl::Time next) {
  SLUICE_ASSIGN_OR_RETURN(
      Statement advance,
      Prepare(kAdvanceScheduleCursor, "AdvanceScheduleCursor"));
  advance.BindText(1, group);
  advance.BindText(2, name);
  advance.BindTime(3, expected);
  advance.BindTime(4, next);
  SLUICE_RETURN_IF_ERROR(advance.Run());
  return advance.Changes() > 0;
}

}  // namespace sluice::sqlite_internal
