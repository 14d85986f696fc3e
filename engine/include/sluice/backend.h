// The storage backend interface: the spine every backend implements.
//
// Backends store and fetch; the engine decides. A Transaction offers typed
// operations on the model's records and the queue operations, so a task's
// transition and its message move together or not at all.
//
// Contract for every method:
// - "May move from" an argument means the backend may take the JSON and
//   strings it stores; keys, ids, counters, times, queue and flow names are
//   left as given, so the caller may still read them.
// - A call that fails leaves the transaction unusable: every later call,
//   Commit() included, returns kFailedPrecondition, and dropping it rolls
//   back everything the transaction did.
// - Nothing a transaction does is visible to others before Commit() succeeds;
//   a failed Commit() applies nothing.
// - Time comes from the caller: no backend reads a clock of its own. Times
//   are kept to the microsecond.
// - Ids handed out by a rolled-back transaction may or may not be reused.
// - Errors use Abseil's retry meaning: kAborted (serialization failure or a
//   lost race: retry the transaction), kUnavailable (connection or I/O
//   trouble: retry later), kAlreadyExists / kNotFound (the record says so),
//   kInternal (the store itself is broken: a flow definition that does not
//   decode, a result of the wrong shape).
// - A row whose content does not decode never fails a read: the record
//   comes back with `unreadable` set (see sluice/records.h), so that one
//   bad row can't block the rows around it.
// - Row locks: GetRun(..., kForUpdate) locks a run row until the end of the
//   transaction. The engine locks runs in ascending id order, and a run before
//   its step states and tasks. Backends whose transactions are exclusive
//   (memory, SQLite) may ignore locks.
//
// A Transaction is used by the thread that began it, which must not hold
// another open transaction of the same backend. A Backend is safe for
// concurrent use.
#ifndef SLUICE_BACKEND_H_
#define SLUICE_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sluice/backend_types.h"
#include "sluice/internal/strings.h"
#include "sluice/native_connection.h"
#include "sluice/records.h"

namespace sluice {

class Transaction {
 public:
  virtual ~Transaction() = default;  // rolls back unless committed

  // Makes every change visible at once. After this the transaction is done.
  virtual absl::Status Commit() = 0;

  // --- Flows and the queue registry --------------------------------------

  // Serializes every transaction that takes this lock for `flow_slug` (a
  // deploy, an enqueue with ids or dedupe keys) until this one ends.
  virtual absl::Status LockFlowSlug(std::string_view flow_slug) = 0;
  virtual absl::StatusOr<std::optional<FlowRecord>> GetFlow(
      std::string_view flow_slug) = 0;
  // kAlreadyExists if a flow with this slug exists.
  virtual absl::Status InsertFlow(const FlowRecord& flow) = 0;
  virtual absl::StatusOr<std::vector<FlowRecord>> ListFlows() = 0;
  // Deletes the flow row only (not its runs or queues). False if absent.
  virtual absl::StatusOr<bool> DeleteFlow(std::string_view flow_slug) = 0;
  // Replaces a stored flow's definition and generation (a fenced development
  // recompilation). kNotFound if absent.
  virtual absl::Status UpdateFlow(const FlowRecord& flow) = 0;
  // The flow's runs by status.
  virtual absl::StatusOr<RunCounts> CountRuns(std::string_view flow_slug) = 0;

  // --- Aliases --------------------------------------------------------------

  // Serializes every transaction that takes this lock for `alias` (deploy,
  // activate, delete version) until this one ends. Lock order: alias, then
  // slug, everywhere.
  virtual absl::Status LockAlias(std::string_view alias) = 0;
  virtual absl::StatusOr<std::optional<AliasRecord>> GetAlias(
      std::string_view alias) = 0;
  // (interface v9) Fails this transaction unless `alias` is active at
  // `active_slug`: kNotFound naming both, and nothing the transaction wrote
  // applies. A backend may defer the check to a later call of the
  // transaction or to its Commit (Postgres pipelines it: no round trip).
  virtual absl::Status ExpectAlias(std::string_view alias,
                                   std::string_view active_slug) = 0;
  // Inserts or replaces.
  virtual absl::Status PutAlias(const AliasRecord& alias) = 0;
  virtual absl::StatusOr<std::vector<AliasRecord>> ListAliases() = 0;

