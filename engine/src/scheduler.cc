// The scheduler: RunSchedulerOnce and the background Scheduler
// (docs/decisions/0031-cron-schedules.md).
//
// Exactly once per (schedule, fire time) comes from the store, not from a
// lock held over time: the run is started in the transaction that moves the
// schedule's cursor from the value the scheduler read to the fire time, by
// compare-and-set. Of several schedulers that read the same cursor, one
// moves it and commits its run; the others' compare-and-set finds the cursor
// moved and their transactions roll back. The run's id key
// "schedule:<group>/<name>@<fire time>" (unique per flow in the store) is
// a second guard: a run for that fire time can't be started twice.
#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine_impl.h"
#include "schedule_spec.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

std::string FireTimeText(absl::Time fire) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", fire, absl::UTCTimeZone());
}

// One schedule's pass.
class ScheduleFirer {
 public:
  ScheduleFirer(Engine::Impl& impl, const ScheduleRecord& record,
                CompiledSchedule schedule, SchedulerPass& pass)
      : impl_(impl),
        record_(record),
        schedule_(std::move(schedule)),
        cursor_(record.cursor),
        pass_(pass) {}

  absl::Status Run(absl::Time now) {
    std::optional<absl::Time> next = Next(cursor_);
    if (next.has_value() && *next <= now - schedule_.spec.misfire_grace) {
      // Fire times at or before now - grace were missed: one run for all of
      // them (named by the first), or none; the cursor passes them all.
      const absl::Time handled = now - schedule_.spec.misfire_grace;
      std::optional<absl::Time> fire;
      if (schedule_.spec.misfire == Misfire::kRunOnce) fire = *next;
      SLUICE_ASSIGN_OR_RETURN(bool moved, Advance(handled, fire));
      if (!moved) return absl::OkStatus();  // another scheduler has it
      ++pass_.misfires;
      next = Next(cursor_);
    }
    while (next.has_value() && *next <= now) {
      SLUICE_ASSIGN_OR_RETURN(bool moved, Advance(*next, *next));
      if (!moved) return absl::OkStatus();
      next = Next(cursor_);
    }
    if (next.has_value() &&
        (!pass_.next_fire.has_value() || *next < *pass_.next_fire)) {
      pass_.next_fire = next;
    }
    return absl::OkStatus();
  }

 private:
  std::optional<absl::Time> Next(absl::Time after) const {
    return schedule_.cron.NextAfter(after, schedule_.zone);
  }

  // Moves the cursor to `to`, starting the run of `fire` (if set) in the
  // same transaction. False if another scheduler moved the cursor first.
  absl::StatusOr<bool> Advance(absl::Time to, std::optional<absl::Time> fire) {
    bool lost = false;
    auto move_cursor = [&](Transaction& tx) -> absl::Status {
      SLUICE_ASSIGN_OR_RETURN(
          bool moved,
          tx.AdvanceScheduleCursor(record_.group, record_.name, cursor_, to));
      if (!moved) {
        lost = true;
        return absl::AbortedError("the schedule's cursor moved on");
      }
      return absl::OkStatus();
    };
    absl::Status status;
    if (fire.has_value()) {
      Engine::EnqueueItem item{schedule_.spec.payload, RunOptions(*fire)};
      absl::StatusOr<std::vector<EnqueueResult>> started = impl_.EnqueueItems(
          schedule_.spec.target, Engine::Impl::Target::kAlias,
          /*as_job=*/false, std::span(&item, 1), /*host=*/nullptr, move_cursor);
      status = started.status();
      if (started.ok() && !started->front().duplicate) ++pass_.runs_started;
    } else {
      status = Standalone(move_cursor);
    }
    if (lost) return false;
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          StrCat("schedule \"", record_.group, "/", record_.name, "\" at ",
                 FireTimeText(fire.value_or(to)), ": ", status.message()));
    }
    cursor_ = to;
    return true;
  }

  absl::Status Standalone(
      const std::function<absl::Status(Transaction&)>& step) {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_.Begin());
    SLUICE_RETURN_IF_ERROR(step(*tx));
    return impl_.Commit(*tx, {});
  }

  EnqueueOptions RunOptions(absl::Time fire) const {
    EnqueueOptions options = schedule_.spec.options;
    options.id = StrCat("schedule:", record_.group, "/", record_.name, "@",
                        FireTimeText(fire));
    boost::json::object metadata;
    if (const boost::json::object* user = options.metadata.if_object()) {
      metadata = *user;
    }
    metadata["schedule_group"] = record_.group;
    metadata["schedule_name"] = record_.name;
    metadata["fire_time"] = FireTimeText(fire);
    options.metadata = std::move(metadata);
    return options;
  }

  Engine::Impl& impl_;
  const ScheduleRecord& record_;
  CompiledSchedule schedule_;
  absl::Time cursor_;
  SchedulerPass& pass_;
};

