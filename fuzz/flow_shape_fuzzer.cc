// Fuzzes stored flow definitions: FlowShape::FromJson must refuse bad input
// with kInvalidArgument, and a shape it accepts must survive ToJson and
// FromJson again without a difference.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "sluice/flow.h"
#include "sluice/json.h"

using sluice::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<sluice::Json> json = sluice::ParseJson(text, "flow");
  if (!json.ok()) return 0;
  absl::StatusOr<sluice::FlowShape> shape = sluice::FlowShape::FromJson(*json);
  if (!shape.ok()) {
    Check(shape.status().code() == absl::StatusCode::kInvalidArgument ||
              shape.status().code() == absl::StatusCode::kDataLoss ||
              shape.status().code() == absl::StatusCode::kInternal,
          "a refused shape says why");
    return 0;
  }
  absl::StatusOr<sluice::FlowShape> again =
      sluice::FlowShape::FromJson(shape->ToJson());
  Check(again.ok(), "a shape's own JSON is accepted");
  Check(again->DifferencesFrom(*shape).empty(), "the shape round-trips");
  return 0;
}
