// Upgrading a SQLite file of an earlier schema version in place.
#include <span>
#include <string>
#include <string_view>

#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_schema_parts.h"

namespace sluice::sqlite_internal {
namespace {

// Version 1 to 2. Tables whose rows gained columns before their payloads
// are rebuilt with version 2's text, so an upgraded file is laid out
// exactly like a new one; each copy keeps every row and fills the new
// columns: priority 0, no key, no metadata or options, and a message's seq
// its id (its send order, as version 1 read it). Copying costs one pass
// over those tables, once.
//
// The texts these rebuilds and kNewInV2 create are the current ones: none
// of those tables has changed since version 2. A later version that changes
// one of them must freeze its version 2 text here first.
struct Rebuild {
  const TableSchema* table;
  // INSERT INTO <table> ... SELECT ... FROM <table>_v<old version>
  const char* copy;
};
constexpr Rebuild kRebuiltInV2[] = {
    {&kMessages,
     "INSERT INTO messages (queue_name, message_id, priority, seq, "
     "read_count, enqueued_at, visible_at, body) SELECT queue_name, "
     "message_id, 0, message_id, read_count, enqueued_at, visible_at, body "
     "FROM messages_v1"},
    {&kArchivedMessages,
     "INSERT INTO archived_messages (queue_name, message_id, priority, "
     "read_count, enqueued_at, visible_at, archived_at, body) SELECT "
     "queue_name, message_id, 0, read_count, enqueued_at, visible_at, "
     "archived_at, body FROM archived_messages_v1"},
    {&kRuns,
     "INSERT INTO runs (seq, run_id, flow_slug, status, remaining_steps, "
     "error, started_at, finished_at, priority, external_key, "
     "cancel_requested, metadata, options, input, output) SELECT seq, "
     "run_id, flow_slug, status, remaining_steps, error, started_at, "
     "finished_at, 0, '', 0, NULL, NULL, input, output FROM runs_v1"},
    {&kTasks,
     "INSERT INTO tasks (run_seq, run_id, step_index, task_index, flow_slug, "
     "status, attempts, error, queue_name, message_id, queued_at, "
     "started_at, finished_at, stall_at, requeued_count, worker_id, "
     "budget_start, cancel_requested, options, input, output) SELECT "
     "run_seq, run_id, step_index, task_index, flow_slug, status, attempts, "
     "error, queue_name, message_id, queued_at, started_at, finished_at, "
     "stall_at, requeued_count, worker_id, 0, 0, NULL, input, output FROM "
     "tasks_v1"},
};
constexpr const TableSchema* kNewInV2[] = {&kAttempts, &kDedupe};
constexpr char kQueuesV2[] = R"sql(
ALTER TABLE queues ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
UPDATE queues SET last_seq = last_message_id;
)sql";

// Version 2 to 3 (aliases and versions; see
// docs/decisions/0025-sqlite-memory-versions-schema.md). flows is rebuilt
// with each flow its own alias at generation 1; every flow becomes the
// active version of that alias (its alias row dated from the flow's
// creation, the last time it changed); workers gain the steps they serve,
// unknown (NULL) for the rows of earlier builds.
constexpr Rebuild kRebuiltInV3[] = {
    {&kFlows,
     "INSERT INTO flows (slug, alias, generation, created_at, definition) "
     "SELECT slug, slug, 1, created_at, definition FROM flows_v2"},
};
constexpr const TableSchema* kNewInV3[] = {&kAliases};
constexpr char kFillV3[] = R"sql(
INSERT INTO aliases (alias, active_slug, updated_at)
  SELECT slug, slug, created_at FROM flows;
ALTER TABLE workers ADD COLUMN served TEXT;
)sql";

// Version 3 to 4 (fan-out, docs/decisions/0036-fan-out-storage.md, and
// schedules, 0031): the child_links, child_reports and schedules tables.
// Version 4 also rebuilt tasks_unfinished to hold 'waiting' tasks; the
// upgrade no longer does, since the step to version 6 drops that index.
constexpr const TableSchema* kNewInV4[] = {&kChildLinks, &kChildReports,
                                           &kSchedules};

// Version 5: an index for pages of runs of one status. Upgrades from
// versions 1 and 2 rebuild `runs` with today's indexes, so it may exist.
constexpr char kIndexesV5[] = R"sql(
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, started_at, run_id);
)sql";

// Version 6 (docs/decisions/0062): no index of unfinished tasks. The few
// statements that want them read the run's tasks by primary key instead,
// and every task's status change no longer rewrites an index entry.
constexpr char kIndexesV6[] = R"sql(
DROP INDEX IF EXISTS tasks_unfinished;
)sql";

// Version 8 (docs/decisions/0073): retention's newest ended run of one
// flow and outcome is found by key, not by walking every ended run. Upgrades
// from versions 1 and 2 rebuild `runs` with today's indexes, so it may exist.
constexpr char kIndexesV8[] = R"sql(
CREATE INDEX IF NOT EXISTS runs_finished_by_flow_status
  ON runs (flow_slug, status, finished_at) WHERE finished_at IS NOT NULL;
)sql";

