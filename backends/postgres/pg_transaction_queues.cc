// PostgresTransaction's forwarders for fan-out children, messages, workers,
// host writes and schedules (pg_transaction.cc has the rest).
#include <utility>

#include "pg_transaction.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {

// --- Fan-out children ------------------------------------------------------

absl::Status PostgresTransaction::InsertChildLinks(
    std::span<ChildLinkRecord> links) {
  return Guarded([&] { return tables_.InsertChildLinks(links); });
}

absl::StatusOr<std::vector<ChildLinkRecord>> PostgresTransaction::GetChildLinks(
    const TaskKey& parent, Fields fields) {
  return Guarded([&] { return tables_.GetChildLinks(parent, fields); });
}

absl::StatusOr<ChildCounts> PostgresTransaction::CountChildLinks(
    const TaskKey& parent, int64_t up_to) {
  return Guarded([&] { return tables_.CountChildLinks(parent, up_to); });
}

absl::StatusOr<std::vector<bool>> PostgresTransaction::SettleChildLinks(
    std::span<ChildSettlement> settlements) {
  return Guarded([&] { return tables_.SettleChildLinks(settlements); });
}

absl::StatusOr<int64_t> PostgresTransaction::CancelPendingChildLinks(
    const TaskKey& parent, std::string_view error) {
  return Guarded(
      [&] { return tables_.CancelPendingChildLinks(parent, error); });
}

absl::StatusOr<std::vector<ChildLinkRecord>>
PostgresTransaction::TakeStaleChildLinks(absl::Time pending_before,
                                         absl::Time now, int limit) {
  return Guarded(
      [&] { return tables_.TakeStaleChildLinks(pending_before, now, limit); });
}

absl::StatusOr<std::vector<ChildLinkRecord>>
PostgresTransaction::FindUncascadedChildLinks(int limit) {
  return Guarded([&] { return tables_.FindUncascadedChildLinks(limit); });
}

absl::Status PostgresTransaction::MarkChildLinksCascaded(
    std::span<const ChildLinkRecord> links) {
  return Guarded([&] { return tables_.MarkChildLinksCascaded(links); });
}

absl::StatusOr<std::vector<int64_t>> PostgresTransaction::AppendChildReports(
    std::span<const ChildReport> reports) {
  return Guarded([&] { return tables_.AppendChildReports(reports); });
}

absl::StatusOr<std::vector<ChildReport>> PostgresTransaction::PeekChildReports(
    int64_t after_id, int limit) {
  return Guarded([&] { return tables_.PeekChildReports(after_id, limit); });
}

absl::Status PostgresTransaction::DeleteChildReports(
    std::span<const int64_t> report_ids) {
  return Guarded([&] { return tables_.DeleteChildReports(report_ids); });
}

absl::StatusOr<int64_t> PostgresTransaction::CountChildReports() {
  return Guarded([&] { return tables_.CountChildReports(); });
}

absl::StatusOr<std::vector<int64_t>> PostgresTransaction::SendMessages(
    std::string_view queue, std::span<OutgoingMessage> messages,
    absl::Time now) {
  return Guarded([&] { return tables_.SendMessages(queue, messages, now); });
}

absl::Status PostgresTransaction::SendMessagesAndInsertTasks(
    std::string_view queue, std::span<OutgoingMessage> messages,
    std::span<TaskRecord> tasks, absl::Time now) {
  return Guarded([&] {
    return tables_.SendMessagesAndInsertTasks(queue, messages, tasks, now);
  });
}

absl::StatusOr<internal::MessagesWithTasks>
PostgresTransaction::ReadMessagesWithTasks(std::string_view queue,
                                           absl::Time now, int limit,
                                           absl::Time visible_until,
                                           Fields task_fields) {
  return Guarded([&] {
    return tables_.ReadMessagesWithTasks(queue, now, limit, visible_until,
                                         task_fields);
  });
}

absl::StatusOr<std::optional<internal::RunWithParts>>
PostgresTransaction::ReadRunWithParts(const RunId& run_id) {
  return Guarded([&] { return tables_.ReadRunWithParts(run_id); });
}

absl::StatusOr<internal::OneTripFinishes::Updated>
PostgresTransaction::UpdateTasksThenReadRuns(std::span<TaskUpdate> updates,
                                             std::span<const RunId> run_ids,
                                             LockMode lock, Fields fields) {
  return Guarded([&]() -> absl::StatusOr<Updated> {
    Updated updated;
    SLUICE_ASSIGN_OR_RETURN(
        updated.applied, tables_.UpdateTasksThenReadRuns(updates, run_ids, lock,
                                                         fields, updated.runs));
    return updated;
  });
}

