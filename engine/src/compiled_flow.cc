#include "compiled_flow.h"

#include <algorithm>

#include "sluice/internal/strings.h"

namespace sluice {

absl::StatusOr<std::shared_ptr<const CompiledFlow>> CompiledFlow::Compile(
    FlowShape shape) {
  auto flow = std::make_shared<CompiledFlow>();
  flow->shape_ = std::move(shape);
  const FlowShape& s = flow->shape_;
  flow->steps_.resize(s.steps.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    CompiledStep& step = flow->steps_[i];
    const StepShape& shape_step = s.steps[i];
    step.shape = &shape_step;
    step.index = static_cast<int>(i);
    for (const std::string& dep : shape_step.spec.depends_on) {
      int d = s.StepIndex(dep);
      if (d < 0 || d >= static_cast<int>(i)) {
        return absl::InternalError(StrCat(
            "flow \"", s.slug, "\": step \"", shape_step.slug,
            "\" depends on \"", dep, "\", which is not defined before it"));
      }
      step.dependencies.push_back(d);
      flow->steps_[d].dependents.push_back(step.index);
    }
    const StepSpec& spec = shape_step.spec;
    step.max_attempts = spec.max_attempts.value_or(s.options.max_attempts);
    step.base_delay = spec.base_delay.value_or(s.options.base_delay);
    step.backoff = spec.backoff.value_or(s.options.backoff);
    step.timeout = spec.timeout.value_or(s.options.timeout);
    step.start_delay = spec.start_delay.value_or(absl::ZeroDuration());
    step.is_root_map =
        shape_step.kind == StepKind::kMap && step.dependencies.empty();
    if (step.is_root_map && flow->root_map_step_ < 0) {
      flow->root_map_step_ = step.index;
    }
    if (std::find(flow->queues_.begin(), flow->queues_.end(),
                  shape_step.queue_name) == flow->queues_.end()) {
      flow->queues_.push_back(shape_step.queue_name);
    }
  }
  for (CompiledStep& step : flow->steps_) {
    step.is_leaf = step.dependents.empty();
    if (step.shape->kind != StepKind::kMap) {
      for (int d : step.dependents) {
        if (s.steps[d].kind == StepKind::kMap) step.feeds_map = true;
      }
    }
  }
  return std::shared_ptr<const CompiledFlow>(std::move(flow));
}

}  // namespace sluice
