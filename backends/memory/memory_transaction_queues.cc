// MemoryTransaction: the attempts ledger, dedupe registry, outbox, queues,
// workers and schedules (memory_transaction.cc has the rest).
#include <utility>

#include "memory_transaction.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::memory {

// --- Attempts ledger --------------------------------------------------------

absl::Status MemoryTransaction::AppendAttempts(
    std::span<const AttemptRecord> attempts) {
  return Apply([&] { return store().runs.AppendAttempts(attempts, undo()); });
}

absl::StatusOr<std::vector<AttemptRecord>> MemoryTransaction::ListAttempts(
    const RunId& run_id) {
  return Apply([&]() -> absl::StatusOr<std::vector<AttemptRecord>> {
    return store().runs.ListAttempts(run_id);
  });
}

// --- Dedupe registry --------------------------------------------------------

absl::StatusOr<std::optional<DedupeRecord>> MemoryTransaction::GetDedupe(
    std::string_view flow_slug, std::string_view key) {
  // No lock to take: this transaction already excludes every other.
  return Apply([&]() -> absl::StatusOr<std::optional<DedupeRecord>> {
    const DedupeRecord* entry = store().dedupe.Find(flow_slug, key);
    if (entry == nullptr) return std::nullopt;
    return *entry;
  });
}

absl::Status MemoryTransaction::PutDedupe(const DedupeRecord& entry) {
  return Apply([&] {
    store().dedupe.Put(entry, undo());
    return absl::OkStatus();
  });
}

absl::StatusOr<bool> MemoryTransaction::DeleteDedupe(std::string_view flow_slug,
                                                     std::string_view key,
                                                     const RunId& run_id) {
  return Apply([&]() -> absl::StatusOr<bool> {
    return store().dedupe.Delete(flow_slug, key, run_id, undo());
  });
}

absl::StatusOr<int> MemoryTransaction::DeleteExpiredDedupe(absl::Time now,
                                                           int limit) {
  return Apply([&]() -> absl::StatusOr<int> {
    return store().dedupe.DeleteExpired(now, limit, undo());
  });
}

// --- Outbox -----------------------------------------------------------------

absl::StatusOr<std::vector<int64_t>> MemoryTransaction::AppendReports(
    std::span<const OutboxReport> reports) {
  return Apply([&]() -> absl::StatusOr<std::vector<int64_t>> {
    return store().outbox.Append(reports, undo());
  });
}

absl::StatusOr<std::vector<OutboxReport>> MemoryTransaction::TakeReports(
    std::span<const int64_t> report_ids) {
  return Apply([&]() -> absl::StatusOr<std::vector<OutboxReport>> {
    return store().outbox.Take(report_ids, undo());
  });
}

absl::StatusOr<std::vector<OutboxReport>> MemoryTransaction::TakeStaleReports(
    absl::Time created_before, int limit) {
  return Apply([&]() -> absl::StatusOr<std::vector<OutboxReport>> {
    return store().outbox.TakeStale(created_before, limit, undo());
  });
}

absl::StatusOr<int64_t> MemoryTransaction::CountReports() {
  return Apply(
      [&]() -> absl::StatusOr<int64_t> { return store().outbox.size(); });
}

// --- Queues -----------------------------------------------------------------

absl::StatusOr<std::vector<int64_t>> MemoryTransaction::SendMessages(
    std::string_view queue, std::span<OutgoingMessage> messages,
    absl::Time now) {
  return Apply([&]() -> absl::StatusOr<std::vector<int64_t>> {
    absl::StatusOr<MessageQueue*> found = FindQueue(queue);
    if (!found.ok()) return found.status();
    return (*found)->Send(messages, now, undo());
  });
}

absl::StatusOr<std::vector<MessageRecord>> MemoryTransaction::ReadMessages(
    std::string_view queue, absl::Time now, int limit, absl::Time visible_until,
    Fields fields) {
  return Apply([&]() -> absl::StatusOr<std::vector<MessageRecord>> {
    absl::StatusOr<MessageQueue*> found = FindQueue(queue);
    if (!found.ok()) return found.status();
    return (*found)->Read(now, limit, visible_until, fields, undo());
  });
}

