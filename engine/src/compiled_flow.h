// A flow shape with the derived facts the engine needs on every transition:
// dependency indices, dependents, leaves and effective options per step.
// Immutable once built; shared between threads.
#ifndef SLUICE_ENGINE_COMPILED_FLOW_H_
#define SLUICE_ENGINE_COMPILED_FLOW_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sluice/flow.h"

namespace sluice {

struct CompiledStep {
  const StepShape* shape = nullptr;
  int index = 0;
  std::vector<int> dependencies;  // indices, in definition order
  std::vector<int> dependents;    // indices, ascending
  bool is_leaf = false;
  bool is_root_map = false;
  bool feeds_map = false;  // a single or Wait step with a dependent map step
  // Effective options: the step's, else the flow's.
  int max_attempts = 1;
  absl::Duration base_delay;
  BackoffKind backoff = BackoffKind::kExponential;
  absl::Duration timeout;
  absl::Duration start_delay;

  bool is_wait() const { return shape->kind == StepKind::kWait; }
};

class CompiledFlow {
 public:
  // `shape` must be valid (Flow::Validate or a stored definition).
  static absl::StatusOr<std::shared_ptr<const CompiledFlow>> Compile(
      FlowShape shape);

  const FlowShape& shape() const { return shape_; }
  const std::string& slug() const { return shape_.slug; }
  const std::vector<CompiledStep>& steps() const { return steps_; }
  const CompiledStep& step(int index) const { return steps_[index]; }
  int step_count() const { return static_cast<int>(steps_.size()); }
  // The first root map step, or -1.
  int root_map_step() const { return root_map_step_; }
  // The distinct queues this flow's steps use, in step order.
  const std::vector<std::string>& queues() const { return queues_; }

 private:
  FlowShape shape_;
  std::vector<CompiledStep> steps_;
  std::vector<std::string> queues_;
  int root_map_step_ = -1;
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_COMPILED_FLOW_H_
