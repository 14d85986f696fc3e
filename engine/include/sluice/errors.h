// How a handler shapes its failure.
//
// Any non-OK status fails the attempt; the task is retried after the flow's
// exponential backoff while attempts remain. Two helpers say more:
//
//   return sluice::RetryAfter(absl::Seconds(30), "rate limited");
//   return sluice::NonRetryable("order 42 does not exist");
//
// Error codes follow Abseil's retry meaning everywhere in the API:
// kUnavailable (retry the call), kAborted (retry the transaction),
// kFailedPrecondition (fix the state first), kInvalidArgument (fix the input).
#ifndef SLUICE_ERRORS_H_
#define SLUICE_ERRORS_H_

#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace sluice {

// The longest retry delay a handler may choose.
inline constexpr absl::Duration kMaxRetryDelay = absl::Hours(24 * 7);

// Fails the attempt; if attempts remain, the retry waits `delay` instead of
// the backoff. A delay that is negative, infinite or over kMaxRetryDelay is
// not used: the backoff applies and the task's error says why.
absl::Status RetryAfter(absl::Duration delay, std::string_view message);

// Fails the task for good, whatever attempts remain.
absl::Status NonRetryable(std::string_view message);

// The delay carried by RetryAfter, if any.
std::optional<absl::Duration> RetryDelayOf(const absl::Status& status);
bool IsNonRetryable(const absl::Status& status);

// OK, or kInvalidArgument saying why `delay` can't be a retry delay.
absl::Status ValidateRetryDelay(absl::Duration delay);

}  // namespace sluice

#endif  // SLUICE_ERRORS_H_
