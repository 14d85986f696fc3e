// The cron parser and next-fire calculator (engine/src/cron.h).
#include "cron.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

absl::TimeZone Zone(const std::string& name) {
  absl::TimeZone zone;
  EXPECT_TRUE(absl::LoadTimeZone(name, &zone)) << name;
  return zone;
}

absl::Time At(const absl::TimeZone& zone, int y, int mo, int d, int h, int mi,
              int s = 0) {
  return absl::FromCivil(absl::CivilSecond(y, mo, d, h, mi, s), zone);
}

// The next `count` fire times after `start`, formatted in `zone` with the
// offset, so a failure reads as wall times.
std::vector<std::string> Fires(const std::string& expression,
                               const absl::TimeZone& zone, absl::Time start,
                               int count) {
  absl::StatusOr<CronExpression> cron = CronExpression::Parse(expression);
  EXPECT_TRUE(cron.ok()) << cron.status();
  std::vector<std::string> out;
  if (!cron.ok()) return out;
  absl::Time t = start;
  for (int i = 0; i < count; ++i) {
    std::optional<absl::Time> next = cron->NextAfter(t, zone);
    if (!next.has_value()) break;
    out.push_back(absl::FormatTime("%Y-%m-%d %H:%M:%S %z", *next, zone));
    t = *next;
  }
  return out;
}

std::string ParseError(const std::string& expression) {
  absl::StatusOr<CronExpression> cron = CronExpression::Parse(expression);
  EXPECT_FALSE(cron.ok()) << expression;
  EXPECT_EQ(cron.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(cron.status().message());
}

TEST(Cron, FiveFields_StepsRangesListsAndNames) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  EXPECT_THAT(
      Fires("*/20 9-10 * JAN,jul mon-fri", utc, At(utc, 2024, 7, 5, 10, 30), 3),
      ::testing::ElementsAre("2024-07-05 10:40:00 +0000",
                             "2024-07-08 09:00:00 +0000",
                             "2024-07-08 09:20:00 +0000"));
}

TEST(Cron, SixFields_SecondsComeFirst) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  EXPECT_THAT(Fires("15,45 * * * * *", utc, At(utc, 2024, 1, 1, 0, 0, 15), 3),
              ::testing::ElementsAre("2024-01-01 00:00:45 +0000",
                                     "2024-01-01 00:01:15 +0000",
                                     "2024-01-01 00:01:45 +0000"));
}

TEST(Cron, DayOfMonthAndDayOfWeek_EitherMatchesWhenBothRestricted) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  // The 13th or any Friday, in September 2024 (Fridays: 6, 13, 20).
  EXPECT_THAT(Fires("0 0 13 * FRI", utc, At(utc, 2024, 9, 1, 0, 0), 3),
              ::testing::ElementsAre("2024-09-06 00:00:00 +0000",
                                     "2024-09-13 00:00:00 +0000",
                                     "2024-09-20 00:00:00 +0000"));
  // A star-led day-of-month makes both required: odd days that are Fridays.
  EXPECT_THAT(Fires("0 0 */2 * 5", utc, At(utc, 2024, 9, 1, 0, 0), 2),
              ::testing::ElementsAre("2024-09-13 00:00:00 +0000",
                                     "2024-09-27 00:00:00 +0000"));
}

TEST(Cron, Aliases_AreTheirFiveFields) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::Time start = At(utc, 2024, 2, 10, 12, 0);
  EXPECT_EQ(Fires("@yearly", utc, start, 1), Fires("0 0 1 1 *", utc, start, 1));
  EXPECT_EQ(Fires("@ANNUALLY", utc, start, 1), Fires("@yearly", utc, start, 1));
  EXPECT_EQ(Fires("@monthly", utc, start, 1)[0], "2024-03-01 00:00:00 +0000");
  EXPECT_EQ(Fires("@weekly", utc, start, 1)[0], "2024-02-11 00:00:00 +0000");
  EXPECT_EQ(Fires("@daily", utc, start, 1)[0], "2024-02-11 00:00:00 +0000");
  EXPECT_EQ(Fires("@midnight", utc, start, 1), Fires("@daily", utc, start, 1));
  EXPECT_EQ(Fires("@hourly", utc, start, 1)[0], "2024-02-10 13:00:00 +0000");
}

TEST(Cron, SundayIsZeroOrSeven_AndRangesMayEndAtSunday) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::Time start = At(utc, 2024, 9, 1, 12, 0);  // a Sunday
  EXPECT_EQ(Fires("0 0 * * 7", utc, start, 2),
            Fires("0 0 * * SUN", utc, start, 2));
  EXPECT_THAT(Fires("0 0 * * SAT-SUN", utc, start, 2),
              ::testing::ElementsAre("2024-09-07 00:00:00 +0000",
                                     "2024-09-08 00:00:00 +0000"));
}

