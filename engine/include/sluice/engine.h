// The engine: deploys flows, starts runs, and moves tasks through their
// lifecycle on a storage backend.
//
//   auto backend = sluice::OpenBackend("sqlite:app.db");
//   auto engine = sluice::Engine::Create(*backend);
//   (*engine)->Deploy(flow);
//   absl::StatusOr<sluice::RunId> run = (*engine)->StartRun("resize_album",
//   input); auto worker = (*engine)->StartWorker(flow, {.concurrency = 8});
//
// Every call validates its input before touching the backend and returns
// kInvalidArgument, naming the problem, without changing anything.
// The task path (Claim, FinishTasks, ApplyReports, RecoverStalledTasks) is
// what workers call; tests drive it directly under a ManualClock.
//
// Thread-safety: safe for concurrent use.
#ifndef SLUICE_ENGINE_H_
#define SLUICE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sluice/backend.h"
#include "sluice/clock.h"
#include "sluice/events.h"
#include "sluice/fan_out.h"
#include "sluice/flow.h"
#include "sluice/job.h"
#include "sluice/json.h"
#include "sluice/metrics.h"
#include "sluice/records.h"
#include "sluice/schedule.h"
#include "sluice/task_context.h"
#include "sluice/task_path.h"
#include "sluice/tracing.h"
#include "sluice/worker.h"

