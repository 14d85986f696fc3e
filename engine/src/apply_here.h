// Applying completion reports in the transaction that records them
// (FinishOptions::apply_completions; decision 0048).
#ifndef SLUICE_ENGINE_APPLY_HERE_H_
#define SLUICE_ENGINE_APPLY_HERE_H_

#include <vector>

#include "engine_impl.h"
#include "sluice/backend.h"

namespace sluice {

// Applies in `tx` the completion reports of `reports` whose runs `tx` can
// lock without waiting and that have no cancel pending, as ApplyReports
// would; returns the others, for the outbox.
absl::StatusOr<std::vector<OutboxReport>> ApplyCompletionsHere(
    Engine::Impl& impl, Transaction& tx, std::vector<OutboxReport> reports,
    TransactionEffects& effects);

}  // namespace sluice

#endif  // SLUICE_ENGINE_APPLY_HERE_H_
