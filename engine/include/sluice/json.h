// JSON values, as flows see them.
//
// Sluice passes every input, output and condition pattern as a Boost.JSON
// value. Scalars are kept exactly: `false`, `0`, `""` and `null` are ordinary
// values and never mean "absent" (absence is `std::optional<Json>`).
//
//   absl::StatusOr<sluice::Json> input = sluice::ParseJson(text, "run input");
//   if (sluice::JsonContains(*input, pattern)) { ... }
#ifndef SLUICE_JSON_H_
#define SLUICE_JSON_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "boost/json/value.hpp"

namespace sluice {

using Json = boost::json::value;

// The largest serialized payload (run input, task output) a call accepts.
inline constexpr size_t kMaxPayloadBytes = 8 * 1024 * 1024;

// The deepest nesting of arrays and objects a payload may have: `[]` is one
// level, `[[]]` two. The same for parsed text and for values built in C++.
inline constexpr size_t kMaxJsonDepth = 256;

// Parses `text`. `what` names the value in the error ("run input").
// Fails with kInvalidArgument for malformed JSON, text over `max_bytes`,
// anything CheckJsonValue refuses, and integers outside [-2^63, 2^64 - 1]
// (refused rather than rounded to a double: send them as strings).
absl::StatusOr<Json> ParseJson(std::string_view text, std::string_view what,
                               size_t max_bytes = kMaxPayloadBytes);

// Parses JSON a backend read back from storage. Refuses what ParseJson
// refuses, except that there is no size limit (payloads were checked on the
// way in): stored text that fails now was written by an older version or
// edited by hand. Fails with kDataLoss naming `what` and the problem, never
// quoting the text.
absl::StatusOr<Json> ParseStoredJson(std::string_view text,
                                     std::string_view what);

// Compact serialization; numbers round-trip exactly.
std::string SerializeJson(const Json& value);

// Fails with kInvalidArgument when `value` serializes to over `max_bytes`.
absl::Status CheckPayloadSize(const Json& value, std::string_view what,
                              size_t max_bytes = kMaxPayloadBytes);

// Fails with kInvalidArgument, naming `what` and the path of the offending
// part (`$.items[3]`), when `value` cannot be stored and read back by every
// backend: a number that is not finite (NaN, infinity), a string or object
// key that is not valid UTF-8, or nesting deeper than kMaxJsonDepth. Walks
// iteratively, so any depth is refused without exhausting the stack.
absl::Status CheckJsonValue(const Json& value, std::string_view what);

// CheckJsonValue, then CheckPayloadSize. Every payload entering through the
// API passes this before it reaches a backend.
absl::Status CheckJsonPayload(const Json& value, std::string_view what,
                              size_t max_bytes = kMaxPayloadBytes);

// "object", "array", "string", "number", "boolean" or "null".
std::string_view JsonTypeName(const Json& value);

// Postgres jsonb containment (`target @> pattern`): objects match when every
// key of the pattern is contained in the target's value for that key, arrays
// when every pattern element is contained in some target element, scalars
// when equal (numbers compare by value). A top-level array target also
// contains a scalar pattern equal to one of its elements.
bool JsonContains(const Json& target, const Json& pattern);

}  // namespace sluice

#endif  // SLUICE_JSON_H_
