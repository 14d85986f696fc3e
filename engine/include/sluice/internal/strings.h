// StrCat and StrAppend that also take std::string_view.
//
// Debian's Abseil is built with its own absl::string_view, which absl::StrCat
// takes but std::string_view does not convert to. These forward to Abseil
// after converting.
#ifndef SLUICE_INTERNAL_STRINGS_H_
#define SLUICE_INTERNAL_STRINGS_H_

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace sluice {
namespace internal_strings {

template <typename T>
decltype(auto) Piece(const T& value) {
  if constexpr (std::is_same_v<T, std::string_view>) {
    return absl::string_view(value.data(), value.size());
  } else if constexpr (!std::is_convertible_v<const T&, absl::string_view> &&
                       std::is_convertible_v<const T&, std::string_view>) {
    std::string_view view = value;
    return absl::string_view(view.data(), view.size());
  } else {
    return (value);
  }
}

}  // namespace internal_strings

template <typename... Args>
std::string StrCat(const Args&... args) {
  return absl::StrCat(internal_strings::Piece(args)...);
}

template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  absl::StrAppend(out, internal_strings::Piece(args)...);
}

// std::string_view -> absl::string_view.
inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// absl::string_view -> std::string_view.
inline std::string_view ToStd(absl::string_view s) {
  return std::string_view(s.data(), s.size());
}

}  // namespace sluice

#endif  // SLUICE_INTERNAL_STRINGS_H_
