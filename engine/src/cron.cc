#include "cron.h"

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

enum class Field { kSecond, kMinute, kHour, kDayOfMonth, kMonth, kDayOfWeek };

struct FieldRange {
  std::string_view name;
  int min;
  int max;
};

FieldRange RangeOf(Field field) {
  switch (field) {
    case Field::kSecond:
      return {"second", 0, 59};
    case Field::kMinute:
      return {"minute", 0, 59};
    case Field::kHour:
      return {"hour", 0, 23};
    case Field::kDayOfMonth:
      return {"day-of-month", 1, 31};
    case Field::kMonth:
      return {"month", 1, 12};
    case Field::kDayOfWeek:
      // 7 is accepted as Sunday and folded onto 0.
      return {"day-of-week", 0, 7};
  }
  return {"?", 0, 0};
}

constexpr std::array<std::string_view, 12> kMonthNames = {
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN",
    "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<std::string_view, 7> kWeekdayNames = {
    "SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

// The alias's five fields, or "" if `text` is not an alias.
std::string_view ExpandAlias(std::string_view text) {
  const std::string lower = absl::AsciiStrToLower(ToAbsl(text));
  if (lower == "@yearly" || lower == "@annually") return "0 0 1 1 *";
  if (lower == "@monthly") return "0 0 1 * *";
  if (lower == "@weekly") return "0 0 * * 0";
  if (lower == "@daily" || lower == "@midnight") return "0 0 * * *";
  if (lower == "@hourly") return "0 * * * *";
  return "";
}

using Bits = uint64_t;

}  // namespace

// Parses one field into a bit per allowed value. Errors name the expression,
// the field and the item.
class CronFieldParser {
 public:
  CronFieldParser(std::string_view expression, Field field,
                  std::string_view text)
      : expression_(expression),
        field_(field),
        range_(RangeOf(field)),
        text_(text) {}

  absl::StatusOr<Bits> Parse() {
    if (text_.empty()) return Error("is empty");
    Bits bits = 0;
    for (absl::string_view item : absl::StrSplit(ToAbsl(text_), ',')) {
      absl::StatusOr<Bits> one = ParseItem(ToStd(item));
      if (!one.ok()) return one.status();
      bits |= *one;
    }
    if (field_ == Field::kDayOfWeek && (bits & (Bits{1} << 7)) != 0) {
      bits = (bits & ~(Bits{1} << 7)) | 1;  // 7 is Sunday
    }
    return bits;
  }

 private:
  absl::StatusOr<Bits> ParseItem(std::string_view item) {
    if (item.empty()) return Error("has an empty list item");
    int step = 1;
    std::string_view base = item;
    bool has_step = false;
    if (size_t slash = item.find('/'); slash != std::string_view::npos) {
      base = item.substr(0, slash);
      std::string_view step_text = item.substr(slash + 1);
      if (!absl::SimpleAtoi(ToAbsl(step_text), &step) || step_text.empty() ||
          step_text[0] == '+' || step_text[0] == '-') {
        return Error(StrCat("has a step \"", step_text,
                            "\" that is not a positive number"));
      }
      if (step < 1) return Error("has a step of 0; steps start at 1");
      has_step = true;
    }
    int low = range_.min;
    int high = range_.max;
    if (base == "*" || base == "?") {
      if (base == "?" && field_ != Field::kDayOfMonth &&
          field_ != Field::kDayOfWeek) {
        return Error(
            "uses \"?\", which only day-of-month and day-of-week allow");
      }
      if (field_ == Field::kDayOfWeek) high = 6;
    } else if (size_t dash = base.find('-'); dash != std::string_view::npos) {
      absl::StatusOr<int> from = Value(base.substr(0, dash));
      if (!from.ok()) return from.status();
      absl::StatusOr<int> to = Value(base.substr(dash + 1));
      if (!to.ok()) return to.status();
      low = *from;
      high = *to;
      // A weekday range may end at Sunday written as 0 ("FRI-SUN").
      if (field_ == Field::kDayOfWeek && high == 0 && low > 0) high = 7;
      if (low > high) {
        return Error(StrCat("has a range \"", base, "\" whose start ", low,
                            " is after its end ", high));
      }
    } else {
      absl::StatusOr<int> value = Value(base);
      if (!value.ok()) return value.status();
      low = *value;
      high = has_step ? range_.max : *value;
    }
    Bits bits = 0;
    for (int v = low; v <= high; v += step) bits |= Bits{1} << v;
    return bits;
  }

  // A number in range, or a month or weekday name.
  absl::StatusOr<int> Value(std::string_view text) {
    if (text.empty()) return Error("has a range with a missing end");
    int value = 0;
    if (absl::ascii_isdigit(static_cast<unsigned char>(text[0]))) {
      if (!absl::SimpleAtoi(ToAbsl(text), &value)) {
        return Error(StrCat("has \"", text, "\", which is not a number"));
      }
    } else {
      absl::StatusOr<int> named = Named(text);
      if (!named.ok()) return named.status();
      value = *named;
    }
    if (value < range_.min || value > range_.max) {
      return Error(StrCat("has ", value, ", out of range ", range_.min, "-",
                          range_.max));
    }
    return value;
  }

  absl::StatusOr<int> Named(std::string_view text) {
    const std::string upper = absl::AsciiStrToUpper(ToAbsl(text));
    if (field_ == Field::kMonth) {
      for (size_t i = 0; i < kMonthNames.size(); ++i) {
        if (upper == kMonthNames[i]) return static_cast<int>(i) + 1;
      }
    }
    if (field_ == Field::kDayOfWeek) {
      for (size_t i = 0; i < kWeekdayNames.size(); ++i) {
        if (upper == kWeekdayNames[i]) return static_cast<int>(i);
      }
    }
    std::string_view allowed = field_ == Field::kMonth ? " (names: JAN-DEC)"
                               : field_ == Field::kDayOfWeek
                                   ? " (names: SUN-SAT)"
                                   : " (numbers only)";
    return Error(StrCat("has \"", text, "\", which is not a value", allowed));
  }

