// Batch helpers of the Postgres tables: the results of add-and-return
// counters applied by one UPDATE, and last-write-wins record batches.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_BATCHES_H_
#define SLUICE_BACKENDS_POSTGRES_PG_BATCHES_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pg_connection.h"
#include "sluice/backend.h"
#include "sluice/internal/counter_batch.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {

using internal::CounterBatch;

// Reads a batch counter UPDATE's rows, (slot, counters...) with slots
// 1-based as WITH ORDINALITY numbers them, into `batch`; returns each
// delta's result, in order, or kNotFound "<row_name(i)> does not exist" for
// the first delta i whose row was not found.
template <typename Key, size_t kCounters, typename RowName>
absl::StatusOr<std::vector<std::array<int, kCounters>>> ResultsOf(
    const Result& result, CounterBatch<Key, kCounters>& batch,
    RowName row_name) {
  for (int i = 0; i < result.rows(); ++i) {
    Row row = result.row(i);
    const int64_t slot = row.Int() - 1;
    typename CounterBatch<Key, kCounters>::Values values;
    for (size_t c = 0; c < kCounters; ++c) values[c] = row.Int();
    if (slot < 0 || static_cast<size_t>(slot) >= batch.slots()) {
      return absl::InternalError(StrCat("slot ", slot + 1, " out of range"));
    }
    batch.SetFinal(slot, values);
  }
  auto results = batch.TakeResults();
  if (results.missing.has_value()) {
    return absl::NotFoundError(
        StrCat(row_name(*results.missing), " does not exist"));
  }
  if (results.out_of_range.has_value()) {
    return absl::InternalError(StrCat(row_name(*results.out_of_range),
                                      ": a counter out of int range"));
  }
  return std::move(results.values);
}

// How a step state is named in errors ("step 2 of run ...").
inline std::string StepName(const RunId& run_id, int step_index) {
  return StrCat("step ", step_index, " of run ", run_id.ToString());
}

// The results of run counters (one counter) and of step counters (two).
inline std::vector<int> RemainingStepsOf(
    const std::vector<std::array<int, 1>>& results) {
  std::vector<int> counts;
  counts.reserve(results.size());
  for (const auto& result : results) counts.push_back(result[0]);
  return counts;
}
inline std::vector<StepCounters> StepCountersOf(
    const std::vector<std::array<int, 2>>& results) {
  std::vector<StepCounters> counts;
  counts.reserve(results.size());
  for (const auto& result : results) {
    counts.push_back(StepCounters{result[0], result[1]});
  }
  return counts;
}

// The positions of `records` to write when the last write of each key wins.
template <typename Record, typename KeyOf>
std::vector<size_t> LastWrites(std::span<const Record> records, KeyOf key_of) {
  absl::flat_hash_map<decltype(key_of(records[0])), size_t> last;
  for (size_t i = 0; i < records.size(); ++i) last[key_of(records[i])] = i;
  std::vector<size_t> positions;
  for (size_t i = 0; i < records.size(); ++i) {
    if (last[key_of(records[i])] == i) positions.push_back(i);
  }
  return positions;
}

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_BATCHES_H_