  // The registry entry for a queue, if registered.
  virtual absl::StatusOr<std::optional<QueueRecord>> GetQueue(
      std::string_view name) = 0;
  // Whether the physical queue exists, registered or not.
  virtual absl::StatusOr<bool> QueueExists(std::string_view name) = 0;
  // Registers and creates the physical queue. kAlreadyExists if registered.
  virtual absl::Status CreateQueue(const QueueRecord& queue) = 0;
  // Every registered queue, by name.
  virtual absl::StatusOr<std::vector<QueueRecord>> ListQueues() = 0;
  // Sets a registered queue's paused flag. kNotFound if not registered.
  virtual absl::Status SetQueuePaused(std::string_view name, bool paused) = 0;
  // Drops a registered queue: its registry row, the physical queue and its
  // messages, live and archived. False if it was not registered.
  virtual absl::StatusOr<bool> DeleteQueue(std::string_view name) = 0;

  // --- Runs ---------------------------------------------------------------

  // May move from `runs`. `inputs` is empty, or has one entry per run:
  // where one is set, it is the input stored for that run (whose record's
  // own input is left null), read in place while the call lasts, so a run
  // started from a caller's input needs no copy of it. kInvalidArgument if
  // `inputs` has another size. kAlreadyExists if any run id exists, or any
  // (flow_slug, external_key) with a non-empty key.
  virtual absl::Status InsertRuns(std::span<RunRecord> runs,
                                  std::span<const Json* const> inputs) = 0;
  // Every run's input in its record.
  absl::Status InsertRuns(std::span<RunRecord> runs) {
    return InsertRuns(runs, {});
  }
  // One entry per id, in order; nullopt where no such run exists (or, with
  // kSkipLocked, where another transaction holds it). With kForUpdate or
  // kSkipLocked, locks the rows in the order given (the engine passes
  // ascending ids).
  virtual absl::StatusOr<std::vector<std::optional<RunRecord>>> GetRuns(
      std::span<const RunId> run_ids, LockMode lock, Fields fields) = 0;
  // Writes status, output, error, finished_at and cancel_requested
  // (remaining_steps moves only by AddRunRemainingSteps; the rest is fixed at
  // creation); may move from output and error. kNotFound if a run does not
  // exist.
  virtual absl::Status UpdateRuns(std::span<RunRecord> runs) = 0;
  // Adds each delta and returns the new values, in order.
  virtual absl::StatusOr<std::vector<int>> AddRunRemainingSteps(
      std::span<const RunCounterDelta> deltas) = 0;
  // (interface v7) UpdateRuns and AddRunRemainingSteps in one call: deltas[i]
  // names runs[i] (a run named twice gets its last record and each delta);
  // returns the new remaining_steps in order. kInvalidArgument, changing
  // nothing, unless the two are the same size. A run written with its
  // counter is one row write where the backend can make it one (Postgres and
  // SQLite do); this default makes both calls.
  virtual absl::StatusOr<std::vector<int>> UpdateRunsAndCounters(
      std::span<RunRecord> runs, std::span<const RunCounterDelta> deltas) {
    if (absl::Status s = internal::CheckOneDeltaPerRecord(
            runs.size(), deltas.size(), "UpdateRunsAndCounters");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = UpdateRuns(runs); !s.ok()) return s;
    return AddRunRemainingSteps(deltas);
  }
  // Runs matching `query` in its order, at most query.limit. Payloads are
  // filled as `fields` says.
  virtual absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunQuery& query,
                                                          Fields fields) = 0;
  // The runs of `flow_slug` with these external keys, one entry per key, in
  // order; nullopt where none has it.
  virtual absl::StatusOr<std::vector<std::optional<RunRecord>>> FindRunsByKey(
      std::string_view flow_slug, std::span<const std::string> external_keys,
      Fields fields) = 0;
  // Ended runs (completed, failed or cancelled) that finished before
  // `finished_before`, earliest first, at most `limit`; skips runs other
  // transactions hold. Payloads are not filled.
  virtual absl::StatusOr<std::vector<RunRecord>> FindFinishedRuns(
      absl::Time finished_before, int limit) = 0;
  // Deletes runs with their step states, tasks, attempts, outbox reports and
  // their tasks' messages (live and archived); not their dedupe entries.
  // Ids that don't exist are skipped.
  // Returns the number of runs deleted.
  virtual absl::StatusOr<int> DeleteRuns(std::span<const RunId> run_ids) = 0;