namespace sluice {

struct EngineOptions {
  Clock* clock = Clock::Real();
  LogSink log;  // defaults to stderr for warnings and errors
  // Added to a task's effective timeout for its message's visibility.
  absl::Duration claim_grace = absl::Seconds(2);
  // Added to a task's effective timeout before stall recovery takes it back.
  absl::Duration recovery_grace = absl::Seconds(30);
  // Times stall recovery requeues a task before failing it.
  int stall_budget = 3;
  // The reconcile path applies reports older than this.
  absl::Duration report_stale_after = absl::Seconds(10);
  size_t max_payload_bytes = kMaxPayloadBytes;
  // A worker's row is deleted once it has shown no sign of life (heartbeat
  // or stop) for this long: workers prune at start and in every sweep.
  // Keep it well above heartbeat intervals and Coverage()'s liveness;
  // InfiniteDuration() keeps every row.
  absl::Duration worker_retention = absl::Hours(1);
  // Makes the id of each new run; unset means RunId::Random() (time-ordered,
  // from the wall clock and a random source). A deterministic simulation sets
  // a seeded source so that the same seed repeats exactly. Called once for
  // each run a call plans, even when the call plans again (its alias moved),
  // from any thread that starts runs, possibly at once: it must be
  // thread-safe.
  std::function<RunId()> run_id_source;
  // Fan-out children nest at most this deep (a top-level run's children
  // are at depth 1); a FanOut past it fails its task without retry.
  int max_fan_out_depth = 8;
  // Cross-store children (ChildSpec::store): the name of this engine's store
  // as its peers know it, and the other stores children may live in, by
  // name. This engine creates children there, relays their reports back,
  // repairs lost ones and cascades cancels to them; the child store's own
  // engine needs neither. Names are 1..64 characters of [A-Za-z0-9_.:-];
  // store_name is required when `stores` is set, and every backend must
  // outlive the engine (docs/decisions/0039-cross-store-children.md).
  std::string store_name;
  std::map<std::string, Backend*> stores;
  // Development databases only: Deploy of a changed shape under a stored
  // slug fences off the old workers, deletes the slug's runs and recompiles
  // (DeployOutcome::kRecompiled) instead of failing. Never in production.
  bool development_recompile = false;
  // Hears span starts and ends of workers' claims, handlers and result
  // recording, and supplies the host's current traceparent to runs started
  // without one (sluice/tracing.h). Null: no tracing. Shared because a
  // worker's abandoned handler thread may outlive the engine.
  std::shared_ptr<Tracer> tracer;
};

// One version (concrete slug) of an alias.
struct VersionInfo {
  std::string slug;
  bool active = false;
  absl::Time created_at;
  RunCounts runs;
};

enum class DeployOutcome {
  kCompiled,    // the flow was new and is now stored
  kVerified,    // the stored flow is identical
  kRecompiled,  // development only: a changed shape replaced the stored one
};
std::string_view ToString(DeployOutcome outcome);

// A run with its step states, tasks and attempts ledger.
struct RunView {
  RunRecord run;
  std::vector<StepStateRecord> steps;
  std::vector<TaskRecord> tasks;
  std::vector<AttemptRecord> attempts;
};

// What Engine::Signal did.
enum class SignalOutcome {
  // The Wait step's task completed with the payload; its run goes on.
  kDelivered,
  // The step has not started yet (its dependencies are not all done): the
  // payload is kept, and the step completes with it as soon as it starts.
  kHeld,
  // An earlier signal was delivered or held; this one changed nothing.
  kAlreadySignalled,
};
std::string_view ToString(SignalOutcome outcome);

// How CancelRun treats tasks already started.
enum class CancelMode {
  // Queued tasks are cancelled at once; started ones are asked to stop (their
  // handler's cancel token fires at the next heartbeat) and what they report
  // is recorded. The run ends cancelled once none is started, unless its
  // last task completed it first.
  kRequest,
  // Every unfinished task is cancelled at once and the run ends now; late
  // results are stale.
  kImmediate,
};

// Which runs ListRuns returns, and where a page starts.
struct RunFilter {
  std::vector<std::string> names;   // flow or job names; empty: all
  std::string queue;                // runs of flows using this queue; "": all
  std::vector<RunStatus> statuses;  // empty: all
  Json metadata;                    // an object runs' metadata must contain
  RunQuery::OrderBy order_by = RunQuery::OrderBy::kStartedAt;
  bool newest_first = true;
  std::optional<absl::Time> from;  // ordering time in [from, to)
  std::optional<absl::Time> to;
  int limit = 50;  // 1..10000
  // From a previous page of the same filter; anything else is
  // kInvalidArgument.
  std::string cursor;
};
struct RunPage {
  std::vector<RunRecord> runs;
  std::string cursor;  // empty when there is no next page
};

// A queue's task counts and whether it is paused.
struct QueueState {
  std::string queue;
  bool paused = false;
  QueueCounts counts;
};

// A registered queue for operators (`sluice status`): its state and counts
// (QueueCounts::oldest_waiting_since says how long its oldest waiting task
// has waited) and the live workers registered on it.
struct QueueStatus {
  QueueState state;
  int live_workers = 0;
};

// What one worker serves: one queue, and the steps of each served flow or
// job that run on it (docs/decisions/0024).
//
//   // A flow whose steps share one queue:
//   WorkerSpec().Serve(flow)
//   // The steps of `album` on one of its step queues:
//   WorkerSpec().Queue("album__resize").Serve(album)
//   // Just these steps (their one queue):
//   WorkerSpec().Serve(album, {"resize"})
//   // A shared queue: a job and one step of a flow.
//   WorkerSpec().Queue("mail").Serve(job).Serve(digest, {"send"})
//
// Without Queue(), the queue is the one every chosen step uses. Serving a
// flow with no chosen step on the queue, naming a step that is not on it or
// not in the flow, or chosen steps on several queues, is kInvalidArgument
// from StartWorker before anything is deployed or started.
class WorkerSpec {
 public:
  struct Served {
    const Flow* flow = nullptr;
    // Unset: every step of the flow on the worker's queue.
    std::optional<std::vector<std::string>> steps;
  };

  // The one queue the worker reads.
  WorkerSpec& Queue(std::string name);
  WorkerSpec& Serve(const Flow& flow);
  // Only these steps of `flow`; each must be on the worker's queue.
  WorkerSpec& Serve(const Flow& flow, std::vector<std::string> steps);
  WorkerSpec& Serve(const Job& job);

  const std::string& queue() const { return queue_; }
  const std::vector<Served>& served() const { return served_; }