  absl::Status Error(std::string_view problem) const {
    return absl::InvalidArgumentError(StrCat("cron expression \"", expression_,
                                             "\": ", range_.name, " field \"",
                                             text_, "\" ", problem));
  }

  std::string_view expression_;
  Field field_;
  FieldRange range_;
  std::string_view text_;
};

absl::StatusOr<CronExpression> CronExpression::Parse(std::string_view text) {
  std::string_view fields_text =
      ToStd(absl::StripAsciiWhitespace(ToAbsl(text)));
  if (!fields_text.empty() && fields_text[0] == '@') {
    fields_text = ExpandAlias(fields_text);
    if (fields_text.empty()) {
      return absl::InvalidArgumentError(StrCat(
          "cron expression \"", text,
          "\": unknown alias; use @yearly, @annually, @monthly, @weekly, "
          "@daily, @midnight or @hourly"));
    }
  }
  std::vector<std::string_view> parts;
  for (absl::string_view part : absl::StrSplit(
           ToAbsl(fields_text), absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    parts.push_back(ToStd(part));
  }
  if (parts.size() != 5 && parts.size() != 6) {
    return absl::InvalidArgumentError(StrCat(
        "cron expression \"", text, "\": has ", parts.size(),
        " fields; expected 5 (minute hour day-of-month month day-of-week) "
        "or 6 (second first)"));
  }
  CronExpression cron;
  cron.text_ = std::string(text);
  cron.has_seconds_ = parts.size() == 6;
  const size_t first = cron.has_seconds_ ? 0 : 1;
  std::array<Bits, 6> bits = {1, 0, 0, 0, 0, 0};  // seconds {0} by default
  for (size_t i = 0; i < parts.size(); ++i) {
    const Field field = static_cast<Field>(first + i);
    absl::StatusOr<Bits> parsed =
        CronFieldParser(text, field, parts[i]).Parse();
    if (!parsed.ok()) return parsed.status();
    bits[first + i] = *parsed;
  }
  cron.seconds_ = std::bitset<60>(bits[0]);
  cron.minutes_ = std::bitset<60>(bits[1]);
  cron.hours_ = std::bitset<24>(bits[2]);
  cron.days_of_month_ = std::bitset<32>(bits[3]);
  cron.months_ = std::bitset<13>(bits[4]);
  cron.days_of_week_ = std::bitset<7>(bits[5]);
  auto starts_star = [](std::string_view field) {
    return field[0] == '*' || field[0] == '?';
  };
  cron.day_of_month_star_ = starts_star(parts[parts.size() - 3]);
  cron.day_of_week_star_ = starts_star(parts[parts.size() - 1]);
  // A leap-year start, so that February 29 is found within the search.
  if (!cron.NextMatch(absl::CivilSecond(2000, 1, 1)).has_value()) {
    return absl::InvalidArgumentError(
        StrCat("cron expression \"", text,
               "\": never fires (no selected month has a selected day)"));
  }
  return cron;
}

bool CronExpression::DayMatches(absl::CivilDay day) const {
  const bool day_of_month = days_of_month_[day.day()];
  // absl's weekdays start at Monday = 0; cron's at Sunday = 0.
  const int weekday = (static_cast<int>(absl::GetWeekday(day)) + 1) % 7;
  const bool day_of_week = days_of_week_[weekday];
  if (day_of_month_star_ || day_of_week_star_) {
    return day_of_month && day_of_week;
  }
  return day_of_month || day_of_week;
}

std::optional<absl::CivilSecond> CronExpression::NextMatch(
    absl::CivilSecond from) const {
  const absl::civil_year_t last_year = from.year() + 400;
  absl::CivilSecond c = from;
  while (c.year() <= last_year) {
    if (!months_[c.month()]) {
      c = absl::CivilSecond(absl::CivilMonth(c) + 1);
    } else if (!DayMatches(absl::CivilDay(c))) {
      c = absl::CivilSecond(absl::CivilDay(c) + 1);
    } else if (!hours_[c.hour()]) {
      c = absl::CivilSecond(absl::CivilHour(c) + 1);
    } else if (!minutes_[c.minute()]) {
      c = absl::CivilSecond(absl::CivilMinute(c) + 1);
    } else if (!seconds_[c.second()]) {
      c += 1;
    } else {
      return c;
    }
  }
  return std::nullopt;
}

std::optional<absl::Time> CronExpression::NextAfter(
    absl::Time after, const absl::TimeZone& zone) const {
  absl::CivilSecond from = absl::ToCivilSecond(after, zone) + 1;
  // Wall times map to instants in increasing order, except that the rest of
  // a repeated hour maps back to its first pass (already past when `after`
  // is in the second pass) and a gap's wall times all map to its end; so
  // take the first match whose instant is after `after`.
  while (true) {
    std::optional<absl::CivilSecond> match = NextMatch(from);
    if (!match.has_value()) return std::nullopt;
    const absl::TimeZone::TimeInfo info = zone.At(*match);
    const absl::Time fire =
        info.kind == absl::TimeZone::TimeInfo::SKIPPED ? info.trans : info.pre;
    if (fire == absl::InfiniteFuture()) return std::nullopt;
    if (fire > after) return fire;
    from = *match + 1;
  }
}

}  // namespace sluice
