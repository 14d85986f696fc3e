#include "memory_store.h"

#include <variant>

#include "message_queue.h"

namespace sluice::memory {
namespace {

// Reverts one entry. The entry is the newest in the log, so the saved value
// it owns (if any) is the newest on its side stack.
class Reverter {
 public:
  Reverter(MemoryStore& store, UndoLog& undo) : store_(store), undo_(undo) {}

  void operator()(const undo::FlowInserted& e) {
    store_.catalog.UndoInsertFlow(e.slug);
  }
  void operator()(const undo::FlowChanged&) {
    store_.catalog.UndoChangeFlow(undo_.TakeSaved<SavedFlow>());
  }
  void operator()(const undo::ScheduleChanged&) {
    store_.schedules.Undo(undo_.TakeSaved<SavedSchedule>());
  }
  void operator()(const undo::AliasChanged&) {
    store_.catalog.UndoPutAlias(undo_.TakeSaved<SavedAlias>());
  }
  void operator()(const undo::QueueCreated& e) {
    store_.catalog.UndoCreateQueue(e.name);
  }
  void operator()(const undo::QueueDeleted& e) {
    store_.catalog.UndoDeleteQueue(e.queue);
  }
  void operator()(const undo::QueuePausedSet& e) {
    e.queue->UndoSetPaused(e.was_paused);
  }
  void operator()(const undo::WorkerUpserted&) {
    store_.catalog.UndoUpsertWorker(undo_.TakeSaved<SavedWorker>());
  }
  void operator()(const undo::RunInserted& e) {
    store_.runs.UndoInsertRun(e.run_id);
  }
  void operator()(const undo::RunUpdated& e) {
    store_.runs.UndoUpdateRun(e.run_id, undo_.TakeSaved<SavedRunFields>());
  }
  void operator()(const undo::RunRemainingStepsAdded& e) {
    store_.runs.UndoAddRemainingSteps(e.run_id, e.old_value);
  }
  void operator()(const undo::RunDeleted& e) {
    store_.runs.UndoDeleteRun(*e.entry);
  }
  void operator()(const undo::StepStateInserted& e) {
    store_.runs.UndoInsertStepState(e.run_id, e.step_index);
  }
  void operator()(const undo::StepStateUpdated& e) {
    store_.runs.UndoUpdateStepState(e.run_id, e.step_index,
                                    undo_.TakeSaved<SavedStepFields>());
  }
  void operator()(const undo::StepCountersAdded& e) {
    store_.runs.UndoAddStepCounters(e);
  }
  void operator()(const undo::TaskInserted& e) {
    store_.tasks.UndoInsert(e.key);
  }
  void operator()(const undo::TaskUpdated& e) {
    store_.tasks.UndoUpdate(e.key, undo_.TakeSaved<SavedTaskFields>());
  }
  void operator()(const undo::TaskDeleted& e) {
    store_.tasks.UndoDelete(*e.row);
  }
  void operator()(const undo::MessagesSent& e) {
    e.queue->UndoSend(e.first_id);
  }
  void operator()(const undo::MessageVisibilityChanged& e) {
    e.queue->UndoVisibilityChange(e.message_id, e.visible_at, e.read_count);
  }
  void operator()(const undo::MessageMovedToTail& e) {
    e.queue->UndoMoveToTail(e.message_id, e.seq);
  }
  void operator()(const undo::MessageArchived& e) {
    e.queue->UndoArchive(e.message_id);
  }
  void operator()(const undo::MessageDeleted& e) {
    e.queue->UndoDelete(*e.row);
  }
  void operator()(const undo::ReportsAppended& e) {
    store_.outbox.UndoAppend(e.first_id);
  }
  void operator()(const undo::ReportTaken&) {
    store_.outbox.UndoTake(undo_.TakeSaved<OutboxReport>());
  }
  void operator()(const undo::AttemptAppended& e) {
    store_.runs.UndoAppendAttempt(e.task, e.attempt);
  }
  void operator()(const undo::DedupeChanged&) {
    store_.dedupe.Undo(undo_.TakeSaved<SavedDedupe>());
  }
  void operator()(const undo::ChildLinkChanged&) {
    store_.children.UndoLinkChange(undo_.TakeSaved<SavedChildLink>());
  }
  void operator()(const undo::ChildReportsAppended& e) {
    store_.children.UndoAppendReports(e.first_id);
  }
  void operator()(const undo::ChildReportDeleted&) {
    store_.children.UndoDeleteReport(undo_.TakeSaved<ChildReport>());
  }

 private:
  MemoryStore& store_;
  UndoLog& undo_;
};

// Frees the rows deletions detached; ignores every other entry.
class DetachedRowFreer {
 public:
  explicit DetachedRowFreer(MemoryStore& store) : store_(store) {}

  void operator()(const undo::RunDeleted& e) {
    store_.runs.FreeDetached(*e.entry);
  }
  void operator()(const undo::TaskDeleted& e) {
    store_.tasks.FreeDetached(*e.row);
  }
  void operator()(const undo::MessageDeleted& e) {
    e.queue->FreeDetached(*e.row);
  }
  void operator()(const undo::QueueDeleted& e) {
    // Entries after it cannot point at the queue (it was not findable), but
    // entries before it can: they run before this one, oldest first.
    store_.catalog.FreeDetachedQueue(e.queue);
  }
  template <typename Entry>
  void operator()(const Entry&) {}

 private:
  MemoryStore& store_;
};

}  // namespace

void CommitChanges(MemoryStore& store, UndoLog& undo) {
  if (undo.detached_rows() > 0) {
    DetachedRowFreer free_row(store);
    for (const UndoEntry& entry : undo.entries()) std::visit(free_row, entry);
  }
  undo.Clear();
}

void RollBack(MemoryStore& store, UndoLog& undo) {
  Reverter revert(store, undo);
  while (!undo.empty()) {
    std::visit(revert, undo.newest());
    undo.PopNewest();
  }
  undo.Clear();
}

}  // namespace sluice::memory