 private:
  std::string queue_;
  std::vector<Served> served_;
};

// One (flow, step) of an active version on a queue, and how many live
// workers run its handler there.
struct StepCoverage {
  std::string alias;      // the alias whose active version this is
  std::string flow_slug;  // the concrete slug (the active version)
  std::string step_slug;
  int live_workers = 0;  // 0: nobody serves it; its tasks wait
};

// A queue of an active version and the live workers serving it.
struct QueueCoverage {
  std::string queue;
  std::vector<std::string> flows;   // active concrete slugs using the queue
  std::vector<StepCoverage> steps;  // each flow's steps on it, in order
  int live_workers = 0;             // live workers registered on the queue

  // The steps on this queue that no live worker serves.
  std::vector<const StepCoverage*> Unserved() const;
};

class HostTransaction;  // sluice/host_transaction.h

class Engine {
 public:
  // The backend must outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      Backend& backend, EngineOptions options = {});
  ~Engine();

  // Compiles `flow` into the backend, or verifies the stored copy matches.
  // A stored flow that differs fails with kFailedPrecondition listing every
  // difference, and changes nothing. Deploy a changed shape under a new slug
  // (with development_recompile on, it is recompiled instead: kRecompiled).
  // A new slug joins the alias flow.alias() for good, and activates it if
  // the alias is new; later versions stay inactive until Activate. A stored
  // slug deployed under another alias fails with kFailedPrecondition.
  absl::StatusOr<DeployOutcome> Deploy(const Flow& flow);

  // Deploys a job's one-step flow (as Deploy(job.flow())).
  absl::StatusOr<DeployOutcome> Deploy(const Job& job);

  // --- Versions and aliases ----------------------------------------------

  // Makes `slug` the active version of `alias` if `expected_current` is the
  // active one now (compare-and-swap). kFailedPrecondition on a stale
  // expectation or a slug that is not a member of the alias; kNotFound for
  // an unknown alias.
  absl::Status Activate(std::string_view alias, std::string_view slug,
                        std::string_view expected_current);
  // Every version of `alias`, oldest first, with its run counts.
  absl::StatusOr<std::vector<VersionInfo>> ListVersions(std::string_view alias);
  // Deletes an inactive version without runs, and its private queues.
  absl::Status DeleteVersion(std::string_view slug);
  // Starts a run of one concrete version, whichever is active.
  absl::StatusOr<EnqueueResult> StartRunBySlug(
      std::string_view slug, const Json& input,
      const EnqueueOptions& options = {});

  // Starts a run of the active version of the alias `flow_slug` (a flow
  // deployed without an alias is its own alias), resolved in the
  // transaction that creates the run; the run keeps the concrete slug. An
  // unknown alias is kNotFound, never a slug of that name. `input` must fit
  // max_payload_bytes, and be an array if the flow has a root map step.
  // StartRuns and Enqueue(job_name) resolve aliases the same way;
  // Enqueue(job) starts the job's own slug.
  absl::StatusOr<RunId> StartRun(std::string_view flow_slug, const Json& input);
  // As above, with options (priority, delay or run_at, an id, metadata,
  // dedupe, retention, attempt overrides).
  absl::StatusOr<EnqueueResult> StartRun(std::string_view flow_slug,
                                         const Json& input,
                                         const EnqueueOptions& options);
  // Starts many runs in one transaction: all or none.
  absl::StatusOr<std::vector<RunId>> StartRuns(std::string_view flow_slug,
                                               std::span<const Json> inputs);

  // Enqueues a job (deployed by Deploy(job) or a worker). The decision order
  // for ids and dedupe is effect-mq's (docs/user-guide.md, "Jobs").
  absl::StatusOr<EnqueueResult> Enqueue(const Job& job, const Json& payload,
                                        const EnqueueOptions& options = {});
  absl::StatusOr<EnqueueResult> Enqueue(std::string_view job_name,
                                        const Json& payload,
                                        const EnqueueOptions& options = {});
  struct EnqueueItem {
    Json payload;
    EnqueueOptions options;
  };
  // One result per item, in order; each item as Enqueue. An empty list
  // returns an empty list.
  absl::StatusOr<std::vector<EnqueueResult>> EnqueueMany(
      std::string_view job_name, std::span<const EnqueueItem> items);

