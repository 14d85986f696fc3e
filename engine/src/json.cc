#include "sluice/json.h"

#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "boost/json/serialize.hpp"
#include "boost/json/serializer.hpp"
#include "sluice/internal/json_text.h"
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

}  // namespace

absl::StatusOr<Json> ParseJson(std::string_view text, std::string_view what,
                               size_t max_bytes) {
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(StrCat(what, " is ", text.size(),
                                             " bytes, over the limit of ",
                                             max_bytes, " bytes"));
  }
  SLUICE_ASSIGN_OR_RETURN(
      Json value,
      internal::ParseJsonText(text, what, {.max_depth = kMaxJsonDepth}));
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
  // Counted through a small buffer rather than serialized whole: every
  // handler output passes here, and the text itself is not needed.
  boost::json::serializer serializer;
  serializer.reset(&value);
  char buffer[4096];
  size_t size = 0;
  while (!serializer.done()) {
    size += serializer.read(buffer, sizeof(buffer)).size();
  }
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