// Version 9 (docs/decisions/0080): the claim order holds only messages a
// claim can take at once; delayed and read ones are indexed by visible_at
// apart. The old indexes go, and `messages` gets today's (kMessages). An
// upgrade from version 1 or 2 rebuilt `messages` with them already, so
// they are dropped first and built again, in one more pass.
constexpr char kDropIndexesV9[] = R"sql(
DROP INDEX IF EXISTS messages_claim;
DROP INDEX IF EXISTS messages_visible;
DROP INDEX IF EXISTS messages_ready;
DROP INDEX IF EXISTS messages_delayed;
DROP INDEX IF EXISTS messages_read;
)sql";

// Version 10 (docs/decisions/0087): stall recovery finds started tasks
// through their read messages, so tasks need no index of stall times.
constexpr char kDropIndexesV10[] = R"sql(
DROP INDEX IF EXISTS tasks_stalled;
)sql";

absl::Status Execute(sqlite3* db, const char* sql, std::string_view what) {
  return ExecuteSchemaSql(db, sql, what);
}

// Renames each table of `rebuilds` to <name>_v<from>, creates it again with
// the current text, copies its rows over and drops the old one; then creates
// `created`. The caller's transaction makes it all or nothing.
absl::Status RebuildAndCreate(sqlite3* db, std::span<const Rebuild> rebuilds,
                              std::span<const TableSchema* const> created,
                              int from, std::string_view what) {
  for (const Rebuild& rebuild : rebuilds) {
    const std::string old_name = StrCat(rebuild.table->name, "_v", from);
    SLUICE_RETURN_IF_ERROR(Execute(
        db,
        StrCat("ALTER TABLE ", rebuild.table->name, " RENAME TO ", old_name)
            .c_str(),
        what));
    SLUICE_RETURN_IF_ERROR(Execute(db, rebuild.table->create, what));
    SLUICE_RETURN_IF_ERROR(Execute(db, rebuild.copy, what));
    // Dropping the old table drops its indexes, whose names the new ones
    // take.
    SLUICE_RETURN_IF_ERROR(
        Execute(db, StrCat("DROP TABLE ", old_name).c_str(), what));
    SLUICE_RETURN_IF_ERROR(Execute(db, rebuild.table->indexes, what));
  }
  for (const TableSchema* table : created) {
    SLUICE_RETURN_IF_ERROR(Execute(db, table->create, what));
    SLUICE_RETURN_IF_ERROR(Execute(db, table->indexes, what));
  }
  return absl::OkStatus();
}

// Version 1 to 2 (see kRebuiltInV2).
absl::Status MigrateV1ToV2(sqlite3* db) {
  constexpr std::string_view kWhat = "upgrade schema version 1 to 2";
  SLUICE_RETURN_IF_ERROR(
      RebuildAndCreate(db, kRebuiltInV2, kNewInV2, 1, kWhat));
  return Execute(db, kQueuesV2, kWhat);
}

// Version 2 to 3 (see kRebuiltInV3).
absl::Status MigrateV2ToV3(sqlite3* db) {
  constexpr std::string_view kWhat = "upgrade schema version 2 to 3";
  SLUICE_RETURN_IF_ERROR(
      RebuildAndCreate(db, kRebuiltInV3, kNewInV3, 2, kWhat));
  return Execute(db, kFillV3, kWhat);
}

// Version 3 to 4 (see kNewInV4).
absl::Status MigrateV3ToV4(sqlite3* db) {
  constexpr std::string_view kWhat = "upgrade schema version 3 to 4";
  return RebuildAndCreate(db, {}, kNewInV4, 3, kWhat);
}

// Version 4 to 5 (see kIndexesV5).
absl::Status MigrateV4ToV5(sqlite3* db) {
  return Execute(db, kIndexesV5, "upgrade schema version 4 to 5");
}

// Version 5 to 6 (see kIndexesV6).
absl::Status MigrateV5ToV6(sqlite3* db) {
  return Execute(db, kIndexesV6, "upgrade schema version 5 to 6");
}

}  // namespace

absl::Status UpgradeSchema(sqlite3* db, int64_t version) {
  if (version == 1) SLUICE_RETURN_IF_ERROR(MigrateV1ToV2(db));
  if (version <= 2) SLUICE_RETURN_IF_ERROR(MigrateV2ToV3(db));
  if (version <= 3) SLUICE_RETURN_IF_ERROR(MigrateV3ToV4(db));
  if (version <= 4) SLUICE_RETURN_IF_ERROR(MigrateV4ToV5(db));
  if (version <= 5) SLUICE_RETURN_IF_ERROR(MigrateV5ToV6(db));
  // Version 6 to 7 changes no table: a one-step run stores no step state
  // while its run's row says it (decision 0069), which a build of version
  // 6 would take for a missing state, so the version fences it out.
  if (version <= 7) {
    SLUICE_RETURN_IF_ERROR(
        Execute(db, kIndexesV8, "upgrade schema version 7 to 8"));
  }
  if (version <= 8) {
    constexpr std::string_view kWhatV9 = "upgrade schema version 8 to 9";
    SLUICE_RETURN_IF_ERROR(Execute(db, kDropIndexesV9, kWhatV9));
    SLUICE_RETURN_IF_ERROR(Execute(db, kMessages.indexes, kWhatV9));
  }
  return Execute(db, kDropIndexesV10, "upgrade schema version 9 to 10");
}

}  // namespace sluice::sqlite_internal
