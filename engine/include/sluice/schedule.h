// Cron schedules: start a job or a flow at the fire times of a cron
// expression, exactly once per (schedule, fire time), however many
// schedulers run (docs/user-guide.md, "Schedules").
//
//   sluice::ScheduleSpec nightly{.name = "nightly_report",
//                                .target = "build_report",
//                                .cron = "0 2 * * *",
//                                .time_zone = "Europe/Berlin",
//                                .payload = sluice::Json{{"kind", "daily"}}};
//   engine->UpsertSchedules("reports", {nightly});
//   auto scheduler = engine->StartScheduler();
//
// UpsertSchedules reconciles one group: the group then holds exactly the
// specs given; other groups are untouched.
#ifndef SLUICE_SCHEDULE_H_
#define SLUICE_SCHEDULE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "sluice/job.h"
#include "sluice/json.h"

namespace sluice {

// What a scheduler does with fire times it finds more than
// ScheduleSpec::misfire_grace in the past (the scheduler was down, or the
// schedule was paused by a failing target). Fire times within the grace are
// on time and each starts its own run under either policy.
enum class Misfire {
  kSkip,     // missed fire times start nothing
  kRunOnce,  // all missed fire times together start one run
};
std::string_view ToString(Misfire misfire);

struct ScheduleSpec {
  // Unique within its group: 1..100 characters of [A-Za-z0-9_.:-].
  std::string name;
  // The job or flow alias to start (as Engine::StartRun resolves it).
  std::string target;
  // 5 fields (minute hour day-of-month month day-of-week), 6 with seconds
  // first, or @yearly @annually @monthly @weekly @daily @midnight @hourly.
  std::string cron;
  // An IANA time zone name; fire times are wall times there.
  std::string time_zone = "UTC";
  // The job payload or flow input of every run.
  Json payload;
  // Per-run options: priority, max_attempts, backoff, timeout and metadata.
  // id, delay, run_at, dedupe and keep are refused (the scheduler sets the
  // id: "schedule:<group>/<name>@<fire time>").
  EnqueueOptions options;
  Misfire misfire = Misfire::kSkip;
  absl::Duration misfire_grace = absl::Minutes(1);
};

// A stored schedule and when it fires next.
struct ScheduleInfo {
  std::string group;
  ScheduleSpec spec;
  // Every fire time at or before this is handled.
  absl::Time cursor;
  // The first fire time after the cursor; unset for an unreadable row.
  std::optional<absl::Time> next_fire;
  absl::Time created_at;
  absl::Time updated_at;
  // Set when the stored row does not decode; such a schedule never fires.
  std::string unreadable;
};

// What one scheduler pass did.
struct SchedulerPass {
  int runs_started = 0;  // new runs (duplicates of a fire time excluded)
  // Schedules whose missed fire times this pass handled (skipped, or
  // started as one run).
  int misfires = 0;
  // Schedules that could not fire (a target not deployed, a stored row
  // that does not decode); each is logged and retried next pass.
  int errors = 0;
  // The earliest fire time still to come, over every schedule.
  std::optional<absl::Time> next_fire;
};

struct SchedulerOptions {
  // The longest the scheduler sleeps between passes: it also learns of
  // schedules other processes add, and of a manual clock moved forward.
  absl::Duration poll_interval = absl::Seconds(1);
};

// A background scheduler (Engine::StartScheduler): passes over every
// schedule, then sleeps until the next fire time by the engine's clock (at
// most poll_interval). Destroying it stops it. Thread-safe.
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Runs a pass soon (after UpsertSchedules, or a manual clock moved).
  virtual void Wake() = 0;
  // Stops and waits for the current pass to end.
  virtual void Stop() = 0;
  // Completed passes so far.
  virtual int64_t passes() const = 0;
};

}  // namespace sluice

#endif  // SLUICE_SCHEDULE_H_
