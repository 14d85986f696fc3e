// Batch helpers of the Postgres tables: add-and-return counters applied by
// one UPDATE, and last-write-wins record batches.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_COUNTER_SLOTS_H_
#define SLUICE_BACKENDS_POSTGRES_PG_COUNTER_SLOTS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace sluice::postgres_internal {

// Add-and-return for a batch of counter deltas, several of them perhaps to
// one row. A batch UPDATE applies each row's summed delta once and returns
// the row's final values; each delta's own result is then its row's final
// value less the deltas after it, which is what adding them one at a time
// would have returned.
template <typename Key, size_t kCounters>
class CounterSlots {
 public:
  using Values = std::array<int64_t, kCounters>;

  // Returns the key's slot (slots are numbered in order of first use).
  size_t Add(const Key& key, const Values& delta) {
    auto [it, inserted] = slot_of_.try_emplace(key, keys_.size());
    if (inserted) {
      keys_.push_back(key);
      sums_.push_back({});
      finals_.emplace_back();
    }
    for (size_t c = 0; c < kCounters; ++c) sums_[it->second][c] += delta[c];
    deltas_.push_back({it->second, delta});
    return it->second;
  }
  size_t slots() const { return keys_.size(); }
  const Key& key(size_t slot) const { return keys_[slot]; }
  const Values& sum(size_t slot) const { return sums_[slot]; }
  void SetFinal(size_t slot, const Values& values) { finals_[slot] = values; }

  // Each delta's result, in order; or the position of the first delta whose
  // row was not found.
  std::vector<std::array<int, kCounters>> Results(
      std::optional<size_t>* missing) {
    std::vector<std::array<int, kCounters>> results(deltas_.size());
    for (size_t i = deltas_.size(); i-- > 0;) {
      std::optional<Values>& final_values = finals_[deltas_[i].first];
      if (!final_values.has_value()) {
        *missing = i;
        continue;
      }
      for (size_t c = 0; c < kCounters; ++c) {
        results[i][c] = static_cast<int>((*final_values)[c]);
        (*final_values)[c] -= deltas_[i].second[c];
      }
    }
    return results;
  }

 private:
  absl::flat_hash_map<Key, size_t> slot_of_;
  std::vector<Key> keys_;
  std::vector<Values> sums_;
  std::vector<std::optional<Values>> finals_;
  std::vector<std::pair<size_t, Values>> deltas_;
};

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

#endif  // SLUICE_BACKENDS_POSTGRES_PG_COUNTER_SLOTS_H_
