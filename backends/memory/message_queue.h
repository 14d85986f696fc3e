// One physical queue of the memory backend, with pgmq's semantics: per-queue
// increasing message ids, reads that take visible messages in claim order
// (priority desc, then a FIFO sequence number) and hide them until a given
// time, and an archive. The queue's registry entry (QueueRecord) lives here
// too, paused flag included.
#ifndef SLUICE_BACKENDS_MEMORY_MESSAGE_QUEUE_H_
#define SLUICE_BACKENDS_MEMORY_MESSAGE_QUEUE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "boost/intrusive/set.hpp"
#include "row_arena.h"
#include "rows.h"
#include "sluice/backend.h"
#include "sluice/records.h"
#include "undo_log.h"

namespace sluice::memory {

// Every message, live or archived, is one row in an arena (stable address,
// slot reused after deletion) found by id through one hash index. Live
// messages are split by a horizon, the latest `now` a read or a send
// brought: those visible at the horizon sit in an intrusive set ordered by
// claim order, (priority desc, seq asc), the others in an intrusive
// (visible_at, id)-ordered set; an archived row is in neither. The sets link
// the rows themselves (QueuedMessage::order_hook), so sending, reading,
// rescheduling and archiving a message allocate nothing once the arena and
// the hash index have grown to the queue's working size. A read at `now`
// first moves the horizon to `now` (promoting the messages that have become
// visible since), then takes the first in claim order; a send moves it
// forward to its `now` too, so a message visible at once is linked into the
// visible set directly. Each message costs O(log n) per change however deep
// the queue is, and a read never looks at a message that is still hidden.
// Only a call whose `now` is earlier than the horizon scans the visible set
// (to hide again what is not visible yet). The engine's reads take their
// `now` inside their transaction, after that of any send before them; only
// an empty claim's later look for the next visible time can bring an
// earlier one, when another claim came between.
//
// Sequence numbers come from a per-queue counter: a send takes one per
// message, a move to the tail takes the next one. A rollback gives them back
// (undoing newest first leaves the counter where the change found it).
//
// Every change records its undo in the given UndoLog. Not thread-safe: the
// store's lock guards it.
class MessageQueue {
 public:
  explicit MessageQueue(QueueRecord record) : record_(std::move(record)) {}
  MessageQueue(const MessageQueue&) = delete;
  MessageQueue& operator=(const MessageQueue&) = delete;

  const QueueRecord& record() const { return record_; }
  // Sets the registry entry's paused flag.
  void SetPaused(bool paused, UndoLog& undo);

  // Appends `messages` in order with enqueued_at = now and increasing
  // sequence numbers, moving their bodies; returns their ids.
  std::vector<int64_t> Send(std::span<OutgoingMessage> messages, absl::Time now,
                            UndoLog& undo);
  // Takes up to `limit` messages with visible_at <= now in claim order; sets
  // each one's visible_at to `visible_until` and adds 1 to its read_count.
  // None while paused. Bodies are left empty with kNoPayloads.
  std::vector<MessageRecord> Read(absl::Time now, int limit,
                                  absl::Time visible_until, Fields fields,
                                  UndoLog& undo);
  // Sets visible_at of the live messages named (and with to_tail, a new
  // sequence number, after every other); skips other ids.
  void SetVisibility(std::span<const VisibilityUpdate> updates, UndoLog& undo);
  // The earliest visible_at after `now` among live messages, if any.
  std::optional<absl::Time> NextVisibleAt(absl::Time now);
  // Moves the live messages named to the archive; skips other ids.
  void Archive(std::span<const int64_t> message_ids, absl::Time now,
               UndoLog& undo);
  // Deletes the live messages named (pgmq's delete); skips other ids.
  void DeleteLive(std::span<const int64_t> message_ids, UndoLog& undo);
  std::optional<MessageLocation> Lookup(int64_t message_id) const;
  // Calls visit(id, visible_at) for every live message, in no particular
  // order: archived ones cost nothing.
  template <typename Visit>
  void ForEachLive(Visit visit) const {
    for (const QueuedMessage& m : visible_) visit(m.id, m.visible_at);
    for (const QueuedMessage& m : hidden_) visit(m.id, m.visible_at);
  }
  // The visible_at of a live message; nullopt if the id is not live.
  std::optional<absl::Time> VisibleAtOf(int64_t message_id) const {
    const QueuedMessage* message = LiveMessage(message_id);
    if (message == nullptr) return std::nullopt;
    return message->visible_at;
  }
  // Deletes a message, live or archived; skips an id that is neither. The
  // row is detached (undo_log.h).
  void Delete(int64_t message_id, UndoLog& undo);
  // Frees a row Delete detached (on commit).
  void FreeDetached(QueuedMessage& row) { rows_.Erase(row); }

