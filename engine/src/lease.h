// The one place that turns a step's effective timeout into deadlines. Claim,
// heartbeat and stall recovery all use it, so they always agree.
#ifndef SLUICE_ENGINE_LEASE_H_
#define SLUICE_ENGINE_LEASE_H_

#include "absl/time/time.h"
#include "compiled_flow.h"
#include "sluice/engine.h"

namespace sluice {

struct LeaseTimes {
  absl::Time deadline;       // the handler should be done by now
  absl::Time visible_until;  // the task's message stays hidden until then
  absl::Time stall_at;       // stall recovery may take the task back after
};

// The effective timeout is the step's, else the flow's (resolved when the
// flow was compiled). `now` is the claim or heartbeat time.
inline LeaseTimes ComputeLease(const CompiledStep& step, absl::Time now,
                               const EngineOptions& options) {
  return LeaseTimes{
      .deadline = now + step.timeout,
      .visible_until = now + step.timeout + options.claim_grace,
      .stall_at = now + step.timeout + options.recovery_grace,
  };
}

// The retry delay after `attempts` attempts: floor(base * 2^attempts),
// capped at the longest retry delay a handler may choose.
absl::Duration BackoffDelay(const CompiledStep& step, int attempts);

}  // namespace sluice

#endif  // SLUICE_ENGINE_LEASE_H_
