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
  undo.Add(undo::MessagesSent{.queue = this, .first_id = next_id_});
  live_.reserve(live_.size() + messages.size());
  for (OutgoingMessage& message : messages) {
    const int64_t id = next_id_++;
    const QueuedMessage& queued =
        live_
            .try_emplace(id,
                         QueuedMessage{.read_count = 0,
                                       .priority = message.priority,
                                       .enqueued_at = now,
                                       .visible_at = message.visible_at,
                                       .seq = next_seq_++,
                                       .body = Stored(std::move(message.body))})
            .first->second;
    Index(id, queued);
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
  taken.reserve(std::min<size_t>(limit, visible_.size()));
  // A message read with visible_until <= now stays visible, so walk the
  // claim order rather than popping the front.
  auto it = visible_.begin();
  while (it != visible_.end() && taken.size() < static_cast<size_t>(limit)) {
    const int64_t id = it->message_id;
    QueuedMessage& message = live_.find(id)->second;
    undo.Add(undo::MessageVisibilityChanged{.queue = this,
                                            .message_id = id,
                                            .visible_at = message.visible_at,
                                            .read_count = message.read_count});
    message.read_count += 1;
    message.visible_at = visible_until;
    if (visible_until > horizon_) {
      it = visible_.erase(it);
      hidden_.insert({visible_until, id});
    } else {
      ++it;
    }
    taken.push_back(ToRecord(id, message, fields));
  }
  return taken;
}

void MessageQueue::SetVisibility(std::span<const VisibilityUpdate> updates,
                                 UndoLog& undo) {
  for (const VisibilityUpdate& update : updates) {
    auto it = live_.find(update.message_id);
    if (it == live_.end()) continue;
    QueuedMessage& message = it->second;
    undo.Add(undo::MessageVisibilityChanged{.queue = this,
                                            .message_id = update.message_id,
                                            .visible_at = message.visible_at,
                                            .read_count = message.read_count});
    Reschedule(update.message_id, message, update.visible_at);
    if (update.to_tail) {
      undo.Add(undo::MessageMovedToTail{
          .queue = this, .message_id = update.message_id, .seq = message.seq});
      Resequence(update.message_id, message, next_seq_++);
    }
  }
}

std::optional<absl::Time> MessageQueue::NextVisibleAt(absl::Time now) {
  // Moving the horizon changes no message, only which index holds it; after
  // it, hidden_ holds exactly the messages visible after `now`.
  MoveHorizon(now);
  if (hidden_.empty()) return std::nullopt;
  return hidden_.begin()->first;
}

void MessageQueue::Archive(std::span<const int64_t> message_ids, absl::Time now,
                           UndoLog& undo) {
  for (const int64_t id : message_ids) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    Unindex(id, it->second);
    ArchivedMessage& row = archive_rows_.Add(
        ArchivedMessage{.message = std::move(it->second), .archived_at = now});
    archive_.try_emplace(id, &row);
    live_.erase(it);
    undo.Add(undo::MessageArchived{.queue = this, .message_id = id});
  }
}

std::optional<MessageLocation> MessageQueue::Lookup(int64_t message_id) const {
  if (auto it = live_.find(message_id); it != live_.end()) {
    return MessageLocation{
        .archived = false,
        .message = ToRecord(message_id, it->second, Fields::kAll)};
  }
  if (auto it = archive_.find(message_id); it != archive_.end()) {
    return MessageLocation{
        .archived = true,
        .archived_at = it->second->archived_at,
        .message = ToRecord(message_id, it->second->message, Fields::kAll)};
  }
  return std::nullopt;
}

void MessageQueue::Delete(int64_t message_id, UndoLog& undo) {
  // A deleted run has usually ended, and its messages with it: try the
  // archive first.
  if (auto it = archive_.find(message_id); it != archive_.end()) {
    undo.AddDetached(undo::ArchivedMessageDeleted{
        .queue = this, .message_id = message_id, .row = it->second});
    archive_.erase(it);
  } else if (auto it = live_.find(message_id); it != live_.end()) {
    Unindex(message_id, it->second);
    undo.Add(undo::MessageDeleted{.queue = this},
             SavedMessage{.message_id = message_id,
                          .message = std::move(it->second)});
    live_.erase(it);
  }
}

