// The fixed flows the simulator drives. Every handler is a pure function of
// its input, so a completed run's output is a pure function of the run's
// input; `expected_output` computes it a second, independent way.
#ifndef SLUICE_TESTS_SIMULATION_SIM_FLOWS_H_
#define SLUICE_TESTS_SIMULATION_SIM_FLOWS_H_

#include <functional>
#include <vector>

#include "sim_random.h"
#include "sluice/flow.h"
#include "sluice/json.h"

namespace sluice::simulation {

// Every failure the simulator makes a handler return carries this text, so
// the checker can tell a failure it caused from one it did not.
inline constexpr char kSimFailure[] = "sim failure";
// What a handler returns for an input it did not expect (a routing bug).
inline constexpr char kUnexpectedInput[] = "handler got unexpected input";

struct SimFlow {
  Flow flow;
  // A random run input the flow accepts.
  std::function<Json(SimRandom&)> make_input;
  // The output a completed run must have for `input`.
  std::function<Json(const Json& input)> expected_output;
};

// The flows, in a fixed order:
//   chain:   parse -> scale -> shift                       (single steps)
//   diamond: root -> left, root -> right (only if run.flag) -> join
//   fanout:  expand -> square (map over expand's array, maybe empty) -> sum
//   batch:   double (a root map over the run input array)
std::vector<SimFlow> MakeSimFlows();

}  // namespace sluice::simulation

#endif  // SLUICE_TESTS_SIMULATION_SIM_FLOWS_H_