  // --- Step states --------------------------------------------------------

  // May move from `states`. kNotFound if a state's run does not exist,
  // kAlreadyExists if the (run, step) exists.
  virtual absl::Status InsertStepStates(std::span<StepStateRecord> states) = 0;
  // The step states of each run, by step index; one entry per run id, in
  // order (empty for a run that does not exist).
  virtual absl::StatusOr<std::vector<std::vector<StepStateRecord>>>
  GetStepStates(std::span<const RunId> run_ids, Fields fields) = 0;
  // Writes status, initial_tasks, output, error, skip_reason, started_at and
  // finished_at (the counters move only by AddStepCounters); may move from
  // output and error. kNotFound if a step state does not exist.
  virtual absl::Status UpdateStepStates(std::span<StepStateRecord> states) = 0;
  // Adds each delta and returns the new counters, in order. Any delta sets
  // an unset remaining_tasks (it counts as 0), even a zero one.
  virtual absl::StatusOr<std::vector<StepCounters>> AddStepCounters(
      std::span<const StepCounterDelta> deltas) = 0;
  // UpdateStepStates and AddStepCounters in one call: deltas[i] names
  // states[i]'s step (a step named twice gets its last record and each
  // delta); returns the new counters in order. kInvalidArgument, changing
  // nothing, unless the two are the same size. One row write where the
  // backend can; this default makes both calls.
  virtual absl::StatusOr<std::vector<StepCounters>> UpdateStepStatesAndCounters(
      std::span<StepStateRecord> states,
      std::span<const StepCounterDelta> deltas) {
    if (absl::Status s = internal::CheckOneDeltaPerRecord(
            states.size(), deltas.size(), "UpdateStepStatesAndCounters");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = UpdateStepStates(states); !s.ok()) return s;
    return AddStepCounters(deltas);
  }

  // --- Tasks --------------------------------------------------------------

  // May move from `tasks`. kNotFound if a task's run does not exist;
  // kAlreadyExists if any task key, or any (queue_name, message_id), exists.
  virtual absl::Status InsertTasks(std::span<TaskRecord> tasks) = 0;
  // One entry per key, in order; nullopt where no such task exists.
  virtual absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasks(
      std::span<const TaskKey> keys, Fields fields) = 0;
  // The tasks whose message is (queue, id), one entry per id, in order
  // (all nullopt for a queue that does not exist).
  virtual absl::StatusOr<std::vector<std::optional<TaskRecord>>>
  GetTasksByMessage(std::string_view queue,
                    std::span<const int64_t> message_ids, Fields fields) = 0;
  // Applies each compare-and-set update; may move from `updates`. Returns,
  // per update, whether it applied.
  virtual absl::StatusOr<std::vector<bool>> UpdateTasks(
      std::span<TaskUpdate> updates) = 0;
  // The queued, started and waiting tasks of a run (of one step if `step_index`
  // is set), by step then task index.
  virtual absl::StatusOr<std::vector<TaskRecord>> GetUnfinishedTasks(
      const RunId& run_id, std::optional<int> step_index, Fields fields) = 0;
  // All tasks of a run, by step then task index.
  virtual absl::StatusOr<std::vector<TaskRecord>> ListTasks(
      const RunId& run_id) = 0;
  // For each step, one entry per existing task, in task index order (nullopt
  // where a task has no output, or an output that does not decode, which
  // StepOutputs::unreadable then names); one entry per step, in order.
  virtual absl::StatusOr<std::vector<StepOutputs>> GetTaskOutputs(
      std::span<const StepRef> steps) = 0;
  // (interface v11: `which`) Task counts of `queue` by state at `now` (see
  // QueueCounts), those `which` names.
  virtual absl::StatusOr<QueueCounts> CountTasks(std::string_view queue,
                                                 absl::Time now,
                                                 TaskCounts which) = 0;
  // Started tasks whose stall_at is before `query.now`, earliest first, at
  // most `query.limit`. Locks them; skips tasks other transactions hold.
  virtual absl::StatusOr<std::vector<TaskRecord>> FindStalledTasks(
      const StalledQuery& query, Fields fields) = 0;