TEST(Cron, February29_FiresInLeapYearsOnly) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  EXPECT_THAT(Fires("0 0 29 2 *", utc, At(utc, 2024, 3, 1, 0, 0), 2),
              ::testing::ElementsAre("2028-02-29 00:00:00 +0000",
                                     "2032-02-29 00:00:00 +0000"));
}

TEST(Cron, SpringForward_SkippedWallTimeFiresOnceAtTheEndOfTheGap) {
  const absl::TimeZone berlin = Zone("Europe/Berlin");
  // 2024-03-31: 02:00 CET jumps to 03:00 CEST.
  EXPECT_THAT(Fires("30 2 * * *", berlin, At(berlin, 2024, 3, 30, 12, 0), 3),
              ::testing::ElementsAre("2024-03-31 03:00:00 +0200",
                                     "2024-04-01 02:30:00 +0200",
                                     "2024-04-02 02:30:00 +0200"));
}

TEST(Cron, SpringForward_EveryMinuteCollapsesTheGapIntoOneFire) {
  const absl::TimeZone berlin = Zone("Europe/Berlin");
  EXPECT_THAT(Fires("* * * * *", berlin, At(berlin, 2024, 3, 31, 1, 58), 4),
              ::testing::ElementsAre(
                  "2024-03-31 01:59:00 +0100", "2024-03-31 03:00:00 +0200",
                  "2024-03-31 03:01:00 +0200", "2024-03-31 03:02:00 +0200"));
}

TEST(Cron, FallBack_RepeatedWallTimeFiresOnce) {
  const absl::TimeZone berlin = Zone("Europe/Berlin");
  // 2024-10-27: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
  EXPECT_THAT(Fires("30 2 * * *", berlin, At(berlin, 2024, 10, 26, 0, 0), 3),
              ::testing::ElementsAre("2024-10-26 02:30:00 +0200",
                                     "2024-10-27 02:30:00 +0200",
                                     "2024-10-28 02:30:00 +0100"));
  EXPECT_THAT(Fires("59 * * * *", berlin, At(berlin, 2024, 10, 27, 1, 0), 3),
              ::testing::ElementsAre("2024-10-27 01:59:00 +0200",
                                     "2024-10-27 02:59:00 +0200",
                                     "2024-10-27 03:59:00 +0100"));
}

TEST(Cron, FallBack_StartingInTheSecondPassSkipsWallTimesAlreadyFired) {
  const absl::TimeZone berlin = Zone("Europe/Berlin");
  // 02:10 CET is the second pass; 02:20 fired in the first pass (CEST).
  const absl::Time second_pass = absl::FromCivil(
      absl::CivilSecond(2024, 10, 27, 1, 10, 0), absl::UTCTimeZone());
  EXPECT_THAT(Fires("20 * * * *", berlin, second_pass, 1),
              ::testing::ElementsAre("2024-10-27 03:20:00 +0100"));
}

TEST(Cron, BadExpressions_NameTheFieldAndTheProblem) {
  EXPECT_THAT(ParseError("* * *"), HasSubstr("has 3 fields"));
  EXPECT_THAT(ParseError("60 * * * *"),
              HasSubstr("minute field \"60\" has 60, out of range 0-59"));
  EXPECT_THAT(ParseError("* 24 * * *"), HasSubstr("hour field"));
  EXPECT_THAT(ParseError("* * 0 * *"),
              HasSubstr("day-of-month field \"0\" has 0, out of range 1-31"));
  EXPECT_THAT(ParseError("* * * 13 *"), HasSubstr("month field"));
  EXPECT_THAT(ParseError("* * * * 8"), HasSubstr("day-of-week field"));
  EXPECT_THAT(ParseError("* * * FOO *"),
              HasSubstr("\"FOO\", which is not a value (names: JAN-DEC)"));
  EXPECT_THAT(ParseError("*/0 * * * *"), HasSubstr("step of 0"));
  EXPECT_THAT(ParseError("*/x * * * *"), HasSubstr("not a positive number"));
  EXPECT_THAT(ParseError("5-2 * * * *"),
              HasSubstr("start 5 is after its end 2"));
  EXPECT_THAT(ParseError("1,,2 * * * *"), HasSubstr("empty list item"));
  EXPECT_THAT(ParseError("? * * * *"), HasSubstr("only day-of-month"));
  EXPECT_THAT(ParseError("0 0 30 2 *"), HasSubstr("never fires"));
  EXPECT_THAT(ParseError("@reboot"), HasSubstr("unknown alias"));
  EXPECT_THAT(ParseError("60 * * * * *"), HasSubstr("second field"));
}

TEST(Cron, QuestionMark_IsStarInDayFields) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::Time start = At(utc, 2024, 5, 5, 5, 5);
  EXPECT_EQ(Fires("0 12 ? * MON", utc, start, 2),
            Fires("0 12 * * MON", utc, start, 2));
}

}  // namespace
}  // namespace sluice
