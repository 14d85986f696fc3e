#include "pg_values.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "sluice/internal/strings.h"
#include "sluice/records.h"

namespace sluice::postgres_internal {
namespace {

constexpr int64_t kMicrosPerSecond = 1'000'000;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// Parses `digits` characters of `text` at `*at` as a number.
bool TakeNumber(std::string_view text, size_t* at, size_t digits,
                int64_t* value) {
  if (*at + digits > text.size()) return false;
  const char* begin = text.data() + *at;
  auto [end, error] = std::from_chars(begin, begin + digits, *value);
  if (error != std::errc() || end != begin + digits) return false;
  *at += digits;
  return true;
}

bool TakeChar(std::string_view text, size_t* at, char expected) {
  if (*at >= text.size() || text[*at] != expected) return false;
  ++*at;
  return true;
}

constexpr int64_t kSecondsPerDay = 86'400;

// Days since 1970-01-01 of a date in the proleptic Gregorian calendar, and
// back, by the era arithmetic of 400-year cycles (146,097 days, each year
// counted from March so that the leap day ends it). Every time a batch
// writes or reads goes through these, and cctz's general civil-time
// normalization took most of a time's conversion.
int64_t DaysFromCivil(int64_t year, int64_t month, int64_t day) {
  year -= month <= 2 ? 1 : 0;
  const int64_t era = FloorDiv(year, 400);
  const int64_t year_of_era = year - era * 400;  // [0, 399]
  // [0, 365], from March 1
  const int64_t day_of_year =
      (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  const int64_t day_of_era = year_of_era * 365 + year_of_era / 4 -
                             year_of_era / 100 + day_of_year;  // [0, 146096]
  return era * 146'097 + day_of_era - 719'468;  // 719,468: 0000-03-01 to 1970
}

struct CivilDate {
  int64_t year;
  int64_t month;  // 1 to 12
  int64_t day;    // 1 to 31
};

CivilDate CivilFromDays(int64_t days) {
  days += 719'468;
  const int64_t era = FloorDiv(days, 146'097);
  const int64_t day_of_era = days - era * 146'097;
  const int64_t year_of_era = (day_of_era - day_of_era / 1460 +
                               day_of_era / 36'524 - day_of_era / 146'096) /
                              365;
  const int64_t day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const int64_t march_month = (5 * day_of_year + 2) / 153;  // March is 0
  const int64_t month = march_month < 10 ? march_month + 3 : march_month - 9;
  return {.year = year_of_era + era * 400 + (month <= 2 ? 1 : 0),
          .month = month,
          .day = day_of_year - (153 * march_month + 2) / 5 + 1};
}

absl::Status CorruptTime(std::string_view text) {
  return absl::InternalError(
      StrCat("postgres returned a time in an unexpected shape: \"", text,
             "\" (corrupt data, or a session without TimeZone=UTC and "
             "DateStyle=ISO)"));
}

bool NeedsEscape(char c) { return c == '"' || c == '\\'; }

// Appends `value` as a quoted array element, escaping \ and ". Every JSON
// payload a batch writes passes here, and each has quotes: one pass counts
// them, then the element is written in place. (string_view::find_first_of
// called memchr once per character.)
void AppendQuoted(std::string& out, std::string_view value) {
  size_t escapes = 0;
  for (char c : value) escapes += NeedsEscape(c) ? 1 : 0;
  const size_t at = out.size();
  out.resize(at + value.size() + escapes + 2);
  char* to = out.data() + at;
  *to++ = '"';
  if (escapes == 0) {
    to = std::copy(value.begin(), value.end(), to);
  } else {
    for (char c : value) {
      if (NeedsEscape(c)) *to++ = '\\';
      *to++ = c;
    }
  }
  *to = '"';
}

// Writes `value` (>= 0) as exactly `width` digits, zero-padded.
char* PutDigits(char* out, int64_t value, int width) {
  for (int i = width - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
  return out + width;
}

// Appends FormatTimestamp(time). Times go into every row a batch writes,
// so the digits are written by hand, not by snprintf.
void AppendTimestamp(std::string& out, absl::Time time) {
  if (time == absl::InfiniteFuture() || time == absl::InfinitePast()) {
    out.append(time == absl::InfiniteFuture() ? "infinity" : "-infinity");
    return;
  }
  const int64_t micros = absl::ToUnixMicros(time);
  const int64_t seconds = FloorDiv(micros, kMicrosPerSecond);
  const int64_t fraction = micros - seconds * kMicrosPerSecond;
  const int64_t days = FloorDiv(seconds, kSecondsPerDay);
  const int64_t of_day = seconds - days * kSecondsPerDay;
  const CivilDate date = CivilFromDays(days);
  const int64_t hour = of_day / 3600, minute = of_day / 60 % 60,
                second = of_day % 60;
  char text[64];
  if (date.year < 0 || date.year > 9999) {  // outside the fixed shape
    std::snprintf(
        text, sizeof(text),
        "%04lld-%02lld-%02lld %02lld:%02lld:%02lld.%06lld+00",
        static_cast<long long>(date.year), static_cast<long long>(date.month),
        static_cast<long long>(date.day), static_cast<long long>(hour),
        static_cast<long long>(minute), static_cast<long long>(second),
        static_cast<long long>(fraction));
    out.append(text);
    return;
  }
  char* at = PutDigits(text, date.year, 4);
  *at++ = '-';
  at = PutDigits(at, date.month, 2);
  *at++ = '-';
  at = PutDigits(at, date.day, 2);
  *at++ = ' ';
  at = PutDigits(at, hour, 2);
  *at++ = ':';
  at = PutDigits(at, minute, 2);
  *at++ = ':';
  at = PutDigits(at, second, 2);
  *at++ = '.';
  at = PutDigits(at, fraction, 6);
  out.append(text, at).append("+00");
}

}  // namespace

std::string FormatTimestamp(absl::Time time) {
  std::string text;
  AppendTimestamp(text, time);
  return text;
}

absl::StatusOr<absl::Time> ParseTimestamp(std::string_view text) {
  if (text == "infinity") return absl::InfiniteFuture();
  if (text == "-infinity") return absl::InfinitePast();
  size_t dash = text.find('-');
  if (dash == std::string_view::npos || dash < 4) return CorruptTime(text);
  size_t at = 0;
  int64_t year, month, day, hour, minute, second;
  if (!TakeNumber(text, &at, dash, &year) || !TakeChar(text, &at, '-') ||
      !TakeNumber(text, &at, 2, &month) || !TakeChar(text, &at, '-') ||
      !TakeNumber(text, &at, 2, &day) || !TakeChar(text, &at, ' ') ||
      !TakeNumber(text, &at, 2, &hour) || !TakeChar(text, &at, ':') ||
      !TakeNumber(text, &at, 2, &minute) || !TakeChar(text, &at, ':') ||
      !TakeNumber(text, &at, 2, &second)) {
    return CorruptTime(text);
  }
  int64_t micros = 0;
  if (at < text.size() && text[at] == '.') {
    ++at;
    size_t digits = 0;
    while (at + digits < text.size() && text[at + digits] >= '0' &&
           text[at + digits] <= '9') {
      ++digits;
    }
    if (digits == 0 || digits > 6 || !TakeNumber(text, &at, digits, &micros)) {
      return CorruptTime(text);
    }
    for (size_t i = digits; i < 6; ++i) micros *= 10;
  }
  if (text.substr(at) != "+00") return CorruptTime(text);
  // Postgres writes each field in its range, and years up to 294,276 (so
  // the microseconds below fit); anything else is not its text.
  if (year > 294'276 || month < 1 || month > 12 || day < 1 || day > 31 ||
      hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 ||
      second > 59) {
    return CorruptTime(text);
  }
  const int64_t seconds = DaysFromCivil(year, month, day) * kSecondsPerDay +
                          hour * 3600 + minute * 60 + second;
  return absl::FromUnixMicros(seconds * kMicrosPerSecond + micros);
}

// --- ArrayLiteral -----------------------------------------------------------

namespace {

// Microseconds between the Unix epoch and Postgres's, 2000-01-01 UTC.
constexpr int64_t kPostgresEpochMicros = 946'684'800'000'000;

// Write `value` into `at`, most significant byte first; return the end.
char* Put32(char* at, uint32_t value) {
  if constexpr (std::endian::native == std::endian::little) {
    value = __builtin_bswap32(value);
  }
  std::memcpy(at, &value, sizeof(value));
  return at + sizeof(value);
}

char* Put64(char* at, uint64_t value) {
  if constexpr (std::endian::native == std::endian::little) {
    value = __builtin_bswap64(value);
  }
  std::memcpy(at, &value, sizeof(value));
  return at + sizeof(value);
}

}  // namespace

// array_recv's header: dimensions, a has-nulls flag, the element type, then
// the dimension's size and lower bound. Reserved here and filled by Take, so
// the elements are written once, after it.
constexpr size_t kBinaryHeader = 20;
constexpr int32_t kLengthBytes = 4;  // before each element: its length

ArrayLiteral::ArrayLiteral(ElementType type)
    : type_(type), text_(kBinaryHeader, '\0') {}

void ArrayLiteral::Separate() {
  if (text_.size() > 1) text_.push_back(',');
}

void ArrayLiteral::CountElement(std::initializer_list<ElementType> types) {
  assert(std::find(types.begin(), types.end(), *type_) != types.end());
  (void)types;
  ++count_;
}

void ArrayLiteral::AppendElement(char* buffer, int32_t length,
                                 std::initializer_list<ElementType> types) {
  CountElement(types);
  Put32(buffer, static_cast<uint32_t>(length));
  text_.append(buffer, kLengthBytes + length);
}

ArrayLiteral& ArrayLiteral::Text(std::string_view value) {
  if (binary()) {
    CountElement({ElementType::kText, ElementType::kJson});
    char length[kLengthBytes];
    text_.append(length, Put32(length, static_cast<uint32_t>(value.size())));
    text_.append(value);
    return *this;
  }
  Separate();
  AppendQuoted(text_, value);
  return *this;
}

ArrayLiteral& ArrayLiteral::Int(int64_t value) {
  if (binary()) {
    const int bytes = *type_ == ElementType::kInt4 ? 4 : 8;
    assert(bytes == 8 || (value >= INT32_MIN && value <= INT32_MAX));
    char element[kLengthBytes + 8];
    if (bytes == 8) {
      Put64(element + kLengthBytes, static_cast<uint64_t>(value));
    } else {
      Put32(element + kLengthBytes, static_cast<uint32_t>(value));
    }
    AppendElement(element, bytes, {ElementType::kInt4, ElementType::kInt8});
    return *this;
  }
  Separate();
  StrAppend(&text_, value);
  return *this;
}

ArrayLiteral IntArray(std::span<const int64_t> values) {
  ArrayLiteral array(ElementType::kInt8);
  for (int64_t value : values) array.Int(value);
  return array;
}

ArrayLiteral RunIdArray(std::span<const sluice::RunId> run_ids) {
  ArrayLiteral array(ElementType::kUuid);
  for (const sluice::RunId& run_id : run_ids) array.RunId(run_id);
  return array;
}

ArrayLiteral& ArrayLiteral::OptionalInt(std::optional<int64_t> value) {
  return value.has_value() ? Int(*value) : Null();
}

ArrayLiteral& ArrayLiteral::Bool(bool value) {
  if (binary()) {
    char element[kLengthBytes + 1];
    element[kLengthBytes] = value ? 1 : 0;
    AppendElement(element, 1, {ElementType::kBool});
    return *this;
  }
  Separate();
  text_.push_back(value ? 't' : 'f');
  return *this;
}

ArrayLiteral& ArrayLiteral::Time(absl::Time value) {
  if (binary()) {
    // Postgres's infinities are the extreme values; a finite time is
    // microseconds from its epoch, the finer part dropped as FormatTimestamp
    // drops it.
    const int64_t micros =
        value == absl::InfiniteFuture() ? INT64_MAX
        : value == absl::InfinitePast()
            ? INT64_MIN
            : absl::ToUnixMicros(value) - kPostgresEpochMicros;
    char element[kLengthBytes + 8];
    Put64(element + kLengthBytes, static_cast<uint64_t>(micros));
    AppendElement(element, 8, {ElementType::kTimestamptz});
    return *this;
  }
  Separate();
  text_.push_back('"');  // a timestamp has nothing to escape
  AppendTimestamp(text_, value);
  text_.push_back('"');
  return *this;
}

ArrayLiteral& ArrayLiteral::OptionalTime(std::optional<absl::Time> value) {
  return value.has_value() ? Time(*value) : Null();
}

ArrayLiteral& ArrayLiteral::RunId(const sluice::RunId& value) {
  if (binary()) {
    char element[kLengthBytes + 16];
    Put64(Put64(element + kLengthBytes, value.high()), value.low());
    AppendElement(element, 16, {ElementType::kUuid});
    return *this;
  }
  Separate();
  text_.append(value.ToString());  // hexadecimal digits and dashes: unquoted
  return *this;
}

ArrayLiteral& ArrayLiteral::Json(const sluice::Json& value) {
  return Text(SerializeJson(value));
}

ArrayLiteral& ArrayLiteral::OptionalJson(
    const std::optional<sluice::Json>& value) {
  return value.has_value() ? Json(*value) : Null();
}

ArrayLiteral& ArrayLiteral::Null() {
  if (binary()) {
    ++count_;
    has_null_ = true;
    char length[kLengthBytes];
    text_.append(length, Put32(length, static_cast<uint32_t>(-1)));
    return *this;
  }
  Separate();
  text_ += "NULL";
  return *this;
}

std::string ArrayLiteral::Take() && {
  if (!binary()) {
    text_.push_back('}');
    return std::move(text_);
  }
  char* at = text_.data();
  at = Put32(at, count_ > 0 ? 1 : 0);
  at = Put32(at, has_null_ ? 1 : 0);
  at = Put32(at, static_cast<uint32_t>(*type_));
  if (count_ == 0) {
    text_.resize(at - text_.data());  // an empty array has no dimension
  } else {
    at = Put32(at, static_cast<uint32_t>(count_));
    Put32(at, 1);
  }
  return std::move(text_);
}

// --- Params -----------------------------------------------------------------

Params& Params::Text(std::string_view value) {
  values_.emplace_back(value);
  is_null_.push_back(false);
  formats_.push_back(0);
  return *this;
}

Params& Params::Int(int64_t value) { return Text(StrCat(value)); }

Params& Params::Time(absl::Time value) { return Text(FormatTimestamp(value)); }

Params& Params::OptionalTime(std::optional<absl::Time> value) {
  return value.has_value() ? Time(*value) : Null();
}

Params& Params::RunId(const sluice::RunId& value) {
  return Text(value.ToString());
}

Params& Params::Json(const sluice::Json& value) {
  return Text(SerializeJson(value));
}

Params& Params::OptionalJson(const std::optional<sluice::Json>& value) {
  return value.has_value() ? Json(*value) : Null();
}

Params& Params::Array(ArrayLiteral&& array) {
  const bool binary = array.binary();
  values_.push_back(std::move(array).Take());
  is_null_.push_back(false);
  formats_.push_back(binary ? 1 : 0);
  return *this;
}

Params& Params::Null() {
  values_.emplace_back();
  is_null_.push_back(true);
  formats_.push_back(0);
  return *this;
}

const char* const* Params::Pointers() const {
  pointers_.resize(values_.size());
  for (size_t i = 0; i < values_.size(); ++i) {
    pointers_[i] = is_null_[i] ? nullptr : values_[i].c_str();
  }
  return pointers_.data();
}

const int* Params::Lengths() const {
  lengths_.resize(values_.size());
  for (size_t i = 0; i < values_.size(); ++i) {
    lengths_[i] = static_cast<int>(values_[i].size());
  }
  return lengths_.data();
}

// --- Row --------------------------------------------------------------------

std::string_view Row::Current() const {
  return std::string_view(PQgetvalue(result_, row_, column_),
                          PQgetlength(result_, row_, column_));
}

std::string_view Row::Raw() {
  std::string_view text = Current();
  ++column_;
  return text;
}

void Row::Fail(absl::Status status) {
  if (status_.ok()) status_ = std::move(status);
}

std::string Row::Text() { return std::string(Raw()); }

int64_t Row::Int() {
  std::string_view text = Raw();
  int64_t value = 0;
  auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    Fail(absl::InternalError(
        StrCat("postgres returned \"", text, "\" where a number belongs")));
  }
  return value;
}

std::optional<int> Row::OptionalInt() {
  if (IsNull()) {
    Skip();
    return std::nullopt;
  }
  return static_cast<int>(Int());
}

bool Row::Bool() { return Raw() == "t"; }

absl::Time Row::Time() {
  absl::StatusOr<absl::Time> time = ParseTimestamp(Raw());
  if (!time.ok()) {
    Fail(time.status());
    return absl::UnixEpoch();
  }
  return *time;
}

std::optional<absl::Time> Row::OptionalTime() {
  if (IsNull()) {
    Skip();
    return std::nullopt;
  }
  return Time();
}

void Row::NoteUnreadable(std::string_view problem) {
  AddUnreadable(unreadable_, problem);
}

sluice::RunId Row::RunId() {
  std::string_view text = Raw();
  absl::StatusOr<sluice::RunId> id = sluice::RunId::Parse(text);
  if (!id.ok()) {
    NoteUnreadable(StrCat("run id is not a UUID: ", id.status().message()));
    return sluice::RunId();
  }
  return *id;
}

sluice::Json Row::Json(std::string_view what) {
  absl::StatusOr<sluice::Json> value = ParseStoredJson(Raw(), what);
  if (!value.ok()) {
    NoteUnreadable(ToStd(value.status().message()));
    return sluice::Json();
  }
  return std::move(*value);
}

std::optional<sluice::Json> Row::OptionalJson(std::string_view what) {
  if (IsNull()) {
    Skip();
    return std::nullopt;
  }
  absl::StatusOr<sluice::Json> value = ParseStoredJson(Raw(), what);
  if (!value.ok()) {
    NoteUnreadable(ToStd(value.status().message()));
    return std::nullopt;
  }
  return std::move(*value);
}

}  // namespace sluice::postgres_internal
