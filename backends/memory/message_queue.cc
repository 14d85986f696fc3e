#include "message_queue.h"

#include <algorithm>

#include "absl/base/macros.h"
#include "stored_copy.h"

namespace sluice::memory {

void MessageQueue::SetPaused(bool paused, UndoLog& undo) {
  undo.Add(undo::QueuePausedSet{.queue = this, .was_paused = record_.paused});
  record_.paused = paused;
}

std::vector<int64_t> MessageQueue::Send(std::span<OutgoingMessage> messages,
                                        absl::Time now, UndoLog& undo) {
  std::vector<int64_t> ids;
  if (messages.empty()) return ids;
  ids.reserve(messages.size());
  // A message visible at once then goes straight to the visible set, not
  // through the hidden one at the next read. Only forward: the engine takes
  // a read's `now` inside its transaction, after that of any send committed
  // before (SQLite's ready messages rely on the same, decision 0080), so
  // this sends no read back over the visible set.
  if (now > horizon_) MoveHorizon(now);
  undo.Add(undo::MessagesSent{.queue = this, .first_id = next_id_});
  by_id_.reserve(by_id_.size() + messages.size());
  for (OutgoingMessage& message : messages) {
    const int64_t id = next_id_++;
    QueuedMessage& queued = rows_.AddMade([&] {
      return QueuedMessage{.id = id,
                           .read_count = 0,
                           .priority = message.priority,
                           .enqueued_at = now,
                           .visible_at = message.visible_at,
                           .seq = next_seq_++,
                           .body = Stored(std::move(message.body)),
                           .task_body = std::move(message.task)};
    });
    by_id_.try_emplace(id, &queued);
    Link(queued);
    ids.push_back(id);
  }
  return ids;
}

std::vector<MessageRecord> MessageQueue::Read(absl::Time now, int limit,
                                              absl::Time visible_until,
                                              Fields fields, UndoLog& undo) {
  std::vector<MessageRecord> taken;
  if (limit <= 0 || record_.paused) return taken;
  MoveHorizon(now);
  // Counted first so the records are allocated once: growing the vector
  // one doubling at a time cost more than the read itself.
  size_t count = 0;
  for (auto c = visible_.begin();
       c != visible_.end() && count < static_cast<size_t>(limit); ++c) {
    ++count;
  }
  taken.reserve(count);
  // A message read with visible_until <= now stays visible, so walk the
  // claim order rather than popping the front.
  auto it = visible_.begin();
  while (it != visible_.end() && taken.size() < static_cast<size_t>(limit)) {
    QueuedMessage& message = *it;
    undo.Add(undo::MessageVisibilityChanged{.queue = this,
                                            .message_id = message.id,
                                            .visible_at = message.visible_at,
                                            .read_count = message.read_count});
    message.read_count += 1;
    message.visible_at = visible_until;
    if (visible_until > horizon_) {
      it = visible_.erase(it);
      // Leases end later than any hidden message's time, as a rule.
      hidden_.insert(hidden_.end(), message);
    } else {
      ++it;
    }
    taken.push_back(ToRecord(message, fields));
  }
  return taken;
}

void MessageQueue::SetVisibility(std::span<const VisibilityUpdate> updates,
                                 UndoLog& undo) {
  for (const VisibilityUpdate& update : updates) {
    QueuedMessage* message = LiveMessage(update.message_id);
    if (message == nullptr) continue;
    undo.Add(undo::MessageVisibilityChanged{.queue = this,
                                            .message_id = update.message_id,
                                            .visible_at = message->visible_at,
                                            .read_count = message->read_count});
    Reschedule(*message, update.visible_at);
    if (update.to_tail) {
      undo.Add(undo::MessageMovedToTail{
          .queue = this, .message_id = update.message_id, .seq = message->seq});
      Resequence(*message, next_seq_++);
    }
  }
}

std::optional<absl::Time> MessageQueue::NextVisibleAt(absl::Time now) {
  // Moving the horizon changes no message, only which index holds it; after
  // it, hidden_ holds exactly the messages visible after `now`.
  MoveHorizon(now);
  if (hidden_.empty()) return std::nullopt;
  return hidden_.begin()->visible_at;
}

void MessageQueue::Archive(std::span<const int64_t> message_ids, absl::Time now,
                           UndoLog& undo) {
  for (const int64_t id : message_ids) {
    QueuedMessage* message = LiveMessage(id);
    if (message == nullptr) continue;
    Unlink(*message);
    message->archived_at = now;
    undo.Add(undo::MessageArchived{.queue = this, .message_id = id});
  }
}

void MessageQueue::DeleteLive(std::span<const int64_t> message_ids,
                              UndoLog& undo) {
  for (const int64_t id : message_ids) {
    auto it = FindLive(id);
    if (it != by_id_.end()) Erase(it, undo);
  }
}

std::optional<MessageLocation> MessageQueue::Lookup(int64_t message_id) const {
  auto it = by_id_.find(message_id);
  if (it == by_id_.end()) return std::nullopt;
  const QueuedMessage& message = *it->second;
  return MessageLocation{.archived = message.archived_at.has_value(),
                         .archived_at = message.archived_at,
                         .message = ToRecord(message, Fields::kAll)};
}

void MessageQueue::Delete(int64_t message_id, UndoLog& undo) {
  auto it = by_id_.find(message_id);
  if (it != by_id_.end()) Erase(it, undo);
}

void MessageQueue::Erase(ById::const_iterator it, UndoLog& undo) {
  QueuedMessage& row = *it->second;
  Unlink(row);  // a no-op for an archived row
  by_id_.erase(it);
  undo.AddDetached(undo::MessageDeleted{.queue = this, .row = &row});
}

void MessageQueue::UndoSend(int64_t first_id) {
  for (int64_t id = first_id; id < next_id_; ++id) {
    auto it = by_id_.find(id);
    QueuedMessage& row = *it->second;
    by_id_.erase(it);
    rows_.Erase(row);  // its hook unlinks it from its index
  }
  // Every later change was reverted first, so the send's sequence numbers
  // are the counter's latest, one per message.
  next_seq_ -= next_id_ - first_id;
  next_id_ = first_id;
}

void MessageQueue::UndoVisibilityChange(int64_t message_id,
                                        absl::Time visible_at, int read_count) {
  QueuedMessage& message = *by_id_.find(message_id)->second;
  message.read_count = read_count;
  Reschedule(message, visible_at);
}

void MessageQueue::UndoMoveToTail(int64_t message_id, int64_t seq) {
  Resequence(*by_id_.find(message_id)->second, seq);
  --next_seq_;  // the move took the counter's latest
}

void MessageQueue::UndoArchive(int64_t message_id) {
  QueuedMessage& message = *by_id_.find(message_id)->second;
  message.archived_at.reset();
  Link(message);
}

void MessageQueue::UndoDelete(QueuedMessage& row) {
  by_id_.try_emplace(row.id, &row);
  if (!row.archived_at.has_value()) Link(row);
}

MessageRecord MessageQueue::ToRecord(const QueuedMessage& message,
                                     Fields fields) {
  MessageRecord record{.message_id = message.id,
                       .read_count = message.read_count,
                       .enqueued_at = message.enqueued_at,
                       .visible_at = message.visible_at,
                       .priority = message.priority};
  if (fields == Fields::kAll) {
    record.body = message.task_body.has_value() ? message.task_body->ToJson()
                                                : message.body;
  }
  return record;
}

void MessageQueue::Link(QueuedMessage& message) {
  if (message.visible_at <= horizon_) {
    // A new message usually goes last in claim order.
    visible_.insert(visible_.end(), message);
  } else {
    hidden_.insert(message);
  }
}

void MessageQueue::MoveHorizon(absl::Time now) {
  if (now < horizon_) {
    // Time went back: hide again what is not visible at `now`.
    for (auto it = visible_.begin(); it != visible_.end();) {
      QueuedMessage& message = *it;
      if (message.visible_at > now) {
        it = visible_.erase(it);
        hidden_.insert(message);
      } else {
        ++it;
      }
    }
  } else {
    while (!hidden_.empty() && hidden_.begin()->visible_at <= now) {
      QueuedMessage& message = *hidden_.begin();
      hidden_.erase(hidden_.begin());
      visible_.insert(message);
    }
  }
  horizon_ = now;
}

void MessageQueue::Reschedule(QueuedMessage& message, absl::Time visible_at) {
  if (message.visible_at <= horizon_ && visible_at <= horizon_) {
    message.visible_at = visible_at;  // keeps its place in claim order
    return;
  }
  Unlink(message);
  message.visible_at = visible_at;
  Link(message);
}

void MessageQueue::Resequence(QueuedMessage& message, int64_t seq) {
  if (message.visible_at > horizon_) {
    message.seq = seq;  // hidden_ is keyed by time, not seq
    return;
  }
  Unlink(message);
  message.seq = seq;
  Link(message);
}

}  // namespace sluice::memory