  // Reverts, newest change first. Each REQUIRES the queue to be as the
  // change left it.
  void UndoSend(int64_t first_id);
  void UndoVisibilityChange(int64_t message_id, absl::Time visible_at,
                            int read_count);
  void UndoMoveToTail(int64_t message_id, int64_t seq);
  void UndoSetPaused(bool was_paused) { record_.paused = was_paused; }
  void UndoArchive(int64_t message_id);
  void UndoDelete(QueuedMessage& row);

 private:
  // A visible message's place in claim order. Sequence numbers are unique
  // within a queue; the id only makes the key whole.
  struct ClaimOrder {
    bool operator()(const QueuedMessage& a, const QueuedMessage& b) const {
      if (a.priority != b.priority) return a.priority > b.priority;
      if (a.seq != b.seq) return a.seq < b.seq;
      return a.id < b.id;
    }
  };
  struct VisibilityOrder {
    bool operator()(const QueuedMessage& a, const QueuedMessage& b) const {
      if (a.visible_at != b.visible_at) return a.visible_at < b.visible_at;
      return a.id < b.id;
    }
  };
  template <typename Order>
  using Index = boost::intrusive::set<
      QueuedMessage,
      boost::intrusive::member_hook<QueuedMessage, QueuedMessage::OrderHook,
                                    &QueuedMessage::order_hook>,
      boost::intrusive::compare<Order>,
      // Auto-unlink hooks need a size that is not cached.
      boost::intrusive::constant_time_size<false>>;

  using ById = absl::flat_hash_map<int64_t, QueuedMessage*>;

  static MessageRecord ToRecord(const QueuedMessage& message, Fields fields);
  // The index entry of a live message; end() if the id is not live.
  ById::const_iterator FindLive(int64_t message_id) const {
    auto it = by_id_.find(message_id);
    if (it != by_id_.end() && it->second->archived_at.has_value()) {
      return by_id_.end();
    }
    return it;
  }
  QueuedMessage* LiveMessage(int64_t message_id) const {
    auto it = FindLive(message_id);
    return it == by_id_.end() ? nullptr : it->second;
  }
  // Deletes the message `it` names, live or archived (Delete, DeleteLive).
  void Erase(ById::const_iterator it, UndoLog& undo);
  // Links a live message into the index its visible_at belongs in, or
  // unlinks it. REQUIRES for Link: its fields are final and it is unlinked.
  void Link(QueuedMessage& message);
  static void Unlink(QueuedMessage& message) { message.order_hook.unlink(); }
  void MoveHorizon(absl::Time now);
  // Changes a live message's visible_at, keeping the indexes in step.
  void Reschedule(QueuedMessage& message, absl::Time visible_at);
  // Changes a live message's sequence number, keeping the indexes in step.
  void Resequence(QueuedMessage& message, int64_t seq);

  QueueRecord record_;
  int64_t next_id_ = 1;
  int64_t next_seq_ = 1;
  // Declared before the indexes, so they are emptied before rows go.
  RowArena<QueuedMessage> rows_;
  ById by_id_;  // live and archived
  // Invariant: visible_ holds exactly the live messages with visible_at <=
  // horizon_, hidden_ the others.
  absl::Time horizon_ = absl::InfinitePast();
  Index<ClaimOrder> visible_;
  Index<VisibilityOrder> hidden_;
};

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_MESSAGE_QUEUE_H_
