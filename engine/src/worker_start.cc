// Starting workers: which definitions a worker serves, and checking them.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "compiled_flow.h"
#include "engine_impl.h"
#include "queue_name.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "worker_shared.h"

namespace sluice {
namespace {

// The distinct queues of a flow's steps, quoted, for error messages.
std::string QueuesOf(const FlowShape& shape) {
  std::vector<std::string> queues;
  for (const StepShape& step : shape.steps) {
    std::string quoted = StrCat("\"", step.queue_name, "\"");
    if (std::find(queues.begin(), queues.end(), quoted) == queues.end()) {
      queues.push_back(std::move(quoted));
    }
  }
  return absl::StrJoin(queues, ", ");
}

absl::Status ValidateWorkerOptions(const WorkerOptions& o) {
  auto positive = [](absl::Duration d) {
    return d > absl::ZeroDuration() && d < absl::InfiniteDuration();
  };
  if (o.concurrency < 1 || o.concurrency > 1000) {
    return absl::InvalidArgumentError(StrCat(
        "worker concurrency ", o.concurrency, " is out of range 1..1000"));
  }
  if (o.batch_size < 1 || o.batch_size > 1000) {
    return absl::InvalidArgumentError(
        StrCat("worker batch_size ", o.batch_size, " is out of range 1..1000"));
  }
  if (!positive(o.poll_interval) || !positive(o.heartbeat_interval) ||
      !positive(o.drain_timeout) || o.sweep_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "worker poll_interval, heartbeat_interval and drain_timeout must be "
        "positive and finite; sweep_interval must be >= 0");
  }
  return absl::OkStatus();
}

// The steps of `flow` this worker serves: those named in `served`, or every
// step; not yet narrowed to the queue.
absl::StatusOr<std::vector<int>> ChosenSteps(const WorkerSpec::Served& served) {
  const FlowShape& shape = served.flow->shape();
  std::vector<int> chosen;
  if (!served.steps) {
    for (size_t i = 0; i < shape.steps.size(); ++i) {
      chosen.push_back(static_cast<int>(i));
    }
    return chosen;
  }
  if (served.steps->empty()) {
    return absl::InvalidArgumentError(
        StrCat("StartWorker: flow \"", shape.slug,
               "\" is served with an empty step list; name its steps or "
               "serve the whole flow"));
  }
  for (const std::string& step : *served.steps) {
    int index = shape.StepIndex(step);
    if (index < 0) {
      return absl::InvalidArgumentError(StrCat(
          "StartWorker: flow \"", shape.slug, "\" has no step \"", step, "\""));
    }
    if (std::find(chosen.begin(), chosen.end(), index) != chosen.end()) {
      return absl::InvalidArgumentError(StrCat("StartWorker: step \"", step,
                                               "\" of flow \"", shape.slug,
                                               "\" is named twice"));
    }
    chosen.push_back(index);
  }
  std::sort(chosen.begin(), chosen.end());  // definition order
  return chosen;
}

// Without WorkerSpec::Queue, the one queue the chosen steps use.
absl::StatusOr<std::string> ImpliedQueue(
    const WorkerSpec& spec, const std::vector<std::vector<int>>& chosen) {
  std::string queue;
  const FlowShape* first = nullptr;
  for (size_t f = 0; f < chosen.size(); ++f) {
    const FlowShape& shape = spec.served()[f].flow->shape();
    for (int index : chosen[f]) {
      const std::string& q = shape.steps[index].queue_name;
      if (first == nullptr) {
        queue = q;
        first = &shape;
      }
      if (q == queue) continue;
      return absl::InvalidArgumentError(
          StrCat("StartWorker: \"", shape.slug, "\" step \"",
                 shape.steps[index].slug, "\" uses queue \"", q, "\" but \"",
                 first->slug, "\" uses queue \"", queue,
                 "\"; one worker serves one queue (start one worker per queue, "
                 "choosing it with WorkerSpec::Queue)"));
    }
  }
  return queue;
}

// Checks the spec and works out what the worker serves, before anything is
// deployed or started.
absl::StatusOr<WorkerPlan> PlanWorker(const WorkerSpec& spec) {
  if (spec.served().empty()) {
    return absl::InvalidArgumentError(
        "StartWorker: the worker spec serves nothing; add a flow or job");
  }
  if (!spec.queue().empty()) {
    if (absl::Status s = queue_name::Validate(spec.queue()); !s.ok()) {
      return absl::InvalidArgumentError(StrCat("StartWorker: ", s.message()));
    }
  }
  std::vector<std::vector<int>> chosen;
  for (size_t f = 0; f < spec.served().size(); ++f) {
    const Flow& flow = *spec.served()[f].flow;
    SLUICE_RETURN_IF_ERROR(flow.Validate());
    for (size_t g = 0; g < f; ++g) {
      if (spec.served()[g].flow->slug() == flow.slug()) {
        return absl::InvalidArgumentError(
            StrCat("StartWorker: \"", flow.slug(), "\" is served twice"));
      }
    }
    SLUICE_ASSIGN_OR_RETURN(std::vector<int> steps,
                            ChosenSteps(spec.served()[f]));
    chosen.push_back(std::move(steps));
  }
  WorkerPlan plan;
  plan.queue = spec.queue();
  if (plan.queue.empty()) {
    SLUICE_ASSIGN_OR_RETURN(plan.queue, ImpliedQueue(spec, chosen));
  }
  for (size_t f = 0; f < spec.served().size(); ++f) {
    const WorkerSpec::Served& served = spec.served()[f];
    const FlowShape& shape = served.flow->shape();
    ServedSteps record{shape.slug, {}};
    for (int index : chosen[f]) {
      const StepShape& step = shape.steps[index];
      if (step.queue_name != plan.queue) {
        if (!served.steps) continue;  // the flow's steps on other queues
        return absl::InvalidArgumentError(
            StrCat("StartWorker: step \"", step.slug, "\" of flow \"",
                   shape.slug, "\" is on queue \"", step.queue_name,
                   "\", not on the worker's queue \"", plan.queue, "\""));
      }
      // A Wait step runs no handler: the claim applies its timeout.
      if (!served.flow->handler(index) && step.kind != StepKind::kWait) {
        return absl::InvalidArgumentError(StrCat("flow \"", shape.slug,
                                                 "\": step \"", step.slug,
                                                 "\" has no handler"));
      }
      plan.served.Add(shape.slug, index);
      record.steps.push_back(step.slug);
    }
    if (record.steps.empty()) {
      return absl::InvalidArgumentError(StrCat(
          "StartWorker: flow \"", shape.slug, "\" has no step on queue \"",
          plan.queue, "\" (its steps use ", QueuesOf(shape), ")"));
    }
    plan.served_steps.push_back(std::move(record));
    plan.flows.push_back(*served.flow);
  }
  return plan;
}

}  // namespace

