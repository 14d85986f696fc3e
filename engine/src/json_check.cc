// Checks that a JSON value can be stored and read back by every backend.
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>

#include "absl/container/inlined_vector.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "utf8.h"

namespace sluice {
namespace {

// One open container on the walk's explicit stack. The walk is iterative so
// that a value nested far past the limit is refused, not a stack overflow.
struct Frame {
  const Json* container;
  size_t next = 0;  // index of the next child to visit
};

// Inline for the usual shallow payload: every result's output is checked,
// so the walk should not allocate.
using Stack = absl::InlinedVector<Frame, 8>;

// Where the walk stands, as `$.key[3]`. Long keys are cut: the path is for
// finding the value, not for echoing the payload.
std::string PathOf(const Stack& stack) {
  constexpr size_t kMaxKeyShown = 32;
  std::string path = "$";
  for (const Frame& frame : stack) {
    size_t index = frame.next - 1;
    if (frame.container->is_array()) {
      StrAppend(&path, "[", index, "]");
      continue;
    }
    std::string_view key = frame.container->get_object().begin()[index].key();
    if (!IsValidUtf8(key)) {
      StrAppend(&path, "[key #", index, "]");
    } else if (key.size() > kMaxKeyShown) {
      StrAppend(&path, ".", key.substr(0, kMaxKeyShown), "...");
    } else {
      StrAppend(&path, ".", key);
    }
  }
  return path;
}

std::optional<std::string> ScalarProblem(const Json& value) {
  if (value.is_double() && !std::isfinite(value.get_double())) {
    return "holds a number that is not finite (JSON has no Infinity or NaN)";
  }
  if (value.is_string() && !IsValidUtf8(value.get_string())) {
    return "holds a string that is not valid UTF-8";
  }
  return std::nullopt;
}

// The most bytes a string of `size` bytes serializes to: every byte may
// escape to six (`\u00XX`), and the quotes.
size_t StringBound(size_t size) { return 2 + 6 * size; }

// The most bytes `value` adds to its serialization, its children aside
// (their own bounds): a number prints in at most 32, a container adds its
// brackets and a comma per child.
size_t TextBound(const Json& value) {
  switch (value.kind()) {
    case boost::json::kind::string:
      return StringBound(value.get_string().size());
    case boost::json::kind::array:
      return 2 + value.get_array().size();
    case boost::json::kind::object:
      return 2 + value.get_object().size();
    case boost::json::kind::null:
      return 4;
    case boost::json::kind::bool_:
      return 5;
    default:
      return 32;
  }
}

// The next child of the innermost open container, closing finished ones.
// Checks object keys on the way, since keys are not values, and adds their
// bound (with the colon) to `bound`.
absl::StatusOr<const Json*> NextChild(Stack& stack, std::string_view what,
                                      size_t& bound) {
  while (!stack.empty()) {
    Frame& frame = stack.back();
    if (frame.container->is_array()) {
      const boost::json::array& array = frame.container->get_array();
      if (frame.next < array.size()) return &array[frame.next++];
    } else {
      const boost::json::object& object = frame.container->get_object();
      if (frame.next < object.size()) {
        const auto& member = object.begin()[frame.next++];
        if (!IsValidUtf8(member.key())) {
          return absl::InvalidArgumentError(
              StrCat(what, " has an object key that is not valid UTF-8 at ",
                     PathOf(stack)));
        }
        bound += StringBound(member.key().size()) + 1;
        return &member.value();
      }
    }
    stack.pop_back();
  }
  return nullptr;
}

// CheckJsonValue, also setting `bound` to at least the bytes `value`
// serializes to.
absl::Status CheckJsonValueWithBound(const Json& value, std::string_view what,
                                     size_t& bound) {
  Stack stack;
  const Json* current = &value;
  bound = 0;
  while (current != nullptr) {
    bound += TextBound(*current);
    if (std::optional<std::string> problem = ScalarProblem(*current)) {
      return absl::InvalidArgumentError(
          StrCat(what, " ", *problem, " at ", PathOf(stack)));
    }
    if (current->is_structured()) {
      if (stack.size() == kMaxJsonDepth) {
        return absl::InvalidArgumentError(
            StrCat(what, " nests deeper than the limit of ", kMaxJsonDepth,
                   " levels of arrays and objects"));
      }
      stack.push_back(Frame{current});
    }
    absl::StatusOr<const Json*> next = NextChild(stack, what, bound);
    if (!next.ok()) return next.status();
    current = *next;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckJsonValue(const Json& value, std::string_view what) {
  size_t bound;
  return CheckJsonValueWithBound(value, what, bound);
}

absl::Status CheckJsonPayload(const Json& value, std::string_view what,
                              size_t max_bytes) {
  size_t bound;
  if (absl::Status valid = CheckJsonValueWithBound(value, what, bound);
      !valid.ok()) {
    return valid;
  }
  // Every result's output passes here: serializing to count the exact size
  // is left to payloads the bound cannot clear.
  if (bound <= max_bytes) return absl::OkStatus();
  return CheckPayloadSize(value, what, max_bytes);
}

}  // namespace sluice
