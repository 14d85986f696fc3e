// The fuzz targets' assertion: libFuzzer saves the input that aborts.
#ifndef SLUICE_FUZZ_FUZZ_CHECK_H_
#define SLUICE_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

namespace sluice::fuzz {

// Aborts, naming the invariant, when `condition` is false. Unbuffered
// stderr, so the name is printed before the abort.
inline void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace sluice::fuzz

#endif  // SLUICE_FUZZ_FUZZ_CHECK_H_
