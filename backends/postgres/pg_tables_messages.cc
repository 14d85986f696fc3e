// Queue messages, in pgmq's tables, with the caller's times.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "pg_rows.h"
#include "pg_sql.h"
#include "pg_tables.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

// QueueSql::send's parameters: enqueued_at (`now`), then visible_at[],
// body text[] and priority[]. True if a message is visible by `now`.
bool AddMessageColumns(std::span<const OutgoingMessage> messages,
                       absl::Time now, Params& params) {
  // Binary, as pg_queue_sql.cc's Send casts them.
  ArrayLiteral visible(ElementType::kTimestamptz), bodies(ElementType::kText),
      priorities(ElementType::kInt4);
  bool visible_now = false;
  for (const OutgoingMessage& message : messages) {
    visible.Time(message.visible_at);
    priorities.Int(message.priority);
    bodies.Text(message.BodyText());
    visible_now = visible_now || message.visible_at <= now;
  }
  params.Time(now)
      .Array(std::move(visible))
      .Array(std::move(bodies))
      .Array(std::move(priorities));
  return visible_now;
}

absl::Status MissingQueue(std::string_view operation, std::string_view queue) {
  return absl::NotFoundError(
      StrCat(operation, ": queue \"", queue, "\" does not exist"));
}

// A read message with its claim order as stored: NULL (a message another
// pgmq client sent) sorts last, as in the claim index; and its task, when
// read with it.
struct ClaimedMessage {
  std::optional<int64_t> priority;
  std::optional<int64_t> seq;
  MessageRecord record;
  std::optional<TaskRecord> task;
};

// The first column of a read's task columns (after claim priority, seq and
// the message's columns without payloads).
constexpr int kReadTaskColumn = 7;

std::optional<int64_t> ReadOptionalInt(Row& row) {
  if (row.IsNull()) {
    row.Skip();
    return std::nullopt;
  }
  return row.Int();
}

bool InClaimOrder(const ClaimedMessage& a, const ClaimedMessage& b) {
  if (a.priority != b.priority) {
    if (!b.priority.has_value()) return true;
    if (!a.priority.has_value()) return false;
    return *a.priority > *b.priority;
  }
  if (a.seq != b.seq) {
    if (!b.seq.has_value()) return true;
    if (!a.seq.has_value()) return false;
    return *a.seq < *b.seq;
  }
  return a.record.message_id < b.record.message_id;
}

// A read's rows, in claim order; with `task_fields`, each with its task.
absl::StatusOr<std::vector<ClaimedMessage>> ReadClaimed(
    const Result& result, Fields fields, std::optional<Fields> task_fields) {
  std::vector<ClaimedMessage> claimed;
  claimed.reserve(result.rows());
  for (int i = 0; i < result.rows(); ++i) {
    Row row = result.row(i);
    ClaimedMessage message;
    message.priority = ReadOptionalInt(row);
    message.seq = ReadOptionalInt(row);
    SLUICE_RETURN_IF_ERROR(row.status());
    SLUICE_ASSIGN_OR_RETURN(message.record,
                            ReadMessage(result.row(i, 2), fields));
    // A left join: a message without a task has NULL task columns.
    if (task_fields && !result.row(i, kReadTaskColumn).IsNull()) {
      SLUICE_ASSIGN_OR_RETURN(
          message.task, ReadTask(result.row(i, kReadTaskColumn), *task_fields));
    }
    claimed.push_back(std::move(message));
  }
  // RETURNING promises no order: put them back in claim order.
  std::sort(claimed.begin(), claimed.end(), InClaimOrder);
  return claimed;
}

}  // namespace

