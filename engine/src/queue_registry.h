// The queue registry at deployment: which queues a flow needs, who owns
// them, and refusing a queue that belongs to someone else
// (docs/decisions/0024).
#ifndef SLUICE_ENGINE_QUEUE_REGISTRY_H_
#define SLUICE_ENGINE_QUEUE_REGISTRY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "compiled_flow.h"
#include "sluice/backend.h"
#include "sluice/flow.h"

namespace sluice {

// Flow and step modes give a flow private queues, owned by its concrete slug
// (deleting the flow drops them); shared and explicit queues have no owner.
bool HasPrivateQueues(QueueMode mode);

// The registry owner of `flow`'s queues: its slug, or empty for shared.
std::string QueueOwner(const FlowShape& flow);

// Registers every queue of `flow` that is not registered yet. First checks
// all of them, so that a refusal changes nothing: kFailedPrecondition for a
// queue that exists but is not in the registry, a private queue whose name
// is registered to another flow or as shared, or a shared queue whose name
// is some flow's private queue.
absl::Status RegisterQueues(Transaction& tx, const CompiledFlow& flow,
                            absl::Time now);

}  // namespace sluice

#endif  // SLUICE_ENGINE_QUEUE_REGISTRY_H_
