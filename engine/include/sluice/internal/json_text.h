// JSON text to values, exactly.
//
// Boost.JSON 1.81 rounds some decimal numbers to a neighbouring double, and
// rounds the double it writes again when reading it back, so a number could
// drift a little on every trip through storage. This parser takes Boost's
// tokens but converts every non-integer number with std::from_chars, which
// rounds correctly: a value written and read back is the same value.
#ifndef SLUICE_INTERNAL_JSON_TEXT_H_
#define SLUICE_INTERNAL_JSON_TEXT_H_

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"
#include "boost/json/value.hpp"

namespace sluice::internal {

struct JsonTextOptions {
  size_t max_depth = 256;
};

// kInvalidArgument, naming `what`, for malformed text, nesting deeper than
// max_depth, or an integer literal outside [-2^63, 2^64 - 1] (which would
// otherwise become an inexact double).
absl::StatusOr<boost::json::value> ParseJsonText(
    std::string_view text, std::string_view what,
    const JsonTextOptions& options);

}  // namespace sluice::internal

#endif  // SLUICE_INTERNAL_JSON_TEXT_H_
