// What follows taking tasks back from their attempts (a release, stall
// recovery): one write path for both.
#ifndef SLUICE_ENGINE_TAKEN_BACK_H_
#define SLUICE_ENGINE_TAKEN_BACK_H_

#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine_impl.h"
#include "sluice/backend.h"

namespace sluice {

struct TakenBack {
  std::vector<int64_t> report_ids;  // to apply after commit
  int applied = 0;                  // updates that applied
};

// For each update that applied: appends its ledger entry; a task queued
// again becomes visible now, keeping its place in line (effect-mq's rule),
// and wakes its queue; an ended one has its message archived and a kFailed
// report appended.
inline absl::StatusOr<TakenBack> WriteTakenBack(
    Transaction& tx, std::span<const TaskUpdate> updates,
    const std::vector<bool>& applied, std::vector<AttemptRecord>& entries,
    absl::Time now, TransactionEffects& effects) {
  absl::flat_hash_map<std::string, std::vector<VisibilityUpdate>> requeued;
  absl::flat_hash_map<std::string, std::vector<int64_t>> archives;
  std::vector<AttemptRecord> attempts;
  std::vector<OutboxReport> reports;
  TakenBack result;
  for (size_t u = 0; u < updates.size(); ++u) {
    if (!applied[u]) continue;
    ++result.applied;
    const TaskRecord& t = updates[u].task;
    attempts.push_back(std::move(entries[u]));
    if (t.status == TaskStatus::kQueued) {
      requeued[t.queue_name].push_back({t.message_id, now});
      effects.queues_to_wake.insert(t.queue_name);
    } else {
      archives[t.queue_name].push_back(t.message_id);
      reports.push_back(OutboxReport{.task = t.key,
                                     .flow_slug = t.flow_slug,
                                     .kind = ReportKind::kFailed,
                                     .created_at = now});
    }
  }
  for (auto& [queue, v] : requeued) {
    SLUICE_RETURN_IF_ERROR(tx.SetVisibility(queue, v));
  }
  for (auto& [queue, ids] : archives) {
    SLUICE_RETURN_IF_ERROR(tx.ArchiveMessages(queue, ids, now));
  }
  if (!attempts.empty()) SLUICE_RETURN_IF_ERROR(tx.AppendAttempts(attempts));
  if (!reports.empty()) {
    SLUICE_ASSIGN_OR_RETURN(result.report_ids, tx.AppendReports(reports));
  }
  return result;
}

}  // namespace sluice

#endif  // SLUICE_ENGINE_TAKEN_BACK_H_
