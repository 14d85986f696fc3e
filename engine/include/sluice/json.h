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

// Parses `text`. `what` names the value in the error ("run input").
// Fails with kInvalidArgument for malformed JSON or text over `max_bytes`.
absl::StatusOr<Json> ParseJson(std::string_view text, std::string_view what,
                               size_t max_bytes = kMaxPayloadBytes);

// Compact serialization; numbers round-trip exactly.
std::string SerializeJson(const Json& value);

// Fails with kInvalidArgument when `value` serializes to over `max_bytes`.
absl::Status CheckPayloadSize(const Json& value, std::string_view what,
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