  // --- Attempts ledger ----------------------------------------------------

  // Appends ledger entries. kNotFound if a task's run does not exist;
  // kAlreadyExists if a (task, attempt) entry exists.
  virtual absl::Status AppendAttempts(
      std::span<const AttemptRecord> attempts) = 0;
  // The ledger of a run, by step, task, then attempt.
  virtual absl::StatusOr<std::vector<AttemptRecord>> ListAttempts(
      const RunId& run_id) = 0;

  // --- Dedupe registry ----------------------------------------------------

  // The entry for (flow_slug, key), if any. Locks it until the end of the
  // transaction (kForUpdate semantics; exclusive backends may ignore).
  virtual absl::StatusOr<std::optional<DedupeRecord>> GetDedupe(
      std::string_view flow_slug, std::string_view key) = 0;
  // Inserts or overwrites the entry for (flow_slug, key).
  virtual absl::Status PutDedupe(const DedupeRecord& entry) = 0;
  // Deletes the entry for (flow_slug, key) if it still names `run_id`.
  // Returns whether it deleted one.
  virtual absl::StatusOr<bool> DeleteDedupe(std::string_view flow_slug,
                                            std::string_view key,
                                            const RunId& run_id) = 0;
  // Deletes up to `limit` throttle entries whose window ended at or before
  // `now`, skipping rows other transactions hold. Returns how many.
  virtual absl::StatusOr<int> DeleteExpiredDedupe(absl::Time now,
                                                  int limit) = 0;

  // --- Outbox -------------------------------------------------------------

  // Appends reports; returns the ids assigned, in order (increasing).
  virtual absl::StatusOr<std::vector<int64_t>> AppendReports(
      std::span<const OutboxReport> reports) = 0;
  // Deletes and returns those of `report_ids` still present, by id. A report
  // another transaction holds is skipped.
  virtual absl::StatusOr<std::vector<OutboxReport>> TakeReports(
      std::span<const int64_t> report_ids) = 0;
  // Deletes and returns up to `limit` reports created before `created_before`,
  // oldest first, skipping those other transactions hold.
  virtual absl::StatusOr<std::vector<OutboxReport>> TakeStaleReports(
      absl::Time created_before, int limit) = 0;
  virtual absl::StatusOr<int64_t> CountReports() = 0;

  // --- Fan-out children -----------------------------------------------------
  // Links live in the parent's store, child reports in the child's store
  // (see ChildLinkRecord, ChildReport). The default bodies let a backend
  // that does not offer fan-out still build; the engine refuses fan-out on
  // it (kUnimplemented).

