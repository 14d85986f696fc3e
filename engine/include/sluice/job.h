// Defining and enqueueing jobs. A job is a run of a one-step flow that its
// Job definition deploys; everything a run has (the ledger, retry, cancel,
// retention) a job has.
//
//   sluice::Job send_email("send_email", {.queue = "email", .max_attempts = 5},
//                          SendEmail);
//   engine->Deploy(send_email);
//   engine->Enqueue(send_email, payload,
//                   {.priority = 5, .dedupe = sluice::Dedupe{.key = "u42"}});
//
// A job handler receives the payload itself (not {"run": payload}).
#ifndef SLUICE_JOB_H_
#define SLUICE_JOB_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "sluice/flow.h"
#include "sluice/ids.h"
#include "sluice/json.h"

namespace sluice {

// Priorities run from kMinPriority to kMaxPriority; higher is claimed first.
inline constexpr int kMinPriority = -1000;
inline constexpr int kMaxPriority = 1000;
// A dedupe key or external id is at most this many bytes.
inline constexpr size_t kMaxKeyBytes = 512;

// Keep and KeepRule (retention) are declared in sluice/flow.h.

// Dedupe by (job or flow, key). Pending mode (no ttl): a new item with the
// key is a duplicate while the keyed run is unfinished. Throttle (ttl): a
// duplicate while the window is open; `extend` pushes the window on every
// hit. `replace`: if the keyed item has not been claimed and is still
// delayed, overwrite it in place (keeping its id and ledger).
struct Dedupe {
  std::string key;
  std::optional<absl::Duration> ttl;
  bool extend = false;
  bool replace = false;
};

// Per-item options of Enqueue, StartRun and StartRuns. Unset fields take the
// job's (or flow's) defaults.
struct EnqueueOptions {
  // The caller's id, unique per job or flow: if a run with it exists in any
  // state, that run is returned as a duplicate and nothing changes.
  std::optional<std::string> id;
  std::optional<int> priority;
  std::optional<absl::Duration> delay;  // >= 0; not with run_at
  std::optional<absl::Time> run_at;     // not with delay
  std::optional<int> max_attempts;
  std::optional<Backoff> backoff;
  std::optional<absl::Duration> timeout;
  Json metadata;  // a JSON object, or null
  std::optional<Dedupe> dedupe;
  std::optional<Keep> keep;
  // A W3C traceparent the run keeps and hands to every handler
  // (TaskContext::traceparent()); empty: EngineOptions::tracer's current
  // one, if any. An invalid value is kInvalidArgument (sluice/tracing.h).
  std::string traceparent;
};

struct EnqueueResult {
  RunId run_id;
  bool duplicate = false;

  friend bool operator==(const EnqueueResult&, const EnqueueResult&) = default;
};

struct JobOptions {
  std::string queue = "default";
  int priority = 0;
  int max_attempts = 3;
  Backoff backoff;
  absl::Duration timeout = absl::Seconds(60);
  Keep keep;
};

class Job {
 public:
  Job(std::string name, JobOptions options, Handler handler);
  Job(std::string name, Handler handler)
      : Job(std::move(name), {}, std::move(handler)) {}

  // OK, or kInvalidArgument naming the first problem.
  absl::Status Validate() const;

  const std::string& name() const { return flow_.slug(); }
  const JobOptions& options() const { return options_; }
  // The one-step flow the job deploys (its step is named "job").
  const Flow& flow() const { return flow_; }

 private:
  JobOptions options_;
  Flow flow_;
};

}  // namespace sluice

#endif  // SLUICE_JOB_H_