absl::Status PgTables::SendMessagesAndInsertTasks(
    std::string_view queue, std::span<const OutgoingMessage> messages,
    std::span<const TaskRecord> tasks, absl::Time now) {
  constexpr std::string_view kOperation = "SendMessagesAndInsertTasks";
  if (messages.size() != tasks.size()) {
    return absl::InternalError(StrCat("postgres ", kOperation, ": ",
                                      messages.size(), " messages for ",
                                      tasks.size(), " tasks"));
  }
  if (tasks.empty()) return absl::OkStatus();
  SawTime(now);
  Params params = TaskColumns(tasks);
  const bool visible_now = AddMessageColumns(messages, now, params);
  const QueueSql& statements = connection_.StatementsFor(queue);
  Send(ForRows(InsertedHere(tasks) ? statements.send_with_tasks_of_new_runs
                                   : statements.send_with_tasks,
               tasks.size()),
       params, kOperation, queue);
  if (visible_now) NotifyQueue(queue);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> PgTables::SendMessages(
    std::string_view queue, std::span<const OutgoingMessage> messages,
    absl::Time now) {
  constexpr std::string_view kOperation = "SendMessages";
  SawTime(now);
  if (messages.empty()) {
    SLUICE_ASSIGN_OR_RETURN(bool exists, QueueExists(queue));
    if (!exists) return MissingQueue(kOperation, queue);
    return std::vector<int64_t>();
  }
  Params params;
  const bool visible_now = AddMessageColumns(messages, now, params);
  const QueueSql& statements = connection_.StatementsFor(queue);
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(statements.send, params, kOperation, queue));
  if (result.rows() != static_cast<int>(messages.size())) {
    return absl::InternalError(StrCat("postgres SendMessages: queue \"", queue,
                                      "\" took ", result.rows(), " of ",
                                      messages.size(), " messages"));
  }
  // Inserted in send order, so the queue's identity handed out increasing
  // ids in that order; RETURNING itself promises no order.
  std::vector<int64_t> message_ids;
  message_ids.reserve(messages.size());
  for (int i = 0; i < result.rows(); ++i) {
    message_ids.push_back(result.row(i).Int());
  }
  std::sort(message_ids.begin(), message_ids.end());
  if (visible_now) NotifyQueue(queue);
  return message_ids;
}

absl::StatusOr<std::optional<Result>> PgTables::ReadFromQueue(
    std::string_view operation, std::string_view queue, std::string_view sql,
    absl::Time now, int limit, absl::Time visible_until) {
  SawTime(now);
  if (limit <= 0) {
    SLUICE_ASSIGN_OR_RETURN(bool exists, QueueExists(queue));
    if (!exists) return MissingQueue(operation, queue);
    return std::nullopt;
  }
  return Query(sql,
               Params().Time(now).Time(visible_until).Int(limit).Text(queue),
               operation, queue);
}

absl::StatusOr<std::vector<MessageRecord>> PgTables::ReadMessages(
    std::string_view queue, absl::Time now, int limit, absl::Time visible_until,
    Fields fields) {
  SLUICE_ASSIGN_OR_RETURN(
      std::optional<Result> result,
      ReadFromQueue("ReadMessages", queue,
                    connection_.StatementsFor(queue).Read(fields), now, limit,
                    visible_until));
  std::vector<MessageRecord> messages;
  if (!result.has_value()) return messages;
  SLUICE_ASSIGN_OR_RETURN(std::vector<ClaimedMessage> claimed,
                          ReadClaimed(*result, fields, std::nullopt));
  messages.reserve(claimed.size());
  for (ClaimedMessage& message : claimed) {
    messages.push_back(std::move(message.record));
  }
  return messages;
}

absl::StatusOr<internal::MessagesWithTasks> PgTables::ReadMessagesWithTasks(
    std::string_view queue, absl::Time now, int limit, absl::Time visible_until,
    Fields task_fields) {
  SLUICE_ASSIGN_OR_RETURN(
      std::optional<Result> result,
      ReadFromQueue("ReadMessagesWithTasks", queue,
                    connection_.StatementsFor(queue).ReadWithTasks(task_fields),
                    now, limit, visible_until));
  internal::MessagesWithTasks read;
  if (!result.has_value()) return read;
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<ClaimedMessage> claimed,
      ReadClaimed(*result, Fields::kNoPayloads, task_fields));
  read.messages.reserve(claimed.size());
  read.tasks.reserve(claimed.size());
  for (ClaimedMessage& message : claimed) {
    read.messages.push_back(std::move(message.record));
    read.tasks.push_back(std::move(message.task));
  }
  return read;
}