WorkerSpec& WorkerSpec::Queue(std::string name) {
  queue_ = std::move(name);
  return *this;
}

WorkerSpec& WorkerSpec::Serve(const Flow& flow) {
  served_.push_back(Served{&flow, std::nullopt});
  return *this;
}

WorkerSpec& WorkerSpec::Serve(const Flow& flow,
                              std::vector<std::string> steps) {
  served_.push_back(Served{&flow, std::move(steps)});
  return *this;
}

WorkerSpec& WorkerSpec::Serve(const Job& job) { return Serve(job.flow()); }

absl::StatusOr<std::unique_ptr<Worker>> Engine::StartWorker(
    const Flow& flow, WorkerOptions options) {
  return StartWorker(WorkerSpec().Serve(flow), std::move(options));
}

absl::StatusOr<std::unique_ptr<Worker>> Engine::StartWorker(
    const WorkerSpec& spec, WorkerOptions options) {
  SLUICE_ASSIGN_OR_RETURN(WorkerPlan plan, PlanWorker(spec));
  SLUICE_RETURN_IF_ERROR(ValidateWorkerOptions(options));
  for (const Flow& flow : plan.flows) {
    SLUICE_ASSIGN_OR_RETURN(Impl::Deployed deployed, impl_->DeployFlow(flow));
    plan.generations.push_back(
        FlowGeneration{flow.slug(), deployed.generation});
  }
  return LaunchWorker(*this, std::move(plan), std::move(options));
}

}  // namespace sluice
