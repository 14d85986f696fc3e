// Add-and-return for a batch of counter deltas, some of them to the same
// row (the SQLite and Postgres backends' batch counter updates).
//
// A batch UPDATE takes each row's delta from the batch once, so the deltas
// to one row are summed into that row's slot first. After the UPDATE the
// caller reads each slot's final values back; each delta's own result is
// then its row's final value less the deltas after it, which is what adding
// them one at a time would have returned:
//
//   CounterBatch<int64_t, 1> batch;
//   for (...) batch.Add(seq, {delta});
//   ... bind batch.key(slot) and batch.sum(slot) for each slot, UPDATE ...
//   ... for each row read back: batch.SetFinal(slot, {value}) ...
//   CounterBatch<int64_t, 1>::Results results = batch.TakeResults();
#ifndef SLUICE_INTERNAL_COUNTER_BATCH_H_
#define SLUICE_INTERNAL_COUNTER_BATCH_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace sluice::internal {

template <typename Key, size_t kCounters>
class CounterBatch {
 public:
  using Values = std::array<int64_t, kCounters>;

  // Each delta's result, in the order they were added, and the position of
  // the first delta whose row was not read back (nullopt if none) or whose
  // result does not fit an int (which only broken bookkeeping causes).
  struct Results {
    std::vector<std::array<int, kCounters>> values;
    std::optional<size_t> missing;
    std::optional<size_t> out_of_range;
  };

  // Adds the delta at the next position to the row `key`; returns the row's
  // slot.
  size_t Add(const Key& key, const Values& delta) {
    auto [it, inserted] = slot_of_key_.try_emplace(key, slots_.size());
    if (inserted) slots_.push_back(Slot{key, {}, {}, false});
    Slot& slot = slots_[it->second];
    for (size_t c = 0; c < kCounters; ++c) slot.sum[c] += delta[c];
    deltas_.push_back(Delta{it->second, delta});
    return it->second;
  }

  // Rows, numbered from 0 in the order of their first delta.
  size_t slots() const { return slots_.size(); }
  const Key& key(size_t slot) const { return slots_[slot].key; }
  const Values& sum(size_t slot) const { return slots_[slot].sum; }

  // The values of row `slot` after the UPDATE.
  void SetFinal(size_t slot, const Values& values) {
    slots_[slot].final_values = values;
    slots_[slot].read_back = true;
  }

  // Works out each delta's result. Call once, after SetFinal.
  Results TakeResults() {
    Results results;
    results.values.resize(deltas_.size());
    for (size_t i = deltas_.size(); i-- > 0;) {
      Slot& slot = slots_[deltas_[i].slot];
      if (!slot.read_back) results.missing = i;
      for (size_t c = 0; c < kCounters; ++c) {
        const int64_t value = slot.final_values[c];
        if (value < std::numeric_limits<int>::min() ||
            value > std::numeric_limits<int>::max()) {
          results.out_of_range = i;
        }
        results.values[i][c] = static_cast<int>(value);
        slot.final_values[c] -= deltas_[i].delta[c];
      }
    }
    return results;
  }

 private:
  struct Slot {
    Key key;
    Values sum;
    Values final_values;
    bool read_back;
  };
  struct Delta {
    size_t slot;
    Values delta;
  };

  absl::flat_hash_map<Key, size_t> slot_of_key_;
  std::vector<Slot> slots_;
  std::vector<Delta> deltas_;
};

// Sets `last[slot]` to `record`, `slot` being the one CounterBatch::Add
// returned for it: of the records of one row, the last is written.
inline void KeepLastRecord(std::vector<size_t>& last, size_t slot,
                           size_t record) {
  if (slot == last.size()) {
    last.push_back(record);
  } else {
    last[slot] = record;
  }
}

}  // namespace sluice::internal

#endif  // SLUICE_INTERNAL_COUNTER_BATCH_H_
