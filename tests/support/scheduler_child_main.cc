// A scheduler process for tests/schedules_process_test.cc: opens the store
// named by argv[1] and, for each line "<unix seconds>" read from stdin, sets
// its manual clock there, runs one scheduler pass and prints
// "passed <unix seconds> <runs started>". Exits 0 at end of input.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "sluice/backends.h"
#include "sluice/clock.h"
#include "sluice/engine.h"

int main(int argc, char** argv) {
  using namespace sluice;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s BACKEND_URL < times\n", argv[0]);
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(argv[1]);
  if (!backend.ok()) {
    std::fprintf(stderr, "%s\n", backend.status().ToString().c_str());
    return 1;
  }
  ManualClock clock;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(**backend, {.clock = &clock});
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    const int64_t seconds = std::stoll(line);
    clock.Set(absl::FromUnixSeconds(seconds));
    absl::StatusOr<SchedulerPass> pass =
        (*engine)->RunSchedulerOnce(clock.Now());
    if (!pass.ok()) {
      std::fprintf(stderr, "%s\n", pass.status().ToString().c_str());
      return 1;
    }
    std::printf("passed %lld %d\n", static_cast<long long>(seconds),
                pass->runs_started);
    std::fflush(stdout);
  }
  return 0;
}
