// An optional marker of a Transaction: its UpdateRuns, UpdateStepStates,
// UpdateRunsAndCounters and UpdateStepStatesAndCounters read the records'
// outputs and never move from them (backend.h lets a backend move). The
// engine then lends one output to two records it writes one after the other
// in the same transaction, instead of copying it: a completed run's output
// and the leaf step state that ended with it (decision 0053).
//
// The engine finds it with dynamic_cast, as for one_trip_claims.h; without
// it (the memory backend, which moves outputs into its store, and any
// forwarding wrapper) it copies.
#ifndef SLUICE_INTERNAL_WRITES_KEEP_OUTPUTS_H_
#define SLUICE_INTERNAL_WRITES_KEEP_OUTPUTS_H_

namespace sluice::internal {

class WritesKeepOutputs {
 public:
  virtual ~WritesKeepOutputs() = default;
};

}  // namespace sluice::internal

#endif  // SLUICE_INTERNAL_WRITES_KEEP_OUTPUTS_H_
