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

// The next child of the innermost open container, closing finished ones.
// Checks object keys on the way, since keys are not values.
absl::StatusOr<const Json*> NextChild(Stack& stack, std::string_view what) {
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
        return &member.value();
      }
    }
    stack.pop_back();
  }
  return nullptr;
}

}  // namespace

absl::Status CheckJsonValue(const Json& value, std::string_view what) {
  Stack stack;
  const Json* current = &value;
  while (current != nullptr) {
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
    absl::StatusOr<const Json*> next = NextChild(stack, what);
    if (!next.ok()) return next.status();
    current = *next;
  }
  return absl::OkStatus();
}

absl::Status CheckJsonPayload(const Json& value, std::string_view what,
                              size_t max_bytes) {
  if (absl::Status valid = CheckJsonValue(value, what); !valid.ok()) {
    return valid;
  }
  return CheckPayloadSize(value, what, max_bytes);
}

}  // namespace sluice