  // --- Signals (Wait steps) ------------------------------------------------

  // Delivers `payload` to the Wait step `step` of a run: it becomes the
  // step's output and the run goes on (dependents start). Idempotent per
  // (run, step): a second signal returns kAlreadySignalled and changes
  // nothing. A signal that comes before the step has started is held (see
  // SignalOutcome::kHeld). Errors change nothing: kNotFound for an unknown
  // run, or a step its flow does not have; kInvalidArgument for a step that
  // is not a Wait step, a nil run id, or a payload that is not valid JSON
  // within max_payload_bytes (or not an array, for a Wait step feeding a
  // map step); kFailedPrecondition for a run that ended or is being
  // cancelled, or a step that already ended another way (timed out,
  // skipped); kAborted if its timeout fired at the same moment (retry).
  absl::StatusOr<SignalOutcome> Signal(const RunId& run_id,
                                       std::string_view step,
                                       const Json& payload);

  // Cancels a started run. kFailedPrecondition if the run already ended.
  absl::Status CancelRun(const RunId& run_id,
                         CancelMode mode = CancelMode::kRequest);
  // Gives a failed or cancelled run a fresh attempt budget for its failed
  // and cancelled tasks and resumes it from the steps that did not complete;
  // completed steps keep their outputs. kFailedPrecondition for a run that is
  // started or completed; kNotFound for an unknown id.
  absl::Status RetryRun(const RunId& run_id);
  // Deletes a run none of whose tasks is started (queued, delayed or ended).
  // kFailedPrecondition if one is started; kNotFound for an unknown id.
  absl::Status RemoveRun(const RunId& run_id);

  // A paused queue's tasks are not claimed. kNotFound for an unknown queue.
  absl::Status PauseQueue(std::string_view queue);
  absl::Status ResumeQueue(std::string_view queue);
  absl::StatusOr<QueueState> Counts(std::string_view queue);

  absl::StatusOr<RunView> GetRun(const RunId& run_id);
  // Deletes an ended run with its step states, tasks and their messages.
  // kFailedPrecondition for a run that is still started (cancel it first).
  absl::Status DeleteRun(const RunId& run_id);
  // Deletes up to `limit` runs that ended before `finished_before`, oldest
  // first, in one transaction; never a started run. Returns how many; call
  // again until it returns fewer than `limit`.
  absl::StatusOr<int> PruneRuns(absl::Time finished_before, int limit);
  absl::StatusOr<std::vector<RunRecord>> ListRuns(std::string_view flow_slug,
                                                  int limit);
  // Runs matching `filter`, a page at a time.
  absl::StatusOr<RunPage> ListRuns(const RunFilter& filter);
  // Retention: deletes up to `limit` (1..10000) ended runs that their keep
  // rules (FlowOptions::keep, EnqueueOptions::keep) no longer keep, and up
  // to `limit` dedupe entries whose throttle window ended, in one
  // transaction. Returns how many runs it deleted; call again until it
  // returns fewer than `limit`. Workers' sweeps call it. Never deletes a run
  // that has not ended.
  absl::StatusOr<int> ApplyRetention(int limit);

  // --- The task path -------------------------------------------------------

  // Reads up to `limit` messages from one queue, classifies the whole batch,
  // then claims: queued tasks this worker serves are started (attempt + 1)
  // with their message hidden for the effective timeout; started ones are
  // benign duplicates; terminal ones are archived. A message with no task, on
  // the wrong queue, or of a step the worker does not serve fails the call
  // with kFailedPrecondition, claims nothing and leaves the batch visible.
  absl::StatusOr<std::vector<ClaimedTask>> Claim(const ClaimRequest& request);
  // Claim, and when it took nothing, when to look again.
  absl::StatusOr<ClaimBatch> ClaimWithHint(const ClaimRequest& request);

  // Records handler results in one transaction. Completions and final
  // failures append outbox reports; apply them with ApplyReports.
  absl::StatusOr<FinishOutcome> FinishTasks(std::span<const TaskResult> results,
                                            FinishOptions options = {});

