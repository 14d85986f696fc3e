#include "sluice/json.h"

#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "boost/json/parse.hpp"
#include "boost/json/serialize.hpp"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

// Numbers compare by value, as jsonb does: 1 equals 1.0.
bool NumbersEqual(const Json& a, const Json& b) {
  if (a.is_int64() && b.is_int64()) return a.get_int64() == b.get_int64();
  if (a.is_uint64() && b.is_uint64()) return a.get_uint64() == b.get_uint64();
  if (a.is_double() || b.is_double()) {
    return a.to_number<double>() == b.to_number<double>();
  }
  // One int64, one uint64: equal only if both are non-negative and equal.
  const Json& i = a.is_int64() ? a : b;
  const Json& u = a.is_int64() ? b : a;
  return i.get_int64() >= 0 &&
         static_cast<uint64_t>(i.get_int64()) == u.get_uint64();
}

bool IsNumber(const Json& v) { return v.is_number(); }

bool ScalarsEqual(const Json& a, const Json& b) {
  if (IsNumber(a) && IsNumber(b)) return NumbersEqual(a, b);
  if (a.kind() != b.kind()) return false;
  if (a.is_string()) return a.get_string() == b.get_string();
  if (a.is_bool()) return a.get_bool() == b.get_bool();
  return a.is_null();
}

bool Contains(const Json& target, const Json& pattern, bool top_level) {
  if (pattern.is_object()) {
    if (!target.is_object()) return false;
    for (const auto& [key, want] : pattern.get_object()) {
      const Json* have = target.get_object().if_contains(key);
      if (have == nullptr || !Contains(*have, want, false)) return false;
    }
    return true;
  }
  if (pattern.is_array()) {
    if (!target.is_array()) return false;
    for (const Json& want : pattern.get_array()) {
      bool found = false;
      for (const Json& have : target.get_array()) {
        // Inside arrays, scalars match scalars and containers match
        // containers of the same kind.
        if (Contains(have, want, false)) {
          found = true;
          break;
        }
      }
      if (!found) return false;
    }
    return true;
  }
  if (target.is_array() && top_level) {
    for (const Json& have : target.get_array()) {
      if (!have.is_structured() && ScalarsEqual(have, pattern)) return true;
    }
    return false;
  }
  if (target.is_structured()) return false;
  return ScalarsEqual(target, pattern);
}

// The offset of the first integer literal (no fraction, no exponent) in
// valid JSON `text` that fits neither int64 nor uint64, which Boost.JSON
// would otherwise turn into an inexact double.
std::optional<size_t> FindWideInteger(std::string_view text) {
  constexpr std::string_view kMaxNegative = "9223372036854775808";
  constexpr std::string_view kMaxPositive = "18446744073709551615";
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {  // skip the string, escapes included
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
      continue;
    }
    if (c != '-' && !absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      continue;
    }
    size_t start = i;
    bool negative = c == '-';
    size_t digits_start = negative ? i + 1 : i;
    size_t end = digits_start;
    while (end < text.size() &&
           absl::ascii_isdigit(static_cast<unsigned char>(text[end]))) {
      ++end;
    }
    i = end;
    while (i < text.size() &&
           (text[i] == '.' || text[i] == 'e' || text[i] == 'E' ||
            text[i] == '+' || text[i] == '-' ||
            absl::ascii_isdigit(static_cast<unsigned char>(text[i])))) {
      ++i;
    }
    bool is_integer = i == end;
    --i;  // the loop's ++i moves past the number
    if (!is_integer) continue;
    std::string_view digits = text.substr(digits_start, end - digits_start);
    std::string_view limit = negative ? kMaxNegative : kMaxPositive;
    if (digits.size() > limit.size() ||
        (digits.size() == limit.size() && digits > limit)) {
      return start;
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<Json> ParseJson(std::string_view text, std::string_view what,
                               size_t max_bytes) {
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(StrCat(what, " is ", text.size(),
                                             " bytes, over the limit of ",
                                             max_bytes, " bytes"));
  }
  boost::json::parse_options options;
  options.max_depth = kMaxJsonDepth;
  boost::system::error_code ec;
  Json value = boost::json::parse(
      boost::json::string_view(text.data(), text.size()), ec, {}, options);
  if (ec == boost::json::error::too_deep) {
    return absl::InvalidArgumentError(
        StrCat(what, " nests deeper than the limit of ", kMaxJsonDepth,
               " levels of arrays and objects"));
  }
  if (ec) {
    return absl::InvalidArgumentError(
        StrCat(what, " is not valid JSON: ", ec.message()));
  }
  if (std::optional<size_t> at = FindWideInteger(text)) {
    return absl::InvalidArgumentError(
        StrCat(what, " holds an integer outside the 64-bit range at byte ", *at,
               "; integers must lie in [-2^63, 2^64 - 1] (send larger ones as "
               "strings)"));
  }
  SLUICE_RETURN_IF_ERROR(CheckJsonValue(value, what));
  return value;
}

absl::StatusOr<Json> ParseStoredJson(std::string_view text,
                                     std::string_view what) {
  absl::StatusOr<Json> value =
      ParseJson(text, what, std::numeric_limits<size_t>::max());
  if (!value.ok()) return absl::DataLossError(value.status().message());
  return value;
}

std::string SerializeJson(const Json& value) {
  return boost::json::serialize(value);
}

absl::Status CheckPayloadSize(const Json& value, std::string_view what,
                              size_t max_bytes) {
  // Cheap for the common small payload: scalars never come close.
  if (!value.is_structured() && !value.is_string()) return absl::OkStatus();
  size_t size = boost::json::serialize(value).size();
  if (size > max_bytes) {
    return absl::InvalidArgumentError(StrCat(
        what, " is ", size, " bytes, over the limit of ", max_bytes, " bytes"));
  }
  return absl::OkStatus();
}

std::string_view JsonTypeName(const Json& value) {
  switch (value.kind()) {
    case boost::json::kind::object:
      return "object";
    case boost::json::kind::array:
      return "array";
    case boost::json::kind::string:
      return "string";
    case boost::json::kind::bool_:
      return "boolean";
    case boost::json::kind::null:
      return "null";
    default:
      return "number";
  }
}

bool JsonContains(const Json& target, const Json& pattern) {
  return Contains(target, pattern, /*top_level=*/true);
}

}  // namespace sluice
