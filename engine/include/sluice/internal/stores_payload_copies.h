// An optional marker of a Backend: its transactions keep the payloads of the
// records they are given by moving them into the store (the memory backend),
// and one writer at a time holds the store. A run input the engine lends to
// InsertRuns would then be copied inside the transaction, under the store's
// lock; the engine copies it into the run's record before the transaction
// begins instead (WriteBatch::OwnLentInputs). A backend that writes a lent
// input out (SQLite, Postgres) lacks the marker, and no copy is made.
//
// The engine finds it with dynamic_cast, as for one_trip_claims.h.
#ifndef SLUICE_INTERNAL_STORES_PAYLOAD_COPIES_H_
#define SLUICE_INTERNAL_STORES_PAYLOAD_COPIES_H_

namespace sluice::internal {

class StoresPayloadCopies {
 public:
  virtual ~StoresPayloadCopies() = default;
};

}  // namespace sluice::internal

#endif  // SLUICE_INTERNAL_STORES_PAYLOAD_COPIES_H_