  // Applies reports (the push path): moves step counters, starts dependents,
  // settles runs. Reports already applied are skipped.
  absl::Status ApplyReports(std::span<const int64_t> report_ids);
  // The reconcile path: applies up to `limit` reports older than
  // report_stale_after. Returns how many it applied.
  absl::StatusOr<int> ApplyStaleReports(int limit);

  // --- Fan-out children (sluice/fan_out.h) ---
  // The relay: applies up to `limit` child reports to their parents' links
  // (each at most once), settles every parent whose children all ended (or,
  // fail-fast, one failed), moves its run on, then delivers the cancels
  // owed to children. Workers call it after each result and in every
  // sweep. Returns how many reports it consumed.
  absl::StatusOr<int> RelayChildReports(int limit = 1000);
  // The sweeper's repair of links pending longer than report_stale_after:
  // a missing child is created again (while its parent waits), an ended
  // child's outcome is settled as its report would have. Returns how many
  // links it looked at.
  absl::StatusOr<int> RepairChildLinks(int limit = 1000);

  // Requeues up to `limit` started tasks whose lease ran out; a task over its
  // stall budget or out of attempts fails through when_exhausted. Returns the
  // number of tasks handled.
  absl::StatusOr<int> RecoverStalledTasks(int limit);

  // Extends the leases of claimed tasks. Returns, per lease, whether the
  // attempt still owns its task (kOwned, extended), no longer does (kLost:
  // stop the handler), or owns it but its run asked it to stop
  // (kCancelRequested: not extended; fire the handler's cancel token).
  absl::StatusOr<std::vector<LeaseState>> ExtendLeases(
      std::span<const Lease> leases);
  // Gives claimed tasks whose handlers never started back to their queue
  // (graceful shutdown): no attempt is used, their place in line is kept,
  // and the ledger records `released`. Stale leases are skipped.
  absl::Status ReleaseTasks(std::span<const Lease> leases);

  // --- Workers -----------------------------------------------------------

  // Deploys `flow` (Deploy), then registers and starts a worker serving the
  // flow's queue (kInvalidArgument if its steps use several queues: start a
  // worker per queue with a WorkerSpec). Fails without registering if
  // deployment fails.
  absl::StatusOr<std::unique_ptr<Worker>> StartWorker(
      const Flow& flow, WorkerOptions options = {});
  // Deploys every definition, then starts one worker serving the chosen
  // steps on its one queue (see WorkerSpec for what is refused). It
  // registers with every (flow, steps) it serves (WorkerRecord::served).
  absl::StatusOr<std::unique_ptr<Worker>> StartWorker(
      const WorkerSpec& spec, WorkerOptions options = {});
  // Deletes up to `limit` workers' rows that showed no sign of life
  // (heartbeat or stop) since `inactive_before`, in one transaction. Returns
  // how many; call again until it returns fewer than `limit`. A live worker
  // whose row was pruned writes it again at its next heartbeat.
  absl::StatusOr<int> PruneWorkers(absl::Time inactive_before, int limit);
  // Every queue of every active version (an alias's active slug; a flow
  // whose alias has no row counts as its own active version), with the live
  // workers per (flow, step) there. A worker is live if it has not stopped
  // and heartbeated within `liveness`; it serves the (flow, step) pairs its
  // registration lists (WorkerRecord::served; a row without them serves
  // every step of its flow on its queue). Inactive versions are not listed,
  // even while their runs drain (see ListVersions for those). Queues in
  // name order.
  absl::StatusOr<std::vector<QueueCoverage>> Coverage(
      absl::Duration liveness = absl::Seconds(30));

  // --- Operator views -----------------------------------------------------

  // Every registered queue, by name, with its counts at the engine clock's
  // now, paused flag and live workers (not stopped, heartbeated within
  // `liveness`, which must be positive). Read in one transaction.
  absl::StatusOr<std::vector<QueueStatus>> ListQueueStatus(
      absl::Duration liveness = absl::Seconds(30));
  // How many ended runs finished before `finished_before`: what PruneRuns
  // with that cutoff would delete, counted a page per transaction without
  // reading payloads (a progress total; runs may end or go meanwhile).
  absl::StatusOr<int64_t> CountPrunableRuns(absl::Time finished_before);

