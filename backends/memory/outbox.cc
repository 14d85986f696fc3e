#include "outbox.h"

#include <algorithm>

namespace sluice::memory {

std::vector<int64_t> Outbox::Append(std::span<const OutboxReport> reports,
                                    UndoLog& undo) {
  std::vector<int64_t> ids;
  if (reports.empty()) return ids;
  ids.reserve(reports.size());
  undo.Add(undo::ReportsAppended{.first_id = next_id_});
  reports_.reserve(reports_.size() + reports.size());
  for (const OutboxReport& report : reports) {
    const int64_t id = next_id_++;
    OutboxReport& stored = reports_.try_emplace(id, report).first->second;
    stored.report_id = id;
    by_created_.insert({stored.created_at, id});
    ids.push_back(id);
  }
  return ids;
}

std::vector<OutboxReport> Outbox::Take(std::span<const int64_t> report_ids,
                                       UndoLog& undo) {
  // Taking in id order returns the reports in id order; a repeated id finds
  // its report gone the second time.
  std::vector<int64_t> ids(report_ids.begin(), report_ids.end());
  std::sort(ids.begin(), ids.end());
  std::vector<OutboxReport> taken;
  taken.reserve(ids.size());
  for (const int64_t id : ids) {
    auto it = reports_.find(id);
    if (it == reports_.end()) continue;
    taken.push_back(it->second);
    Remove(it, undo);
  }
  return taken;
}

std::vector<OutboxReport> Outbox::TakeStale(absl::Time created_before,
                                            int limit, UndoLog& undo) {
  if (limit <= 0) return {};
  std::vector<OutboxReport> taken;
  while (!by_created_.empty() && taken.size() < static_cast<size_t>(limit)) {
    const auto [created_at, id] = *by_created_.begin();
    if (created_at >= created_before) break;
    auto it = reports_.find(id);
    taken.push_back(it->second);
    Remove(it, undo);
  }
  return taken;
}

void Outbox::DeleteReportsOf(const absl::flat_hash_set<RunId>& run_ids,
                             UndoLog& undo) {
  std::vector<int64_t> ids;
  for (const auto& [id, report] : reports_) {
    if (run_ids.contains(report.task.run_id)) ids.push_back(id);
  }
  // In id order, so a rollback's work does not depend on hash order.
  std::sort(ids.begin(), ids.end());
  for (const int64_t id : ids) Remove(reports_.find(id), undo);
}

void Outbox::UndoAppend(int64_t first_id) {
  for (int64_t id = first_id; id < next_id_; ++id) {
    auto it = reports_.find(id);
    by_created_.erase({it->second.created_at, id});
    reports_.erase(it);
  }
  next_id_ = first_id;
}

void Outbox::UndoTake(OutboxReport report) {
  const int64_t id = report.report_id;
  by_created_.insert({report.created_at, id});
  reports_.try_emplace(id, std::move(report));
}

void Outbox::Remove(absl::flat_hash_map<int64_t, OutboxReport>::iterator it,
                    UndoLog& undo) {
  by_created_.erase({it->second.created_at, it->first});
  undo.Add(undo::ReportTaken{}, std::move(it->second));
  reports_.erase(it);
}

}  // namespace sluice::memory
