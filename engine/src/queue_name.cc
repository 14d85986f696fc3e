#include "queue_name.h"

#include "sluice/internal/strings.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sluice::queue_name {

std::string ForFlow(std::string_view flow_slug) {
  return absl::AsciiStrToLower(ToAbsl(flow_slug));
}

absl::Status Validate(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("queue name is empty");
  if (name.size() > kMaxLength) {
    return absl::InvalidArgumentError(StrCat(
        "queue name \"", name, "\" is ", name.size(),
        " characters; queue names are at most ", kMaxLength,
        " (use a shorter flow slug)"));
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) {
      return absl::InvalidArgumentError(StrCat(
          "queue name \"", name, "\" may hold only a-z, 0-9 and _"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::queue_name