  // May move from `links`. kNotFound if a parent task does not exist;
  // kAlreadyExists if a (parent, child_index) exists.
  virtual absl::Status InsertChildLinks(std::span<ChildLinkRecord> links) {
    (void)links;
    return FanOutUnimplemented();
  }
  // The links of `parent` in child_index order (empty if none).
  virtual absl::StatusOr<std::vector<ChildLinkRecord>> GetChildLinks(
      const TaskKey& parent, Fields fields) {
    (void)parent;
    (void)fields;
    return FanOutUnimplemented();
  }
  // The links of `parent` by status, each count stopping at `up_to` (all
  // zero when it is 0 or less): asking whether any link is pending or
  // failed costs a seek per status however many children the parent has.
  virtual absl::StatusOr<ChildCounts> CountChildLinks(const TaskKey& parent,
                                                      int64_t up_to) {
    (void)parent;
    (void)up_to;
    return FanOutUnimplemented();
  }
  // Applies each settlement whose link exists and is still pending (status,
  // output, error, cascaded); may move from `settlements`. Returns, per
  // settlement, whether it applied. A repeated (parent, child_index) in one
  // call applies only its first occurrence. Locks the links it applies.
  virtual absl::StatusOr<std::vector<bool>> SettleChildLinks(
      std::span<ChildSettlement> settlements) {
    (void)settlements;
    return FanOutUnimplemented();
  }
  // Every pending link of `parent` becomes kCancelled with cascaded = false
  // and `error`; returns how many.
  virtual absl::StatusOr<int64_t> CancelPendingChildLinks(
      const TaskKey& parent, std::string_view error) {
    (void)parent;
    (void)error;
    return FanOutUnimplemented();
  }
  // Up to `limit` pending links whose pending_since is before
  // `pending_before`, oldest first; sets their pending_since to `now` (so
  // full pages rotate across sweeps). Skips links other transactions hold.
  virtual absl::StatusOr<std::vector<ChildLinkRecord>> TakeStaleChildLinks(
      absl::Time pending_before, absl::Time now, int limit) {
    (void)pending_before;
    (void)now;
    (void)limit;
    return FanOutUnimplemented();
  }
  // Up to `limit` cancelled links with cascaded = false (a cancel still owed
  // to the child), under a parent in any state.
  virtual absl::StatusOr<std::vector<ChildLinkRecord>> FindUncascadedChildLinks(
      int limit) {
    (void)limit;
    return FanOutUnimplemented();
  }
  // Sets cascaded on these links; unknown links are skipped.
  virtual absl::Status MarkChildLinksCascaded(
      std::span<const ChildLinkRecord> links) {
    (void)links;
    return FanOutUnimplemented();
  }
  // Appends child reports (to this, the child's, store); returns the ids
  // assigned, in order (increasing).
  virtual absl::StatusOr<std::vector<int64_t>> AppendChildReports(
      std::span<const ChildReport> reports) {
    (void)reports;
    return FanOutUnimplemented();
  }
  // Up to `limit` child reports with ids greater than `after_id`, by id,
  // without deleting them (the relay deletes after applying elsewhere).
  virtual absl::StatusOr<std::vector<ChildReport>> PeekChildReports(
      int64_t after_id, int limit) {
    (void)after_id;
    (void)limit;
    return FanOutUnimplemented();
  }
  // Deletes child reports; unknown ids are skipped.
  virtual absl::Status DeleteChildReports(std::span<const int64_t> report_ids) {
    (void)report_ids;
    return FanOutUnimplemented();
  }
  virtual absl::StatusOr<int64_t> CountChildReports() {
    return FanOutUnimplemented();
  }

  // --- Host transactions ----------------------------------------------------

  // Runs `write` on the connection this transaction runs on, so what it
  // writes commits or rolls back with the transaction. Its failure is
  // returned and latched like any call's (the transaction is then unusable);
  // a `write` that ended the transaction fails it with kFailedPrecondition.
  // The default passes a NativeConnection with a null handle.
  virtual absl::Status RunNative(const NativeWrite& write) {
    return write(NativeConnection{});
  }

  // --- Queues (pgmq semantics) -------------------------------------------
  // kNotFound for a queue that does not exist.

  // Inserts messages in order with enqueued_at = now; returns their ids,
  // which increase within a queue and are never reused once committed. Each
  // message also gets a FIFO sequence number, increasing in send order. May
  // move from `messages`.
  virtual absl::StatusOr<std::vector<int64_t>> SendMessages(
      std::string_view queue, std::span<OutgoingMessage> messages,
      absl::Time now) = 0;
  // Takes up to `limit` messages visible at `now` (visible_at <= now) in
  // claim order, (priority desc, sequence asc), skipping any another
  // transaction holds; sets each one's visible_at to `visible_until` and adds
  // 1 to its read_count. Returns none while the queue is paused. With
  // kNoPayloads the bodies are left empty. Its cost must not grow with the
  // number of messages in the queue (an index on the claim order).
  virtual absl::StatusOr<std::vector<MessageRecord>> ReadMessages(
      std::string_view queue, absl::Time now, int limit,
      absl::Time visible_until, Fields fields) = 0;
  // The earliest visible_at after `now` among live messages, if any (an idle
  // worker sleeps until then). Paused or not.
  virtual absl::StatusOr<std::optional<absl::Time>> NextVisibleAt(
      std::string_view queue, absl::Time now) = 0;
  // Sets visible_at of live messages (and with to_tail a new sequence
  // number, later than every other); ids not live are skipped.
  virtual absl::Status SetVisibility(
      std::string_view queue, std::span<const VisibilityUpdate> updates) = 0;
  // Moves live messages to the archive; ids not live are skipped.
  virtual absl::Status ArchiveMessages(std::string_view queue,
                                       std::span<const int64_t> message_ids,
                                       absl::Time now) = 0;
  // (interface v10) Deletes live messages, keeping no copy (pgmq's delete);
  // ids not live (archived ones included) are skipped.
  virtual absl::Status DeleteMessages(std::string_view queue,
                                      std::span<const int64_t> message_ids) = 0;
  // Finds a message, live or archived.
  virtual absl::StatusOr<std::optional<MessageLocation>> LookupMessage(
      std::string_view queue, int64_t message_id) = 0;

