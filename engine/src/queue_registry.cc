#include "queue_registry.h"

#include <vector>

#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

// The first step that uses `queue`, for error messages.
std::string StepOf(const CompiledFlow& flow, const std::string& queue) {
  for (const CompiledStep& step : flow.steps()) {
    if (step.shape->queue_name == queue) return step.shape->slug;
  }
  return std::string();
}

absl::Status Refuse(const CompiledFlow& flow, const std::string& queue,
                    const QueueRecord& entry) {
  bool wants_private = HasPrivateQueues(flow.shape().queue_mode);
  return absl::FailedPreconditionError(StrCat(
      "flow \"", flow.slug(), "\": queue \"", queue, "\" is owned by ",
      entry.owner_flow.empty() ? std::string("no flow (it is shared)")
                               : StrCat("flow \"", entry.owner_flow, "\""),
      ", so step \"", StepOf(flow, queue), "\" can't use it as a ",
      wants_private ? "private queue; choose another flow slug"
                    : "shared queue; choose another queue name"));
}

}  // namespace

bool HasPrivateQueues(QueueMode mode) {
  return mode == QueueMode::kFlow || mode == QueueMode::kStep;
}

std::string QueueOwner(const FlowShape& flow) {
  return HasPrivateQueues(flow.queue_mode) ? flow.slug : std::string();
}

absl::Status RegisterQueues(Transaction& tx, const CompiledFlow& flow,
                            absl::Time now) {
  std::string owner = QueueOwner(flow.shape());
  std::vector<std::string> missing;
  for (const std::string& queue : flow.queues()) {
    SLUICE_ASSIGN_OR_RETURN(std::optional<QueueRecord> entry,
                            tx.GetQueue(queue));
    if (entry) {
      if (entry->owner_flow == owner) continue;
      return Refuse(flow, queue, *entry);
    }
    SLUICE_ASSIGN_OR_RETURN(bool exists, tx.QueueExists(queue));
    if (exists) {
      return absl::FailedPreconditionError(StrCat(
          "flow \"", flow.slug(), "\": queue \"", queue, "\" (step \"",
          StepOf(flow, queue),
          "\") already exists but is not in the queue registry (Sluice did "
          "not create it); drop it or choose another ",
          owner.empty() ? "queue name" : "flow slug"));
    }
    missing.push_back(queue);
  }
  for (const std::string& queue : missing) {
    SLUICE_RETURN_IF_ERROR(tx.CreateQueue(QueueRecord{queue, owner, now}));
  }
  return absl::OkStatus();
}

}  // namespace sluice