absl::StatusOr<internal::RunsWithSteps> PostgresTransaction::ReadRunsWithSteps(
    std::span<const RunId> run_ids, LockMode lock, Fields fields) {
  return Guarded(
      [&] { return tables_.ReadRunsWithSteps(run_ids, lock, fields); });
}

absl::StatusOr<std::vector<MessageRecord>> PostgresTransaction::ReadMessages(
    std::string_view queue, absl::Time now, int limit, absl::Time visible_until,
    Fields fields) {
  return Guarded([&] {
    return tables_.ReadMessages(queue, now, limit, visible_until, fields);
  });
}

absl::Status PostgresTransaction::SetVisibility(
    std::string_view queue, std::span<const VisibilityUpdate> updates) {
  return Guarded([&] { return tables_.SetVisibility(queue, updates); });
}

absl::StatusOr<std::optional<absl::Time>> PostgresTransaction::NextVisibleAt(
    std::string_view queue, absl::Time now) {
  return Guarded([&] { return tables_.NextVisibleAt(queue, now); });
}

absl::Status PostgresTransaction::ArchiveMessages(
    std::string_view queue, std::span<const int64_t> message_ids,
    absl::Time now) {
  return Guarded(
      [&] { return tables_.ArchiveMessages(queue, message_ids, now); });
}

absl::Status PostgresTransaction::DeleteMessages(
    std::string_view queue, std::span<const int64_t> message_ids) {
  return Guarded([&] { return tables_.DeleteMessages(queue, message_ids); });
}

absl::StatusOr<std::optional<MessageLocation>>
PostgresTransaction::LookupMessage(std::string_view queue, int64_t message_id) {
  return Guarded([&] { return tables_.LookupMessage(queue, message_id); });
}

absl::Status PostgresTransaction::UpsertWorker(const WorkerRecord& worker) {
  return Guarded([&] { return tables_.UpsertWorker(worker); });
}

absl::StatusOr<std::vector<WorkerRecord>> PostgresTransaction::ListWorkers() {
  return Guarded([&] { return tables_.ListWorkers(); });
}

absl::StatusOr<int> PostgresTransaction::DeleteInactiveWorkers(
    absl::Time inactive_before, int limit) {
  return Guarded(
      [&] { return tables_.DeleteInactiveWorkers(inactive_before, limit); });
}

// --- Host transactions ---

absl::Status PostgresTransaction::RunNative(const NativeWrite& write) {
  return Guarded([&]() -> absl::Status {
    // The write uses plain blocking calls, so it runs outside pipeline mode,
    // after everything queued has been checked.
    SLUICE_RETURN_IF_ERROR(connection_->ExitPipeline());
    absl::Status status =
        write(NativeConnection{"postgres", connection_->handle()});
    const PGTransactionStatusType state =
        PQtransactionStatus(connection_->handle());
    absl::Status entered = connection_->EnterPipeline();
    if (!status.ok()) return status;
    if (state == PQTRANS_INERROR) {
      return absl::AbortedError(
          "a native write left the postgres transaction aborted (a statement "
          "of it failed); the transaction rolls back");
    }
    if (state != PQTRANS_INTRANS) {
      return absl::FailedPreconditionError(
          "a native write ended the postgres transaction it ran in (COMMIT "
          "or ROLLBACK); it must leave ending it to Sluice");
    }
    return entered;
  });
}

// --- Schedules ---

absl::Status PostgresTransaction::PutSchedule(const ScheduleRecord& schedule) {
  return Guarded([&] { return tables_.PutSchedule(schedule); });
}

absl::StatusOr<std::vector<ScheduleRecord>> PostgresTransaction::ListSchedules(
    std::string_view group) {
  return Guarded([&] { return tables_.ListSchedules(group); });
}

absl::StatusOr<bool> PostgresTransaction::DeleteSchedule(
    std::string_view group, std::string_view name) {
  return Guarded([&] { return tables_.DeleteSchedule(group, name); });
}

absl::StatusOr<bool> PostgresTransaction::AdvanceScheduleCursor(
    std::string_view group, std::string_view name, absl::Time expected,
    absl::Time next) {
  return Guarded([&] {
    return tables_.AdvanceScheduleCursor(group, name, expected, next);
  });
}

}  // namespace sluice::postgres_internal