// Passes, then sleeps until the next fire time by the engine's clock (at
// most poll_interval, so a manual clock moved forward is seen).
class BackgroundScheduler final : public Scheduler {
 public:
  BackgroundScheduler(Engine& engine, SchedulerOptions options)
      : engine_(engine), options_(options) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~BackgroundScheduler() override { Stop(); }

  void Wake() override {
    absl::MutexLock lock(&mu_);
    woken_ = true;
  }
  void Stop() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }
  int64_t passes() const override {
    absl::MutexLock lock(&mu_);
    return passes_;
  }

 private:
  void Loop() {
    while (true) {
      absl::StatusOr<SchedulerPass> pass =
          engine_.RunSchedulerOnce(engine_.clock().Now());
      absl::Duration sleep = options_.poll_interval;
      if (!pass.ok()) {
        engine_.impl().Log(
            LogLevel::kWarning,
            StrCat("scheduler pass failed: ", pass.status().ToString()));
      } else if (pass->next_fire.has_value()) {
        sleep = std::clamp(*pass->next_fire - engine_.clock().Now(),
                           absl::ZeroDuration(), sleep);
      }
      absl::MutexLock lock(&mu_);
      ++passes_;
      auto awake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || woken_;
      };
      mu_.AwaitWithTimeout(absl::Condition(&awake), sleep);
      woken_ = false;
      if (stopping_) return;
    }
  }

  Engine& engine_;
  const SchedulerOptions options_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  int64_t passes_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

absl::StatusOr<CompiledSchedule> CompileStored(const ScheduleRecord& record,
                                               size_t max_payload_bytes) {
  if (!record.unreadable.empty()) {
    return absl::DataLossError(record.unreadable);
  }
  SLUICE_ASSIGN_OR_RETURN(ScheduleSpec spec,
                          DecodeScheduleSpec(record.name, record.definition));
  return CompileSchedule(record.name, spec, max_payload_bytes);
}

}  // namespace

absl::StatusOr<SchedulerPass> Engine::RunSchedulerOnce(absl::Time now) {
  std::vector<ScheduleRecord> schedules;
  {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
    SLUICE_ASSIGN_OR_RETURN(schedules, tx->ListSchedules(""));
  }  // read only: dropping it rolls back
  SchedulerPass pass;
  for (const ScheduleRecord& record : schedules) {
    absl::StatusOr<CompiledSchedule> compiled =
        CompileStored(record, options().max_payload_bytes);
    absl::Status status =
        compiled.ok()
            ? ScheduleFirer(*impl_, record, *std::move(compiled), pass).Run(now)
            : compiled.status();
    if (!status.ok()) {
      ++pass.errors;
      impl_->Log(LogLevel::kWarning,
                 StrCat("schedule \"", record.group, "/", record.name,
                        "\" did not fire: ", status.message()));
    }
  }
  return pass;
}

absl::StatusOr<std::unique_ptr<Scheduler>> Engine::StartScheduler(
    SchedulerOptions options) {
  if (options.poll_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        StrCat("scheduler poll_interval must be positive, not ",
               absl::FormatDuration(options.poll_interval)));
  }
  return std::unique_ptr<Scheduler>(
      std::make_unique<BackgroundScheduler>(*this, options));
}

}  // namespace sluice