absl::StatusOr<std::optional<absl::Time>> MemoryTransaction::NextVisibleAt(
    std::string_view queue, absl::Time now) {
  return Apply([&]() -> absl::StatusOr<std::optional<absl::Time>> {
    absl::StatusOr<MessageQueue*> found = FindQueue(queue);
    if (!found.ok()) return found.status();
    return (*found)->NextVisibleAt(now);
  });
}

absl::Status MemoryTransaction::SetVisibility(
    std::string_view queue, std::span<const VisibilityUpdate> updates) {
  return Apply([&]() -> absl::Status {
    absl::StatusOr<MessageQueue*> found = FindQueue(queue);
    if (!found.ok()) return found.status();
    (*found)->SetVisibility(updates, undo());
    return absl::OkStatus();
  });
}

absl::Status MemoryTransaction::ArchiveMessages(
    std::string_view queue, std::span<const int64_t> message_ids,
    absl::Time now) {
  return Apply([&]() -> absl::Status {
    absl::StatusOr<MessageQueue*> found = FindQueue(queue);
    if (!found.ok()) return found.status();
    (*found)->Archive(message_ids, now, undo());
    return absl::OkStatus();
  });
}

absl::Status MemoryTransaction::DeleteMessages(
    std::string_view queue, std::span<const int64_t> message_ids) {
  return Apply([&]() -> absl::Status {
    absl::StatusOr<MessageQueue*> found = FindQueue(queue);
    if (!found.ok()) return found.status();
    (*found)->DeleteLive(message_ids, undo());
    return absl::OkStatus();
  });
}

absl::StatusOr<std::optional<MessageLocation>> MemoryTransaction::LookupMessage(
    std::string_view queue, int64_t message_id) {
  return Apply([&]() -> absl::StatusOr<std::optional<MessageLocation>> {
    absl::StatusOr<MessageQueue*> found = FindQueue(queue);
    if (!found.ok()) return found.status();
    return (*found)->Lookup(message_id);
  });
}

// --- Workers ----------------------------------------------------------------

absl::Status MemoryTransaction::UpsertWorker(const WorkerRecord& worker) {
  return Apply([&] {
    store().catalog.UpsertWorker(worker, undo());
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<WorkerRecord>> MemoryTransaction::ListWorkers() {
  return Apply([&]() -> absl::StatusOr<std::vector<WorkerRecord>> {
    return store().catalog.ListWorkers();
  });
}

absl::StatusOr<int> MemoryTransaction::DeleteInactiveWorkers(
    absl::Time inactive_before, int limit) {
  return Apply([&]() -> absl::StatusOr<int> {
    return store().catalog.DeleteInactiveWorkers(inactive_before, limit,
                                                 undo());
  });
}

// --- Schedules --------------------------------------------------------------

absl::Status MemoryTransaction::PutSchedule(const ScheduleRecord& schedule) {
  return Apply([&] {
    store().schedules.Put(schedule, undo());
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<ScheduleRecord>> MemoryTransaction::ListSchedules(
    std::string_view group) {
  return Apply([&]() -> absl::StatusOr<std::vector<ScheduleRecord>> {
    return store().schedules.List(group);
  });
}

absl::StatusOr<bool> MemoryTransaction::DeleteSchedule(std::string_view group,
                                                       std::string_view name) {
  return Apply([&]() -> absl::StatusOr<bool> {
    return store().schedules.Delete(group, name, undo());
  });
}

absl::StatusOr<bool> MemoryTransaction::AdvanceScheduleCursor(
    std::string_view group, std::string_view name, absl::Time expected,
    absl::Time next) {
  return Apply([&]() -> absl::StatusOr<bool> {
    return store().schedules.AdvanceCursor(group, name, expected, next, undo());
  });
}

}  // namespace sluice::memory
