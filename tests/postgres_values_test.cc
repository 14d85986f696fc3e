// The text forms values take to and from Postgres (pg_values.h); no server.
#include <string>
#include <utility>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "pg_values.h"

namespace sluice::testing {
namespace {

using postgres_internal::ArrayLiteral;
using postgres_internal::FormatTimestamp;
using postgres_internal::ParseTimestamp;

absl::Time Utc(int64_t year, int month, int day, int hour, int minute,
               int second, int64_t micros) {
  return absl::FromCivil(
             absl::CivilSecond(year, month, day, hour, minute, second),
             absl::UTCTimeZone()) +
         absl::Microseconds(micros);
}

TEST(PostgresValuesTest, FormatTimestamp_WritesTheFixedShape) {
  EXPECT_EQ(FormatTimestamp(Utc(2026, 12, 5, 9, 7, 3, 42)),
            "2026-12-05 09:07:03.000042+00");
  EXPECT_EQ(FormatTimestamp(absl::UnixEpoch()),
            "1970-01-01 00:00:00.000000+00");
  EXPECT_EQ(FormatTimestamp(Utc(1969, 12, 31, 23, 59, 59, 999'999)),
            "1969-12-31 23:59:59.999999+00");
  EXPECT_EQ(FormatTimestamp(Utc(1, 1, 1, 0, 0, 0, 0)),
            "0001-01-01 00:00:00.000000+00");
  EXPECT_EQ(FormatTimestamp(Utc(9999, 12, 31, 23, 59, 59, 1)),
            "9999-12-31 23:59:59.000001+00");
  EXPECT_EQ(FormatTimestamp(absl::InfiniteFuture()), "infinity");
  EXPECT_EQ(FormatTimestamp(absl::InfinitePast()), "-infinity");
}

TEST(PostgresValuesTest, FormatTimestamp_DropsWhatIsFinerThanAMicrosecond) {
  EXPECT_EQ(
      FormatTimestamp(Utc(2026, 1, 2, 3, 4, 5, 6) + absl::Nanoseconds(999)),
      "2026-01-02 03:04:05.000006+00");
  EXPECT_EQ(FormatTimestamp(absl::UnixEpoch() - absl::Nanoseconds(1)),
            "1969-12-31 23:59:59.999999+00");
}

TEST(PostgresValuesTest, FormatTimestamp_YearsOutsideFourDigitsStillRoundTrip) {
  for (absl::Time t :
       {Utc(10000, 1, 1, 0, 0, 0, 5), Utc(12345, 6, 7, 8, 9, 10, 11)}) {
    absl::StatusOr<absl::Time> parsed = ParseTimestamp(FormatTimestamp(t));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, t);
  }
}

TEST(PostgresValuesTest, FormatTimestamp_ParsesBackToTheSameTime) {
  for (absl::Time t :
       {Utc(2026, 2, 28, 23, 59, 59, 999'999), Utc(2024, 2, 29, 12, 0, 0, 1),
        Utc(1900, 3, 1, 0, 0, 0, 100'000), absl::UnixEpoch(),
        absl::InfiniteFuture(), absl::InfinitePast()}) {
    absl::StatusOr<absl::Time> parsed = ParseTimestamp(FormatTimestamp(t));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, t) << FormatTimestamp(t);
  }
}

TEST(PostgresValuesTest, ArrayLiteral_QuotesTextAndTimes) {
  ArrayLiteral array;
  array.Text("plain")
      .Text("a \"quoted\" back\\slash")
      .Time(Utc(2026, 12, 5, 1, 2, 3, 4))
      .Null()
      .Int(-7);
  std::string literal = std::move(array).Take();
  EXPECT_EQ(literal,
            "{\"plain\",\"a \\\"quoted\\\" back\\\\slash\","
            "\"2026-12-05 01:02:03.000004+00\",NULL,-7}");
}

}  // namespace
}  // namespace sluice::testing