  // Starts runs and enqueues jobs inside a host's own transaction, through
  // a backend borrowed on the host's connection (sluice/host_transaction.h).
  HostTransaction WithHostTransaction(Backend& borrowed);

  // Wakes workers idle on `queue` (all queues if empty).
  void Wake(std::string_view queue = "");

  // --- Metrics -----------------------------------------------------------

  // This process's counters and histograms (since the engine was created),
  // with each registered queue's task counts and the outbox backlog read
  // from the store now. A store that does not answer leaves those gauges
  // unset and says why in store_error; the counters are still filled in.
  // Render it with WritePrometheusText (sluice/metrics.h).
  MetricsSnapshot Metrics();

  // --- Schedules (sluice/schedule.h) ---------------------------------------

  // Reconciles `group` (1..100 characters of [A-Za-z0-9_.:-]) to exactly
  // `specs`, in one transaction: new names are inserted (their cursor is now,
  // so nothing earlier fires), changed ones updated (keeping their cursor),
  // and the group's schedules not named are deleted. Other groups are never
  // touched. Every spec is checked first (name, target, cron expression,
  // time zone, payload, options; names unique): a bad one fails the call
  // with kInvalidArgument naming the group, the schedule and the problem,
  // and nothing changes. A target need not be deployed yet; a schedule whose
  // target is missing logs a warning at each fire time and retries.
  absl::Status UpsertSchedules(std::string_view group,
                               std::span<const ScheduleSpec> specs);
  // The schedules of `group` (of every group if empty), by (group, name),
  // each with its next fire time.
  absl::StatusOr<std::vector<ScheduleInfo>> ListSchedules(
      std::string_view group = "");
  // One scheduler pass at `now` (tests pass a manual clock's time): for every
  // schedule, starts one run per fire time in (cursor, now], applying the
  // misfire policy to fire times older than its grace. Each run is started
  // in the transaction that moves the schedule's cursor past its fire time
  // by compare-and-set, with the run id key "schedule:<group>/<name>@<fire
  // time>", so any number of schedulers, in any processes, start each
  // (schedule, fire time) exactly once. A schedule another scheduler is
  // handling is left to it. Errors of one schedule are logged and do not
  // stop the others.
  absl::StatusOr<SchedulerPass> RunSchedulerOnce(absl::Time now);
  // Starts a background scheduler (see Scheduler). kInvalidArgument for a
  // poll_interval that is not positive.
  absl::StatusOr<std::unique_ptr<Scheduler>> StartScheduler(
      SchedulerOptions options = {});

  // --- Events ------------------------------------------------------------

  // Returns a subscription id for Unsubscribe.
  int Subscribe(EventHandler handler);
  void Unsubscribe(int subscription_id);

  Clock& clock() const;
  Backend& backend() const;
  const EngineOptions& options() const;

  class Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  // ApplyReports without the relay; true if a child report was written.
  absl::StatusOr<bool> ApplyReportsOnly(std::span<const int64_t> report_ids);
  // The relay's push path, after an apply wrote child reports.
  void RelayAfterApply();
  // Records one FanOut result (fan_out.cc) into `outcome` at `index`.
  absl::Status FinishFanOut(const TaskResult& result, size_t index,
                            FinishOutcome& outcome);
  // CancelRun without the relay.
  absl::Status CancelRunOnly(const RunId& run_id, CancelMode mode);
  // One pass of the relay over up to `limit` reports; how many it consumed.
  absl::StatusOr<int> RelayOnce(int limit);
  // Delivers up to `limit` cancels owed to children; how many.
  absl::StatusOr<int> CascadeChildCancels(int limit);
  // One relay pass over the reports of children in the peer store `store`
  // whose parents live here (fan_out_stores.cc); how many it consumed.
  absl::StatusOr<int> RelayPeerOnce(const std::string& store, Engine& peer,
                                    int limit);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_H_
