// UpsertSchedules and ListSchedules: reconciling one group of schedules and
// reading them back (docs/decisions/0031-cron-schedules.md).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "engine_impl.h"
#include "schedule_spec.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {

absl::Status Engine::UpsertSchedules(std::string_view group,
                                     std::span<const ScheduleSpec> specs) {
  SLUICE_RETURN_IF_ERROR(ValidateScheduleGroup(group));
  // Everything is checked before the backend is touched.
  absl::flat_hash_set<std::string> names;
  std::vector<Json> definitions;
  definitions.reserve(specs.size());
  for (const ScheduleSpec& spec : specs) {
    const std::string owner =
        StrCat("schedule group \"", group, "\" spec \"", spec.name, "\"");
    SLUICE_RETURN_IF_ERROR(
        CompileSchedule(owner, spec, options().max_payload_bytes).status());
    if (!names.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          StrCat(owner,
                 ": the name appears twice; names are unique within "
                 "a group"));
    }
    definitions.push_back(EncodeScheduleSpec(spec));
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(std::vector<ScheduleRecord> stored,
                          tx->ListSchedules(group));
  absl::flat_hash_map<std::string, const ScheduleRecord*> by_name;
  for (const ScheduleRecord& record : stored) by_name[record.name] = &record;
  const absl::Time now = impl_->Now();
  for (size_t i = 0; i < specs.size(); ++i) {
    auto it = by_name.find(specs[i].name);
    if (it != by_name.end() && it->second->unreadable.empty() &&
        it->second->definition == definitions[i]) {
      continue;  // unchanged: keep updated_at
    }
    // A new schedule's cursor is now: fire times before it never fire. An
    // existing one keeps its cursor (the backend ignores this one).
    SLUICE_RETURN_IF_ERROR(tx->PutSchedule(ScheduleRecord{
        .group = std::string(group),
        .name = specs[i].name,
        .definition = std::move(definitions[i]),
        .cursor = now,
        .created_at = now,
        .updated_at = now,
    }));
  }
  for (const ScheduleRecord& record : stored) {
    if (names.contains(record.name)) continue;
    SLUICE_RETURN_IF_ERROR(tx->DeleteSchedule(group, record.name).status());
  }
  return impl_->Commit(*tx, {});
}

absl::StatusOr<std::vector<ScheduleInfo>> Engine::ListSchedules(
    std::string_view group) {
  if (!group.empty()) SLUICE_RETURN_IF_ERROR(ValidateScheduleGroup(group));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(std::vector<ScheduleRecord> stored,
                          tx->ListSchedules(group));
  std::vector<ScheduleInfo> schedules;
  schedules.reserve(stored.size());
  for (ScheduleRecord& record : stored) {
    ScheduleInfo info{.group = std::move(record.group),
                      .cursor = record.cursor,
                      .created_at = record.created_at,
                      .updated_at = record.updated_at,
                      .unreadable = std::move(record.unreadable)};
    info.spec.name = record.name;
    if (info.unreadable.empty()) {
      absl::StatusOr<ScheduleSpec> spec =
          DecodeScheduleSpec(record.name, record.definition);
      absl::StatusOr<CompiledSchedule> compiled =
          spec.ok()
              ? CompileSchedule(record.name, *spec, options().max_payload_bytes)
              : spec.status();
      if (compiled.ok()) {
        info.spec = std::move(compiled->spec);
        info.next_fire = compiled->cron.NextAfter(info.cursor, compiled->zone);
      } else {
        info.unreadable = std::string(compiled.status().message());
      }
    }
    schedules.push_back(std::move(info));
  }
  return schedules;
}

}  // namespace sluice
