// Queue messages, with pgmq's semantics plus priorities. Every queue shares
// the messages and archived_messages tables; a queue's id sequence is its
// registry row's last_message_id, so ids increase in send order and are
// never reused. Its FIFO sequence is last_seq: a message gets the next seq
// when sent and again when sent to the tail (a retry), and messages are
// read by (priority desc, seq asc).
#include <algorithm>
#include <utility>

#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_bound_rows.h"
#include "sqlite_rows.h"
#include "sqlite_sql.h"
#include "sqlite_status.h"
#include "sqlite_tables.h"

namespace sluice::sqlite_internal {

absl::StatusOr<std::vector<int64_t>> SqliteTables::SendMessages(
    std::string_view queue, std::span<const OutgoingMessage> messages,
    absl::Time now) {
  const int64_t count = static_cast<int64_t>(messages.size());
  int64_t last_id = 0;
  int64_t last_seq = 0;
  {
    SLUICE_ASSIGN_OR_RETURN(Statement reserve,
                            Prepare(sql::kReserveMessageIds, "SendMessages"));
    reserve.BindText(1, queue);
    reserve.BindInt(2, count);
    SLUICE_ASSIGN_OR_RETURN(bool found, reserve.Step());
    if (!found) {
      return absl::NotFoundError(
          StrCat("SendMessages: queue \"", queue, "\" does not exist"));
    }
    last_id = reserve.Int(0);
    last_seq = reserve.Int(1);
  }
  const int64_t first_id = last_id - count + 1;
  const int64_t first_seq = last_seq - count + 1;
  std::vector<int64_t> message_ids;
  message_ids.reserve(messages.size());
  for (int64_t i = 0; i < count; ++i) message_ids.push_back(first_id + i);
  SLUICE_RETURN_IF_ERROR(
      InsertInChunks(messages.size(), [&](size_t begin, size_t end) {
        BoundRows rows(5, end - begin);
        for (size_t i = begin; i < end; ++i) {
          const int64_t offset = static_cast<int64_t>(i);
          rows.AddInt(first_id + offset)
              .AddInt(first_seq + offset)
              .AddInt(messages[i].priority)
              .AddTime(messages[i].visible_at);
          rows.AddText(messages[i].BodyText());
        }
        SLUICE_ASSIGN_OR_RETURN(Statement insert,
                                Prepare(sql::kInsertMessages, "SendMessages"));
        insert.BindText(1, queue);
        insert.BindTime(2, now);
        insert.BindRows(3, rows);
        return insert.Run();
      }));
  return message_ids;
}

absl::StatusOr<std::vector<MessageRecord>> SqliteTables::ReadMessages(
    std::string_view queue, absl::Time now, int limit, absl::Time visible_until,
    Fields fields) {
  SLUICE_ASSIGN_OR_RETURN(QueueRecord registered,
                          RequireQueueRecord(queue, "ReadMessages"));
  std::vector<MessageRecord> messages;
  if (registered.paused) return messages;
  if (limit <= 0) return messages;  // SQLite reads a negative LIMIT as "all"
  std::vector<ChosenMessage> chosen;
  SLUICE_RETURN_IF_ERROR(
      Choose(sql::kChooseReady.For(fields), queue, now, limit, fields, chosen));
  SLUICE_ASSIGN_OR_RETURN(Statement probe,
                          Prepare(sql::kAnyDue, "ReadMessages"));
  probe.BindText(1, queue);
  probe.BindTime(2, now);
  SLUICE_ASSIGN_OR_RETURN(bool probed, probe.Step());
  if (probed && probe.Int(0) != 0) {
    for (const sql::ByFields& due : {sql::kChooseDelayed, sql::kChooseRead}) {
      SLUICE_RETURN_IF_ERROR(
          Choose(due.For(fields), queue, now, limit, fields, chosen));
    }
    // Each kind came in claim order; their merge keeps the first `limit`.
    std::sort(chosen.begin(), chosen.end(),
              [](const ChosenMessage& a, const ChosenMessage& b) {
                if (a.message.priority != b.message.priority) {
                  return a.message.priority > b.message.priority;
                }
                return a.seq < b.seq;
              });
    if (chosen.size() > static_cast<size_t>(limit)) chosen.resize(limit);
  }
  if (chosen.empty()) return messages;
  messages.reserve(chosen.size());
  BoundRows ids(1, chosen.size());
  for (ChosenMessage& c : chosen) {
    ids.AddInt(c.message.message_id);
    // As kHideMessages leaves it.
    ++c.message.read_count;
    c.message.visible_at = visible_until;
    messages.push_back(std::move(c.message));
  }
  SLUICE_ASSIGN_OR_RETURN(Statement hide,
                          Prepare(sql::kHideMessages, "ReadMessages"));
  hide.BindText(1, queue);
  hide.BindTime(2, visible_until);
  hide.BindRows(3, ids);
  SLUICE_RETURN_IF_ERROR(hide.Run());
  return messages;
}

absl::Status SqliteTables::Choose(std::string_view sql, std::string_view queue,
                                  absl::Time now, int limit, Fields fields,
                                  std::vector<ChosenMessage>& chosen) {
  SLUICE_ASSIGN_OR_RETURN(Statement choose, Prepare(sql, "ReadMessages"));
  choose.BindText(1, queue);
  choose.BindTime(2, now);
  choose.BindInt(3, limit);
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, choose.Step());
    if (!row) return absl::OkStatus();
    SLUICE_ASSIGN_OR_RETURN(MessageRecord message,
                            ReadMessage(choose, fields, /*first=*/1));
    chosen.push_back({.seq = choose.Int(0), .message = std::move(message)});
  }
}

