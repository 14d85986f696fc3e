// Cron expressions: parsing and the next fire time in a time zone.
//
//   absl::StatusOr<CronExpression> cron = CronExpression::Parse("*/5 9-17 * *
//   MON-FRI"); std::optional<absl::Time> next = cron->NextAfter(now, berlin);
//
// Syntax (docs/decisions/0031-cron-schedules.md):
// - 5 fields "minute hour day-of-month month day-of-week", or 6 fields with
//   seconds first "second minute hour day-of-month month day-of-week".
// - Each field is a comma list of items; an item is `*`, a value, or a range
//   `a-b`, each with an optional step `/n`; `a/n` means `a-max/n`.
// - Months JAN-DEC and weekdays SUN-SAT by name (any case); weekday 7 is
//   Sunday, and a weekday range may end at Sunday (`FRI-SUN`).
// - `?` means `*` in day-of-month and day-of-week.
// - Aliases @yearly @annually @monthly @weekly @daily @midnight @hourly.
// - Day rule (Vixie cron's): when day-of-month and day-of-week are both
//   restricted (neither field starts with `*` or `?`), a day matches if
//   either matches; otherwise both must.
//
// Time zones: fire times are wall times in the zone. A wall time that a
// daylight-saving gap skips fires once, at the first instant after the gap
// (every skipped wall time of one gap collapses onto that one instant); a
// wall time that repeats fires once, at its first occurrence.
#ifndef SLUICE_ENGINE_CRON_H_
#define SLUICE_ENGINE_CRON_H_

#include <bitset>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"

namespace sluice {

class CronExpression {
 public:
  // kInvalidArgument naming the field and the problem, or an expression that
  // can never fire (such as "0 0 30 2 *").
  static absl::StatusOr<CronExpression> Parse(std::string_view text);

  // The first fire time strictly after `after`, seen in `zone`; nullopt only
  // when none exists before the end of absl's time range.
  std::optional<absl::Time> NextAfter(absl::Time after,
                                      const absl::TimeZone& zone) const;

  // The first matching wall time at or after `from`, searching 400 years
  // (one full Gregorian cycle); nullopt if none.
  std::optional<absl::CivilSecond> NextMatch(absl::CivilSecond from) const;

  const std::string& text() const { return text_; }
  bool has_seconds() const { return has_seconds_; }
  // The selected days, and whether the day rule is "either matches" (both
  // day fields restricted) rather than "both match".
  const std::bitset<32>& days_of_month() const { return days_of_month_; }
  const std::bitset<7>& days_of_week() const { return days_of_week_; }
  bool day_rule_is_or() const {
    return !day_of_month_star_ && !day_of_week_star_;
  }

 private:
  friend class CronFieldParser;
  CronExpression() = default;

  bool DayMatches(absl::CivilDay day) const;

  std::string text_;
  bool has_seconds_ = false;
  std::bitset<60> seconds_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_of_month_;  // 1..31
  std::bitset<13> months_;         // 1..12
  std::bitset<7> days_of_week_;    // 0 = Sunday
  // Vixie cron's star flags: the field starts with `*` or `?`.
  bool day_of_month_star_ = false;
  bool day_of_week_star_ = false;
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_CRON_H_
