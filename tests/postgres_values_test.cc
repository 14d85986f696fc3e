// The text forms values take to and from Postgres (pg_values.h); no server.
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "pg_values.h"
#include "sluice/ids.h"

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

// The calendar arithmetic by hand against absl's civil time, at noon and
// just before midnight of every day from 1600 to 2500 and of every 97th
// day across the four-digit years.
TEST(PostgresValuesTest, FormatTimestamp_AgreesWithAbslOnEveryDay) {
  const absl::Time first = Utc(1, 1, 1, 12, 0, 0, 0);
  const absl::Time last = Utc(9999, 12, 31, 12, 0, 0, 0);
  const absl::Time dense_from = Utc(1600, 1, 1, 12, 0, 0, 0);
  const absl::Time dense_to = Utc(2500, 1, 1, 12, 0, 0, 0);
  int checked = 0;
  for (absl::Time noon = first; noon <= last;
       noon +=
       absl::Hours(24) * (noon >= dense_from && noon < dense_to ? 1 : 97)) {
    for (absl::Time t :
         {noon, noon + absl::Hours(12) - absl::Microseconds(1)}) {
      const std::string text = FormatTimestamp(t);
      const absl::CivilSecond c = absl::ToCivilSecond(t, absl::UTCTimeZone());
      ASSERT_EQ(text, absl::StrFormat(
                          "%04d-%02d-%02d %02d:%02d:%02d.%06d+00", c.year(),
                          c.month(), c.day(), c.hour(), c.minute(), c.second(),
                          absl::ToInt64Microseconds(
                              t - absl::FromCivil(c, absl::UTCTimeZone()))));
      absl::StatusOr<absl::Time> parsed = ParseTimestamp(text);
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      ASSERT_EQ(*parsed, t) << text;
      ++checked;
    }
  }
  EXPECT_GT(checked, 2 * 328'000);  // 1600-2500 alone is 328,718 days
}

TEST(PostgresValuesTest, ParseTimestamp_RefusesFieldsOutOfRange) {
  for (const char* text :
       {"2026-13-01 00:00:00+00", "2026-00-10 00:00:00+00",
        "2026-01-32 00:00:00+00", "2026-01-01 24:00:00+00",
        "2026-01-01 00:60:00+00", "2026-01-01 00:00:60+00",
        "2026-01-01 -1:00:00+00", "300000-01-01 00:00:00+00"}) {
    absl::StatusOr<absl::Time> parsed = ParseTimestamp(text);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInternal) << text;
    EXPECT_NE(parsed.status().message().find(text), std::string::npos);
  }
}

TEST(PostgresValuesTest, ArrayLiteral_WritesRunIdsUnquoted) {
  absl::StatusOr<RunId> id =
      RunId::Parse("0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
  ASSERT_TRUE(id.ok());
  ArrayLiteral array;
  array.RunId(*id).RunId(*id);
  EXPECT_EQ(std::move(array).Take(),
            "{0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b,"
            "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b}");
}

// The bytes of array_recv's format: dimensions, has-nulls flag, element
// type; the dimension's size and lower bound; each element's length and
// bytes (-1 for NULL), all big-endian.
TEST(PostgresValuesTest, ArrayLiteral_BinaryWritesArrayRecvsFormat) {
  ArrayLiteral ints(postgres_internal::ElementType::kInt4);
  ints.Int(-2).Null();
  EXPECT_TRUE(ints.binary());
  EXPECT_EQ(std::move(ints).Take(),
            std::string("\0\0\0\1"    // one dimension
                        "\0\0\0\1"    // with a NULL
                        "\0\0\0\x17"  // int4
                        "\0\0\0\2"    // two elements
                        "\0\0\0\1"    // from 1
                        "\0\0\0\4\xff\xff\xff\xfe"
                        "\xff\xff\xff\xff",
                        32));

  ArrayLiteral times(postgres_internal::ElementType::kTimestamptz);
  times.Time(Utc(2000, 1, 1, 0, 0, 1, 2)).Time(absl::InfiniteFuture());
  const std::string bytes = std::move(times).Take();
  ASSERT_EQ(bytes.size(), 20u + 2 * 12);
  EXPECT_EQ(bytes.substr(8, 4), std::string("\0\0\x04\xa0", 4));  // 1184
  // 1,000,002 microseconds after Postgres's epoch, then infinity.
  EXPECT_EQ(bytes.substr(24, 8), std::string("\0\0\0\0\0\x0f\x42\x42", 8));
  EXPECT_EQ(bytes.substr(36, 8),
            std::string("\x7f\xff\xff\xff\xff\xff\xff\xff", 8));

  ArrayLiteral ids(postgres_internal::ElementType::kUuid);
  EXPECT_EQ(std::move(ids).Take(),
            std::string("\0\0\0\0\0\0\0\0\0\0\x0b\x86", 12));  // empty
}

TEST(PostgresValuesTest, ArrayLiteral_QuotesTextAndTimes) {
  ArrayLiteral array;
  array.Text("plain")
      .Text("a \"quoted\" back\\slash")
      .Time(Utc(2026, 12, 5, 1, 2, 3, 4))
      .Null()
      .Text("")
      .Text("\\")
      .Int(-7);
  std::string literal = std::move(array).Take();
  EXPECT_EQ(literal,
            "{\"plain\",\"a \\\"quoted\\\" back\\\\slash\","
            "\"2026-12-05 01:02:03.000004+00\",NULL,\"\",\"\\\\\",-7}");
}

}  // namespace
}  // namespace sluice::testing
