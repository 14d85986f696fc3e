// Tracing: W3C trace context on runs, and a hook for a host's tracer.
//
// A run started with a `traceparent` (EnqueueOptions::traceparent, or the
// host's current context through Tracer::CurrentTraceparent) keeps it, and
// every handler of the run sees it as TaskContext::traceparent(), so a
// host's OpenTelemetry SDK can continue the trace in the handler:
//
//   engine->Enqueue(job, payload,
//                   {.traceparent =
//                        "00-4bf92f3577b34da6a3ce929d0e0e4736-"
//                        "00f067aa0ba902b7-01"});
//   ...
//   // in the handler:
//   auto parent = propagator.Extract(ctx.traceparent());
//
// A Tracer set in EngineOptions::tracer also hears when a worker's claims,
// handlers and result recording start and end (docs/decisions/0035).
#ifndef SLUICE_TRACING_H_
#define SLUICE_TRACING_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "sluice/ids.h"

namespace sluice {

// OK if `traceparent` is a W3C traceparent header value: version "00",
// 32 hex digits of trace id, 16 of parent span id and 2 of flags, lowercase,
// separated by '-', neither id all zeros (e.g.
// "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"). Else
// kInvalidArgument naming what is wrong.
absl::Status ValidateTraceparent(std::string_view traceparent);

enum class SpanKind {
  kClaim,    // a worker's claim of a batch from its queue
  kHandler,  // one task's handler
  kFinish,   // a worker recording a batch of results
};
std::string_view ToString(SpanKind kind);

// What a span covers. Batch spans (kClaim, kFinish) serve tasks of many
// runs, so only kHandler spans carry a run's traceparent.
struct Span {
  uint64_t id = 0;  // unique per engine: pairs SpanStarted with SpanEnded
  SpanKind kind = SpanKind::kHandler;
  std::string queue;
  std::string worker_id;
  // kHandler: the task's run, flow, step, index, attempt and traceparent
  // ("" if the run has none).
  RunId run_id;
  std::string flow;
  std::string step;
  int task_index = 0;
  int attempt = 0;
  std::string traceparent;
  // kClaim: tasks claimed (known at the end); kFinish: results recorded.
  int tasks = 0;
  absl::Time start;  // wall clock
};

// The host's hook. Every method has a no-op default; override what you use.
// Called from worker threads (dispatcher and handler threads) and from
// enqueueing threads at once: implementations must be safe for concurrent
// use. A span's SpanEnded comes after its SpanStarted on some thread.
class Tracer {
 public:
  virtual ~Tracer() = default;

  // The traceparent of the calling thread's current context, used for runs
  // started without one; "" for none. A value that is not a valid
  // traceparent fails the enqueue with kInvalidArgument.
  virtual std::string CurrentTraceparent() { return ""; }

  virtual void SpanStarted(const Span& span) { (void)span; }
  // `status`: the claim's or the recording's result, or the handler's.
  virtual void SpanEnded(const Span& span, absl::Time end,
                         const absl::Status& status) {
    (void)span;
    (void)end;
    (void)status;
  }
};

}  // namespace sluice

#endif  // SLUICE_TRACING_H_
