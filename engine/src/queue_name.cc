#include "queue_name.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "sluice/internal/strings.h"

namespace sluice::queue_name {

std::string ForFlow(std::string_view flow_slug) {
  return absl::AsciiStrToLower(ToAbsl(flow_slug));
}

absl::StatusOr<std::string> ForStep(std::string_view flow_slug,
                                    std::string_view step_slug,
                                    int step_index) {
  std::string by_slug = ForFlow(StrCat(flow_slug, "__", step_slug));
  if (by_slug.size() <= kMaxLength) return by_slug;
  std::string by_index = ForFlow(StrCat(flow_slug, "__", step_index));
  if (by_index.size() <= kMaxLength) return by_index;
  return absl::InvalidArgumentError(
      StrCat("step \"", step_slug, "\" (index ", step_index,
             ") has no private queue name that fits: \"", by_index, "\" is ",
             by_index.size(), " characters (\"", flow_slug, "__", step_slug,
             "\" is ", by_slug.size(), "); queue names are at most ",
             kMaxLength, " (use a shorter flow slug)"));
}

absl::Status Validate(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("queue name is empty");
  if (name.size() > kMaxLength) {
    return absl::InvalidArgumentError(
        StrCat("queue name \"", name, "\" is ", name.size(),
               " characters; queue names are at most ", kMaxLength,
               " (use a shorter flow slug)"));
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) {
      return absl::InvalidArgumentError(
          StrCat("queue name \"", name, "\" may hold only a-z, 0-9 and _"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::queue_name