void MessageQueue::UndoSend(int64_t first_id) {
  for (int64_t id = first_id; id < next_id_; ++id) {
    auto it = live_.find(id);
    Unindex(id, it->second);
    live_.erase(it);
  }
  // Every later change was reverted first, so the send's sequence numbers
  // are the counter's latest, one per message.
  next_seq_ -= next_id_ - first_id;
  next_id_ = first_id;
}

void MessageQueue::UndoVisibilityChange(int64_t message_id,
                                        absl::Time visible_at, int read_count) {
  QueuedMessage& message = live_.find(message_id)->second;
  message.read_count = read_count;
  Reschedule(message_id, message, visible_at);
}

void MessageQueue::UndoMoveToTail(int64_t message_id, int64_t seq) {
  Resequence(message_id, live_.find(message_id)->second, seq);
  --next_seq_;  // the move took the counter's latest
}

void MessageQueue::UndoArchive(int64_t message_id) {
  auto it = archive_.find(message_id);
  ArchivedMessage& row = *it->second;
  QueuedMessage& message =
      live_.try_emplace(message_id, std::move(row.message)).first->second;
  archive_.erase(it);
  archive_rows_.Erase(row);
  Index(message_id, message);
}

void MessageQueue::UndoDelete(SavedMessage saved) {
  const int64_t id = saved.message_id;
  QueuedMessage& message =
      live_.try_emplace(id, std::move(saved.message)).first->second;
  Index(id, message);
}

void MessageQueue::UndoDeleteArchived(int64_t message_id,
                                      ArchivedMessage& row) {
  archive_.try_emplace(message_id, &row);
}

MessageRecord MessageQueue::ToRecord(int64_t message_id,
                                     const QueuedMessage& message,
                                     Fields fields) {
  MessageRecord record{.message_id = message_id,
                       .read_count = message.read_count,
                       .enqueued_at = message.enqueued_at,
                       .visible_at = message.visible_at,
                       .priority = message.priority};
  if (fields == Fields::kAll) record.body = message.body;
  return record;
}

void MessageQueue::Index(int64_t message_id, const QueuedMessage& message) {
  if (message.visible_at <= horizon_) {
    visible_.insert(ClaimKeyOf(message_id, message));
  } else {
    hidden_.insert({message.visible_at, message_id});
  }
}

void MessageQueue::Unindex(int64_t message_id, const QueuedMessage& message) {
  if (message.visible_at <= horizon_) {
    visible_.erase(ClaimKeyOf(message_id, message));
  } else {
    hidden_.erase({message.visible_at, message_id});
  }
}

void MessageQueue::MoveHorizon(absl::Time now) {
  if (now < horizon_) {
    // Time went back: hide again what is not visible at `now`.
    for (auto it = visible_.begin(); it != visible_.end();) {
      const absl::Time visible_at =
          live_.find(it->message_id)->second.visible_at;
      if (visible_at > now) {
        hidden_.insert({visible_at, it->message_id});
        it = visible_.erase(it);
      } else {
        ++it;
      }
    }
  } else {
    auto end = hidden_.begin();
    for (; end != hidden_.end() && end->first <= now; ++end) {
      visible_.insert(ClaimKeyOf(end->second, live_.find(end->second)->second));
    }
    hidden_.erase(hidden_.begin(), end);
  }
  horizon_ = now;
}

void MessageQueue::Reschedule(int64_t message_id, QueuedMessage& message,
                              absl::Time visible_at) {
  if (message.visible_at <= horizon_ && visible_at <= horizon_) {
    message.visible_at = visible_at;  // keeps its place in claim order
    return;
  }
  Unindex(message_id, message);
  message.visible_at = visible_at;
  Index(message_id, message);
}

void MessageQueue::Resequence(int64_t message_id, QueuedMessage& message,
                              int64_t seq) {
  if (message.visible_at > horizon_) {
    message.seq = seq;  // hidden_ is keyed by time, not seq
    return;
  }
  Unindex(message_id, message);
  message.seq = seq;
  Index(message_id, message);
}

}  // namespace sluice::memory
