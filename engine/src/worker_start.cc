// Starting workers: which definitions a worker serves, and checking them.
#include <memory>
#include <string>
#include <vector>

#include "compiled_flow.h"
#include "engine_impl.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "worker_shared.h"

namespace sluice {
namespace {

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

}  // namespace

WorkerSpec& WorkerSpec::Serve(const Flow& flow) {
  flows_.push_back(&flow);
  return *this;
}

WorkerSpec& WorkerSpec::Serve(const Job& job) { return Serve(job.flow()); }

absl::StatusOr<std::unique_ptr<Worker>> Engine::StartWorker(
    const Flow& flow, WorkerOptions options) {
  return StartWorker(WorkerSpec().Serve(flow), std::move(options));
}

absl::StatusOr<std::unique_ptr<Worker>> Engine::StartWorker(
    const WorkerSpec& spec, WorkerOptions options) {
  if (spec.flows().empty()) {
    return absl::InvalidArgumentError(
        "StartWorker: the worker spec serves nothing; add a flow or job");
  }
  std::vector<std::shared_ptr<const CompiledFlow>> compiled;
  std::string queue;
  for (const Flow* flow : spec.flows()) {
    SLUICE_RETURN_IF_ERROR(flow->ValidateForWorker());
    for (const auto& other : compiled) {
      if (other->slug() == flow->slug()) {
        return absl::InvalidArgumentError(
            StrCat("StartWorker: \"", flow->slug(), "\" is served twice"));
      }
    }
    SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledFlow> c,
                            CompiledFlow::Compile(flow->shape()));
    for (const std::string& q : c->queues()) {
      if (queue.empty()) queue = q;
      if (q != queue) {
        return absl::InvalidArgumentError(StrCat(
            "StartWorker: \"", flow->slug(), "\" uses queue \"", q, "\" but \"",
            compiled.empty() ? flow->slug() : compiled[0]->slug(),
            "\" uses queue \"", queue,
            "\"; one worker serves one queue (start one worker per queue)"));
      }
    }
    compiled.push_back(std::move(c));
  }
  SLUICE_RETURN_IF_ERROR(ValidateWorkerOptions(options));
  std::vector<Flow> flows;
  std::vector<FlowGeneration> generations;
  for (const Flow* flow : spec.flows()) {
    SLUICE_ASSIGN_OR_RETURN(Impl::Deployed deployed, impl_->DeployFlow(*flow));
    generations.push_back(FlowGeneration{flow->slug(), deployed.generation});
    flows.push_back(*flow);
  }
  return LaunchWorker(*this, std::move(flows), std::move(compiled),
                      std::move(queue), std::move(options),
                      std::move(generations));
}

}  // namespace sluice
