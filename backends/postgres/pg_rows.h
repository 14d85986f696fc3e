// Result rows as records. Each reader expects the columns of its list in
// pg_sql.h, in order, from the Row's current column; payload columns only
// for Fields::kAll. A run, step state, task, report or message whose content
// does not decode comes back with `unreadable` set (sluice/records.h); a
// flow that does not decode is kInternal ("corrupt").
#ifndef SLUICE_BACKENDS_POSTGRES_PG_ROWS_H_
#define SLUICE_BACKENDS_POSTGRES_PG_ROWS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "pg_values.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice::postgres_internal {

absl::StatusOr<FlowRecord> ReadFlow(Row row);
absl::StatusOr<AliasRecord> ReadAlias(Row row);
absl::StatusOr<QueueRecord> ReadQueue(Row row);
absl::StatusOr<RunRecord> ReadRun(Row row, Fields fields);
absl::StatusOr<StepStateRecord> ReadStepState(Row row, Fields fields);
absl::StatusOr<TaskRecord> ReadTask(Row row, Fields fields);
absl::StatusOr<OutboxReport> ReadReport(Row row);
// Fan-out: pg_sql_children.h's kChildLinkAll (kChildLinkState for
// kNoPayloads) and kChildReport.
absl::StatusOr<ChildLinkRecord> ReadChildLink(Row row, Fields fields);
absl::StatusOr<ChildReport> ReadChildReport(Row row);
// msg_id, read_ct, enqueued_at, vt, priority, then message for kAll.
absl::StatusOr<MessageRecord> ReadMessage(Row row, Fields fields);
absl::StatusOr<AttemptRecord> ReadAttempt(Row row);
absl::StatusOr<DedupeRecord> ReadDedupe(Row row);
// The served column's JSON ([{"flow": slug, "steps": [slug, ...]}, ...])
// and back; NULL reads as none. An entry of another shape makes the worker
// corrupt (kInternal), like a flow whose definition does not decode.
absl::StatusOr<WorkerRecord> ReadWorker(Row row);
Json ServedToJson(const std::vector<ServedSteps>& served);
absl::StatusOr<std::vector<ServedSteps>> ServedFromJson(const Json& json);

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_ROWS_H_
