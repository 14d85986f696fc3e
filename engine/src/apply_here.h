// Applying completion reports in the transaction that records them
// (FinishOptions::apply_completions; decision 0048).
#ifndef SLUICE_ENGINE_APPLY_HERE_H_
#define SLUICE_ENGINE_APPLY_HERE_H_

#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine_impl.h"
#include "sluice/backend.h"
#include "sluice/internal/one_trip_reads.h"

namespace sluice {

// The outputs of tasks of single-task steps that the transaction completes,
// by task: a step they complete takes its output from here instead of
// reading it back (the apply moves each one it uses).
using OutputsInHand = absl::flat_hash_map<TaskKey, std::optional<Json>>;

// Runs read ahead, locked without waiting, with their step states without
// payloads (internal::OneTripFinishes): `ids` sorted and unique, `runs` in
// their order.
struct RunsReadAhead {
  std::vector<RunId> ids;
  internal::RunsWithSteps runs;
};

// Applies in `tx` the completion reports of `reports` whose runs `tx` can
// lock without waiting and that have no cancel pending, as ApplyReports
// would; returns the others, for the outbox. Takes its runs from `ahead`
// when that holds them all, else reads them.
absl::StatusOr<std::vector<OutboxReport>> ApplyCompletionsHere(
    Engine::Impl& impl, Transaction& tx, std::vector<OutboxReport> reports,
    OutputsInHand& in_hand, TransactionEffects& effects,
    RunsReadAhead* ahead = nullptr);

}  // namespace sluice

#endif  // SLUICE_ENGINE_APPLY_HERE_H_
