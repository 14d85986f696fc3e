// A claim decided on the server in one call (internal::OneTripClaims),
// when every message it reads is a plain queued task (claim.cc falls back to
// the engine's claim otherwise).
#ifndef SLUICE_ENGINE_CLAIM_ON_SERVER_H_
#define SLUICE_ENGINE_CLAIM_ON_SERVER_H_

#include <optional>
#include <string_view>
#include <vector>

#include "compiled_flow.h"
#include "engine_impl.h"
#include "sluice/engine.h"
#include "sluice/internal/one_trip_claims.h"

namespace sluice::claim_internal {

// The steps a claim on the server may take tasks of, with their leases at
// `now`, and each one's compiled step beside it.
struct ServerSteps {
  std::vector<internal::ClaimableStep> claimable;
  std::vector<const CompiledStep*> compiled;

  const CompiledStep* Find(std::string_view flow_slug, int step_index) const {
    for (size_t i = 0; i < claimable.size(); ++i) {
      if (claimable[i].step_index == step_index &&
          claimable[i].flow_slug == flow_slug) {
        return compiled[i];
      }
    }
    return nullptr;
  }
};

// The steps of `request` a claim on the server may take at `now`.
absl::StatusOr<ServerSteps> ServerStepsOf(FlowLookup& flows,
                                          const ClaimRequest& request,
                                          absl::Time now,
                                          const EngineOptions& options);

// The whole claim in one call to the transaction (one round trip on a
// server), when every message it reads is a queued task of a step in
// `steps`; nullopt, with the transaction over and nothing changed, when
// one is not, so the engine's claim must decide.
absl::StatusOr<std::optional<std::vector<ClaimedTask>>> ClaimOnServer(
    Engine& engine, internal::OneTripClaims& tx, const ServerSteps& steps,
    const ClaimRequest& request, absl::Time now,
    std::optional<absl::Time>* next_visible_at);

}  // namespace sluice::claim_internal

#endif  // SLUICE_ENGINE_CLAIM_ON_SERVER_H_