absl::Status SqliteTables::SetVisibility(
    std::string_view queue, std::span<const VisibilityUpdate> updates) {
  constexpr std::string_view kOperation = "SetVisibility";
  SLUICE_RETURN_IF_ERROR(RequireQueue(queue, kOperation));
  const int64_t to_tail = std::count_if(
      updates.begin(), updates.end(),
      [](const VisibilityUpdate& change) { return change.to_tail; });
  // Seqs for the messages sent to the tail, in the order of the updates.
  int64_t next_seq = 0;
  if (to_tail > 0) {
    SLUICE_ASSIGN_OR_RETURN(int64_t last_seq,
                            ReserveSeqs(queue, to_tail, kOperation));
    next_seq = last_seq - to_tail + 1;
  }
  for (const VisibilityUpdate& change : updates) {
    SLUICE_ASSIGN_OR_RETURN(Statement update,
                            Prepare(change.to_tail ? sql::kSetVisibilityToTail
                                                   : sql::kSetVisibility,
                                    kOperation));
    update.BindText(1, queue);
    update.BindInt(2, change.message_id);
    update.BindTime(3, change.visible_at);
    if (change.to_tail) update.BindInt(4, next_seq++);
    SLUICE_RETURN_IF_ERROR(update.Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SqliteTables::ReserveSeqs(std::string_view queue,
                                                  int64_t count,
                                                  std::string_view operation) {
  SLUICE_ASSIGN_OR_RETURN(Statement reserve,
                          Prepare(sql::kReserveSeqs, operation));
  reserve.BindText(1, queue);
  reserve.BindInt(2, count);
  SLUICE_ASSIGN_OR_RETURN(bool found, reserve.Step());
  if (!found) {
    return absl::NotFoundError(
        StrCat(operation, ": queue \"", queue, "\" does not exist"));
  }
  return reserve.Int(0);
}

absl::StatusOr<std::optional<absl::Time>> SqliteTables::NextVisibleAt(
    std::string_view queue, absl::Time now) {
  SLUICE_RETURN_IF_ERROR(RequireQueue(queue, "NextVisibleAt"));
  SLUICE_ASSIGN_OR_RETURN(Statement next,
                          Prepare(sql::kNextVisibleAt, "NextVisibleAt"));
  next.BindText(1, queue);
  next.BindTime(2, now);
  SLUICE_ASSIGN_OR_RETURN(bool row, next.Step());
  if (!row) return std::nullopt;
  return next.OptionalTime(0);  // min() of no rows is NULL
}

absl::Status SqliteTables::ArchiveMessages(std::string_view queue,
                                           std::span<const int64_t> message_ids,
                                           absl::Time now) {
  return EndMessages(queue, message_ids, now, "ArchiveMessages");
}

absl::Status SqliteTables::DeleteMessages(
    std::string_view queue, std::span<const int64_t> message_ids) {
  return EndMessages(queue, message_ids, std::nullopt, "DeleteMessages");
}

absl::Status SqliteTables::EndMessages(std::string_view queue,
                                       std::span<const int64_t> message_ids,
                                       std::optional<absl::Time> archived_at,
                                       std::string_view operation) {
  SLUICE_RETURN_IF_ERROR(RequireQueue(queue, operation));
  if (message_ids.empty()) return absl::OkStatus();
  BoundRows ids(1, message_ids.size());
  for (int64_t message_id : message_ids) ids.AddInt(message_id);
  if (archived_at.has_value()) {
    SLUICE_ASSIGN_OR_RETURN(Statement copy,
                            Prepare(sql::kCopyToArchive, operation));
    copy.BindText(1, queue);
    copy.BindRows(2, ids);
    copy.BindTime(3, *archived_at);
    SLUICE_RETURN_IF_ERROR(copy.Run());
  }
  SLUICE_ASSIGN_OR_RETURN(Statement remove,
                          Prepare(sql::kDeleteMessages, operation));
  remove.BindText(1, queue);
  remove.BindRows(2, ids);
  return remove.Run();
}

absl::StatusOr<std::optional<MessageLocation>> SqliteTables::LookupMessage(
    std::string_view queue, int64_t message_id) {
  SLUICE_RETURN_IF_ERROR(RequireQueue(queue, "LookupMessage"));
  for (bool archived : {false, true}) {
    SLUICE_ASSIGN_OR_RETURN(Statement lookup,
                            Prepare(archived ? sql::kLookupArchived.view()
                                             : sql::kLookupLive.view(),
                                    "LookupMessage"));
    lookup.BindText(1, queue);
    lookup.BindInt(2, message_id);
    SLUICE_ASSIGN_OR_RETURN(bool found, lookup.Step());
    if (!found) continue;
    SLUICE_ASSIGN_OR_RETURN(MessageRecord message,
                            ReadMessage(lookup, Fields::kAll));
    return MessageLocation{archived, lookup.OptionalTime(6),
                           std::move(message)};
  }
  return std::nullopt;
}

}  // namespace sluice::sqlite_internal
