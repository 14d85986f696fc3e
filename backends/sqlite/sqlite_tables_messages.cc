// Queue messages, with pgmq's semantics. Every queue shares the messages and
// archived_messages tables; a queue's id sequence is its registry row's
// last_message_id, so ids increase in send order and are never reused.
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
  int64_t last_id = 0;
  {
    SLUICE_ASSIGN_OR_RETURN(Statement reserve,
                            Prepare(sql::kReserveMessageIds, "SendMessages"));
    reserve.BindText(1, queue);
    reserve.BindInt(2, static_cast<int64_t>(messages.size()));
    SLUICE_ASSIGN_OR_RETURN(bool found, reserve.Step());
    if (!found) {
      return absl::NotFoundError(
          StrCat("SendMessages: queue \"", queue, "\" does not exist"));
    }
    last_id = reserve.Int(0);
  }
  const int64_t first_id = last_id - static_cast<int64_t>(messages.size()) + 1;
  std::vector<int64_t> message_ids;
  message_ids.reserve(messages.size());
  BoundRows rows(3, messages.size());
  for (const OutgoingMessage& message : messages) {
    message_ids.push_back(first_id + static_cast<int64_t>(message_ids.size()));
    rows.AddInt(message_ids.back()).AddTime(message.visible_at);
    AddJson(rows, message.body);
  }
  if (rows.empty()) return message_ids;
  SLUICE_ASSIGN_OR_RETURN(Statement insert,
                          Prepare(sql::kInsertMessages, "SendMessages"));
  insert.BindText(1, queue);
  insert.BindTime(2, now);
  insert.BindRows(3, rows);
  SLUICE_RETURN_IF_ERROR(insert.Run());
  return message_ids;
}

absl::StatusOr<std::vector<MessageRecord>> SqliteTables::ReadMessages(
    std::string_view queue, absl::Time now, int limit, absl::Time visible_until,
    Fields fields) {
  SLUICE_RETURN_IF_ERROR(RequireQueue(queue, "ReadMessages"));
  std::vector<MessageRecord> messages;
  if (limit <= 0) return messages;  // SQLite reads a negative LIMIT as "all"
  SLUICE_ASSIGN_OR_RETURN(
      Statement read, Prepare(sql::kReadMessages.For(fields), "ReadMessages"));
  read.BindText(1, queue);
  read.BindTime(2, now);
  read.BindTime(3, visible_until);
  read.BindInt(4, limit);
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, read.Step());
    if (!row) break;
    SLUICE_ASSIGN_OR_RETURN(MessageRecord message, ReadMessage(read, fields));
    messages.push_back(std::move(message));
  }
  // RETURNING promises no order.
  std::sort(messages.begin(), messages.end(),
            [](const MessageRecord& a, const MessageRecord& b) {
              return a.message_id < b.message_id;
            });
  return messages;
}

absl::Status SqliteTables::SetVisibility(
    std::string_view queue, std::span<const VisibilityUpdate> updates) {
  SLUICE_RETURN_IF_ERROR(RequireQueue(queue, "SetVisibility"));
  SLUICE_ASSIGN_OR_RETURN(Statement update,
                          Prepare(sql::kSetVisibility, "SetVisibility"));
  for (const VisibilityUpdate& change : updates) {
    update.BindText(1, queue);
    update.BindInt(2, change.message_id);
    update.BindTime(3, change.visible_at);
    SLUICE_RETURN_IF_ERROR(update.Run());
    update.Reset();
  }
  return absl::OkStatus();
}

absl::Status SqliteTables::ArchiveMessages(std::string_view queue,
                                           std::span<const int64_t> message_ids,
                                           absl::Time now) {
  constexpr std::string_view kOperation = "ArchiveMessages";
  SLUICE_RETURN_IF_ERROR(RequireQueue(queue, kOperation));
  if (message_ids.empty()) return absl::OkStatus();
  BoundRows ids(1, message_ids.size());
  for (int64_t message_id : message_ids) ids.AddInt(message_id);
  {
    SLUICE_ASSIGN_OR_RETURN(Statement copy,
                            Prepare(sql::kCopyToArchive, kOperation));
    copy.BindText(1, queue);
    copy.BindRows(2, ids);
    copy.BindTime(3, now);
    SLUICE_RETURN_IF_ERROR(copy.Run());
  }
  SLUICE_ASSIGN_OR_RETURN(Statement remove,
                          Prepare(sql::kDeleteMessages, kOperation));
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
    return MessageLocation{archived, lookup.OptionalTime(5),
                           std::move(message)};
  }
  return std::nullopt;
}

}  // namespace sluice::sqlite_internal