  // --- Workers ------------------------------------------------------------

  virtual absl::Status UpsertWorker(const WorkerRecord& worker) = 0;
  virtual absl::StatusOr<std::vector<WorkerRecord>> ListWorkers() = 0;
  // Deletes up to `limit` workers that showed no sign of life since
  // `inactive_before`: their last heartbeat and their stop (if any) are both
  // earlier; which ones, when more qualify, is unspecified. Skips rows other
  // transactions hold. Returns how many it deleted.
  virtual absl::StatusOr<int> DeleteInactiveWorkers(absl::Time inactive_before,
                                                    int limit) = 0;

  // --- Schedules (interface v6) --------------------------------------------

  // Inserts (group, name), or replaces an existing row's definition and
  // updated_at; an existing row keeps its cursor and created_at.
  virtual absl::Status PutSchedule(const ScheduleRecord& schedule) = 0;
  // The schedules of `group` (of every group if empty), by (group, name).
  virtual absl::StatusOr<std::vector<ScheduleRecord>> ListSchedules(
      std::string_view group) = 0;
  // Deletes (group, name). False if absent.
  virtual absl::StatusOr<bool> DeleteSchedule(std::string_view group,
                                              std::string_view name) = 0;
  // Compare-and-set: sets the cursor of (group, name) to `next` if it is
  // still `expected`. Returns whether it applied (false for an absent row).
  // On Postgres a concurrent setter waits for the first to end, then sees
  // its cursor: two schedulers never both move the same cursor.
  virtual absl::StatusOr<bool> AdvanceScheduleCursor(std::string_view group,
                                                     std::string_view name,
                                                     absl::Time expected,
                                                     absl::Time next) = 0;
};

// Stops watching a queue when destroyed; destruction waits for a poke in
// progress, so no poke runs after it. Destroy it before its backend.
class QueueWatch {
 public:
  virtual ~QueueWatch() = default;
};

class Backend {
 public:
  // The interface version this header describes. A backend built against an
  // older header reports that version and the engine refuses it.
  static constexpr int kInterfaceVersion = 12;

  virtual ~Backend() = default;
  virtual int interface_version() const { return kInterfaceVersion; }
  // "memory", "sqlite", ...
  virtual std::string_view name() const = 0;
  // Starts a read-write transaction. May block while another process or
  // thread holds the write lock; kUnavailable if it can't start;
  // kFailedPrecondition if this thread already has one open.
  virtual absl::StatusOr<std::unique_ptr<Transaction>> Begin() = 0;
  // Asks to be poked, from any thread, soon after a transaction anywhere
  // (another process or machine included) commits a message of `queue` that
  // is visible at once. Pokes may be spurious or coalesced; a poke is a hint
  // to claim, never a promise. Returns nullptr when the backend has no such
  // signal; workers then rely on in-process signals and polling.
  virtual std::unique_ptr<QueueWatch> WatchQueue(std::string_view queue,
                                                 std::function<void()> poke) {
    (void)queue;
    (void)poke;
    return nullptr;
  }
};

}  // namespace sluice

#endif  // SLUICE_BACKEND_H_
