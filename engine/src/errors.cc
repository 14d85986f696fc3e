#include "sluice/errors.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

constexpr char kRetryDelayUrl[] = "sluice/retry-after-us";
constexpr char kNonRetryableUrl[] = "sluice/non-retryable";

// Statuses carry the delay even when it is invalid, so the engine can say
// why it ignored it.
absl::Status FailedAttempt(std::string_view message) {
  return absl::UnknownError(ToAbsl(message));
}

}  // namespace

absl::Status RetryAfter(absl::Duration delay, std::string_view message) {
  absl::Status status = FailedAttempt(message);
  int64_t micros = delay == absl::InfiniteDuration()
                       ? INT64_MAX
                       : (delay == -absl::InfiniteDuration()
                              ? INT64_MIN
                              : absl::ToInt64Microseconds(delay));
  status.SetPayload(kRetryDelayUrl, absl::Cord(StrCat(micros)));
  return status;
}

absl::Status NonRetryable(std::string_view message) {
  absl::Status status = FailedAttempt(message);
  status.SetPayload(kNonRetryableUrl, absl::Cord("1"));
  return status;
}

std::optional<absl::Duration> RetryDelayOf(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kRetryDelayUrl);
  if (!payload) return std::nullopt;
  std::string text(*payload);
  int64_t micros = 0;
  if (!absl::SimpleAtoi(text, &micros)) return std::nullopt;
  if (micros == INT64_MAX) return absl::InfiniteDuration();
  if (micros == INT64_MIN) return -absl::InfiniteDuration();
  return absl::Microseconds(micros);
}

bool IsNonRetryable(const absl::Status& status) {
  return status.GetPayload(kNonRetryableUrl).has_value();
}

absl::Status ValidateRetryDelay(absl::Duration delay) {
  if (delay == absl::InfiniteDuration() || delay == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "retry delay must be finite; pass a duration of at most 7 days");
  }
  if (delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        StrCat("retry delay ", absl::FormatDuration(delay),
               " is negative; pass a duration of 0 or more"));
  }
  if (delay > kMaxRetryDelay) {
    return absl::InvalidArgumentError(StrCat("retry delay ",
                                             absl::FormatDuration(delay),
                                             " is over the 7-day limit"));
  }
  return absl::OkStatus();
}

}  // namespace sluice