absl::StatusOr<internal::ServerClaimed> PgTables::ClaimOnServer(
    const internal::ServerClaim& claim, const Control& then) {
  SawTime(claim.now);
  ArrayLiteral flows, steps, stalls, visible;
  for (const internal::ClaimableStep& step : claim.steps) {
    flows.Text(step.flow_slug);
    steps.Int(step.step_index);
    stalls.Time(step.stall_at);
    visible.Time(step.visible_until);
  }
  const QueueSql& statements = connection_.StatementsFor(claim.queue);
  Params params;
  params.Time(claim.now)
      .Time(claim.lost_visible_until)
      .Array(std::move(flows))
      .Array(std::move(steps))
      .Array(std::move(stalls))
      .Array(std::move(visible))
      .Text(claim.worker_id)
      .Text(claim.queue)
      .Int(claim.limit);
  const Params next_params = Params().Time(claim.now);
  const std::string queue(claim.queue);
  const Connection::Statement all[] = {
      {statements.claim, params, {"ClaimAndCommit", queue}},
      {statements.next_visible, next_params, {"NextVisibleAt", queue}}};
  SLUICE_ASSIGN_OR_RETURN(std::vector<Result> results,
                          connection_.QueryAllThenControl(
                              std::span(all, claim.read_next_visible ? 2 : 1),
                              then.sql, {"Commit", {}}, *then.result));
  internal::ServerClaimed claimed;
  const Result& rows = results[0];
  for (int i = 0; i < rows.rows(); ++i) {
    Row row = rows.row(i);
    claimed.plain = row.Bool();
    if (!claimed.plain) return internal::ServerClaimed{.plain = false};
    claimed.claimed.push_back(row.Bool());
    claimed.message_ids.push_back(row.Int());
    SLUICE_RETURN_IF_ERROR(row.status());
    SLUICE_ASSIGN_OR_RETURN(TaskRecord task,
                            ReadTask(rows.row(i, 3), Fields::kAll));
    claimed.tasks.push_back(std::move(task));
  }
  if (claim.read_next_visible) {
    Row row = results[1].row(0);
    claimed.next_visible_at = row.OptionalTime();
    SLUICE_RETURN_IF_ERROR(row.status());
  }
  return claimed;
}

absl::Status PgTables::SetVisibility(
    std::string_view queue, std::span<const VisibilityUpdate> updates) {
  if (updates.empty()) return absl::OkStatus();
  // One row per message, the last change winning.
  absl::flat_hash_map<int64_t, size_t> last;
  for (size_t i = 0; i < updates.size(); ++i) last[updates[i].message_id] = i;
  ArrayLiteral ids, visible, to_tail;
  bool visible_now = !latest_now_.has_value();
  for (size_t i = 0; i < updates.size(); ++i) {
    if (last[updates[i].message_id] != i) continue;
    ids.Int(updates[i].message_id);
    visible.Time(updates[i].visible_at);
    to_tail.Bool(updates[i].to_tail);
    visible_now = visible_now || updates[i].visible_at <= *latest_now_;
  }
  Send(connection_.StatementsFor(queue).set_visibility,
       Params()
           .Array(std::move(ids))
           .Array(std::move(visible))
           .Array(std::move(to_tail)),
       "SetVisibility", queue);
  if (visible_now) NotifyQueue(queue);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<absl::Time>> PgTables::NextVisibleAt(
    std::string_view queue, absl::Time now) {
  SawTime(now);
  SLUICE_ASSIGN_OR_RETURN(Result result,
                          Query(connection_.StatementsFor(queue).next_visible,
                                Params().Time(now), "NextVisibleAt", queue));
  Row row = result.row(0);
  std::optional<absl::Time> visible_at = row.OptionalTime();
  SLUICE_RETURN_IF_ERROR(row.status());
  return visible_at;
}

absl::Status PgTables::ArchiveMessages(std::string_view queue,
                                       std::span<const int64_t> message_ids,
                                       absl::Time now) {
  SawTime(now);
  if (message_ids.empty()) return absl::OkStatus();
  Send(connection_.StatementsFor(queue).archive,
       Params().Array(IntArray(message_ids)).Time(now), "ArchiveMessages",
       queue);
  return absl::OkStatus();
}

absl::Status PgTables::DeleteMessages(std::string_view queue,
                                      std::span<const int64_t> message_ids) {
  if (message_ids.empty()) return absl::OkStatus();
  Send(connection_.StatementsFor(queue).delete_messages,
       Params().Array(IntArray(message_ids)), "DeleteMessages", queue);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<MessageLocation>> PgTables::LookupMessage(
    std::string_view queue, int64_t message_id) {
  SLUICE_ASSIGN_OR_RETURN(
      Result result, Query(connection_.StatementsFor(queue).lookup,
                           Params().Int(message_id), "LookupMessage", queue));
  if (result.rows() == 0) return std::nullopt;
  Row row = result.row(0);
  MessageLocation location;
  location.archived = row.Bool();
  location.archived_at = row.OptionalTime();
  SLUICE_RETURN_IF_ERROR(row.status());
  SLUICE_ASSIGN_OR_RETURN(location.message,
                          ReadMessage(result.row(0, 2), Fields::kAll));
  return location;
}

}  // namespace sluice::postgres_internal
