// MemoryTransaction's fan-out section (see child_tables.h).
#include <limits>

#include "memory_transaction.h"
#include "sluice/internal/strings.h"

namespace sluice::memory {

absl::Status MemoryTransaction::InsertChildLinks(
    std::span<ChildLinkRecord> links) {
  return Apply([&]() -> absl::Status {
    for (const ChildLinkRecord& link : links) {
      const TaskKey keys[] = {link.parent};
      if (!store().tasks.Get(keys, Fields::kNoPayloads)[0].has_value()) {
        return absl::NotFoundError(
            StrCat("parent task ", link.parent.run_id.ToString(), "/",
                   link.parent.step_index, "/", link.parent.task_index,
                   " of a child link does not exist"));
      }
    }
    return store().children.InsertLinks(links, undo());
  });
}

absl::StatusOr<std::vector<ChildLinkRecord>> MemoryTransaction::GetChildLinks(
    const TaskKey& parent, Fields fields) {
  return Apply([&]() -> absl::StatusOr<std::vector<ChildLinkRecord>> {
    return store().children.GetLinks(parent, fields);
  });
}

absl::StatusOr<ChildCounts> MemoryTransaction::CountChildLinks(
    const TaskKey& parent, int64_t up_to) {
  return Apply([&]() -> absl::StatusOr<ChildCounts> {
    return store().children.CountLinks(parent, up_to);
  });
}

absl::StatusOr<std::vector<bool>> MemoryTransaction::SettleChildLinks(
    std::span<ChildSettlement> settlements) {
  return Apply([&]() -> absl::StatusOr<std::vector<bool>> {
    return store().children.Settle(settlements, undo());
  });
}

absl::StatusOr<int64_t> MemoryTransaction::CancelPendingChildLinks(
    const TaskKey& parent, std::string_view error) {
  return Apply([&]() -> absl::StatusOr<int64_t> {
    return store().children.CancelPending(parent, error, undo());
  });
}

absl::StatusOr<std::vector<ChildLinkRecord>>
MemoryTransaction::TakeStaleChildLinks(absl::Time pending_before,
                                       absl::Time now, int limit) {
  return Apply([&]() -> absl::StatusOr<std::vector<ChildLinkRecord>> {
    return store().children.TakeStale(pending_before, now, limit, undo());
  });
}

absl::StatusOr<std::vector<ChildLinkRecord>>
MemoryTransaction::FindUncascadedChildLinks(int limit) {
  return Apply([&]() -> absl::StatusOr<std::vector<ChildLinkRecord>> {
    return store().children.FindUncascaded(limit);
  });
}

absl::Status MemoryTransaction::MarkChildLinksCascaded(
    std::span<const ChildLinkRecord> links) {
  return Apply([&]() -> absl::Status {
    store().children.MarkCascaded(links, undo());
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<int64_t>> MemoryTransaction::AppendChildReports(
    std::span<const ChildReport> reports) {
  return Apply([&]() -> absl::StatusOr<std::vector<int64_t>> {
    return store().children.AppendReports(reports, undo());
  });
}

absl::StatusOr<std::vector<ChildReport>> MemoryTransaction::PeekChildReports(
    int64_t after_id, int limit) {
  return Apply([&]() -> absl::StatusOr<std::vector<ChildReport>> {
    return store().children.PeekReports(after_id, limit);
  });
}

absl::Status MemoryTransaction::DeleteChildReports(
    std::span<const int64_t> report_ids) {
  return Apply([&]() -> absl::Status {
    store().children.DeleteReports(report_ids, undo());
    return absl::OkStatus();
  });
}

absl::StatusOr<int64_t> MemoryTransaction::CountChildReports() {
  return Apply([&]() -> absl::StatusOr<int64_t> {
    return store().children.report_count();
  });
}

}  // namespace sluice::memory
