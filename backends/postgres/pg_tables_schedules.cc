// Interface v6 (schedules): sluice.schedules (migration 0006_schedules.sql).
#include <string>
#include <utility>

#include "pg_tables.h"
#include "sluice/internal/status_macros.h"

namespace sluice::postgres_internal {
namespace {

constexpr std::string_view kPutSchedule =
    "INSERT INTO sluice.schedules (group_name, name, cursor, created_at, "
    "updated_at, definition) VALUES ($1, $2, $3, $4, $5, $6) "
    "ON CONFLICT (group_name, name) DO UPDATE SET "
    "updated_at = excluded.updated_at, definition = excluded.definition";
constexpr std::string_view kListSchedules =
    "SELECT group_name, name, cursor, created_at, updated_at, definition "
    "FROM sluice.schedules WHERE $1 = '' OR group_name = $1 "
    "ORDER BY group_name, name";
constexpr std::string_view kDeleteSchedule =
    "DELETE FROM sluice.schedules WHERE group_name = $1 AND name = $2 "
    "RETURNING 1";
constexpr std::string_view kAdvanceScheduleCursor =
    "UPDATE sluice.schedules SET cursor = $4 "
    "WHERE group_name = $1 AND name = $2 AND cursor = $3 RETURNING 1";

ScheduleRecord ReadSchedule(Row row) {
  ScheduleRecord schedule;
  schedule.group = row.Text();
  schedule.name = row.Text();
  schedule.cursor = row.Time();
  schedule.created_at = row.Time();
  schedule.updated_at = row.Time();
  schedule.definition = row.Json("schedule definition");
  schedule.unreadable = row.TakeUnreadable();
  return schedule;
}

}  // namespace

absl::Status PgTables::PutSchedule(const ScheduleRecord& schedule) {
  Send(kPutSchedule,
       Params()
           .Text(schedule.group)
           .Text(schedule.name)
           .Time(schedule.cursor)
           .Time(schedule.created_at)
           .Time(schedule.updated_at)
           .Json(schedule.definition),
       "PutSchedule");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ScheduleRecord>> PgTables::ListSchedules(
    std::string_view group) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(kListSchedules, Params().Text(group), "ListSchedules"));
  std::vector<ScheduleRecord> schedules;
  for (int i = 0; i < result.rows(); ++i) {
    Row row = result.row(i);
    ScheduleRecord schedule = ReadSchedule(row);
    SLUICE_RETURN_IF_ERROR(row.status());
    schedules.push_back(std::move(schedule));
  }
  return schedules;
}

absl::StatusOr<bool> PgTables::DeleteSchedule(std::string_view group,
                                              std::string_view name) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(kDeleteSchedule, Params().Text(group).Text(name),
                           "DeleteSchedule"));
  return result.rows() > 0;
}

absl::StatusOr<bool> PgTables::AdvanceScheduleCursor(std::string_view group,
                                                     std::string_view name,
                                                     absl::Time expected,
                                                     absl::Time next) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result,
      Query(kAdvanceScheduleCursor,
            Params().Text(group).Text(name).Time(expected).Time(next),
            "AdvanceScheduleCursor"));
  return result.rows() > 0;
}

}  // namespace sluice::postgres_internal
