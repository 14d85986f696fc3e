// The simulator's one source of randomness: a seeded std::mt19937_64 with
// its own integer and probability helpers. The standard distributions are
// left out on purpose: their results differ between standard libraries, and
// a seed must mean the same run everywhere.
#ifndef SLUICE_TESTS_SIMULATION_SIM_RANDOM_H_
#define SLUICE_TESTS_SIMULATION_SIM_RANDOM_H_

#include <cstdint>
#include <random>
#include <vector>

namespace sluice::simulation {

class SimRandom {
 public:
  explicit SimRandom(uint64_t seed) : engine_(seed) {}

  uint64_t Next() { return engine_(); }
  // Uniform in [lo, hi]; lo <= hi.
  int64_t Between(int64_t lo, int64_t hi) {
    uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(span == 0 ? Next() : Next() % span);
  }
  // True with probability `p`.
  bool Chance(double p) {
    return static_cast<double>(Next() >> 11) * 0x1.0p-53 < p;
  }
  // An index in [0, size); size > 0.
  size_t Index(size_t size) {
    return static_cast<size_t>(Between(0, static_cast<int64_t>(size) - 1));
  }
  // An index chosen with probability proportional to its weight.
  size_t Weighted(const std::vector<int>& weights) {
    int total = 0;
    for (int w : weights) total += w;
    int64_t pick = Between(0, total - 1);
    for (size_t i = 0; i < weights.size(); ++i) {
      if (pick < weights[i]) return i;
      pick -= weights[i];
    }
    return weights.size() - 1;
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace sluice::simulation

#endif  // SLUICE_TESTS_SIMULATION_SIM_RANDOM_H_
