#include "sluice/tracing.h"

#include "sluice/internal/strings.h"

namespace sluice {
namespace {

bool IsLowerHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

absl::Status BadTraceparent(std::string_view traceparent,
                            std::string_view problem) {
  return absl::InvalidArgumentError(
      StrCat("traceparent \"", traceparent.substr(0, 80),
             "\" is not a W3C "
             "traceparent: ",
             problem,
             " (want 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, "
             "lowercase)"));
}

}  // namespace

absl::Status ValidateTraceparent(std::string_view traceparent) {
  // version(2) - trace id(32) - parent id(16) - flags(2)
  constexpr size_t kLength = 2 + 1 + 32 + 1 + 16 + 1 + 2;
  if (traceparent.size() != kLength) {
    return BadTraceparent(traceparent, StrCat("it is ", traceparent.size(),
                                              " characters, not ", kLength));
  }
  for (size_t dash : {2u, 35u, 52u}) {
    if (traceparent[dash] != '-') {
      return BadTraceparent(traceparent,
                            StrCat("no '-' at position ", dash + 1));
    }
  }
  for (size_t i = 0; i < traceparent.size(); ++i) {
    if (i == 2 || i == 35 || i == 52) continue;
    if (!IsLowerHex(traceparent[i])) {
      return BadTraceparent(traceparent, StrCat("character ", i + 1,
                                                " is not a lowercase hex "
                                                "digit"));
    }
  }
  if (traceparent.substr(0, 2) != "00") {
    return BadTraceparent(traceparent, "the version is not 00");
  }
  if (traceparent.substr(3, 32) == std::string(32, '0')) {
    return BadTraceparent(traceparent, "the trace id is all zeros");
  }
  if (traceparent.substr(36, 16) == std::string(16, '0')) {
    return BadTraceparent(traceparent, "the parent span id is all zeros");
  }
  return absl::OkStatus();
}

std::string_view ToString(SpanKind kind) {
  switch (kind) {
    case SpanKind::kClaim:
      return "claim";
    case SpanKind::kHandler:
      return "handler";
    case SpanKind::kFinish:
      return "finish";
  }
  return "unknown";
}

}  // namespace sluice
