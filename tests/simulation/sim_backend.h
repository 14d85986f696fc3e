// The backend the simulated engine sees: a forwarding wrapper around the
// store that fails calls at random with kUnavailable (as a dropped
// connection would), and keeps a ledger of the outbox reports that committed
// transactions appended and took, so the checker can prove that no report is
// applied twice.
#ifndef SLUICE_TESTS_SIMULATION_SIM_BACKEND_H_
#define SLUICE_TESTS_SIMULATION_SIM_BACKEND_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sim_random.h"
#include "sluice/forwarding_backend.h"

namespace sluice::simulation {

// What committed transactions did to the outbox.
struct ReportLedger {
  std::map<int64_t, TaskKey> appended;  // report id -> its task
  std::map<TaskKey, int> reports_per_task;
  std::map<int64_t, int> times_taken;  // report id -> committed takes
  // Problems seen at commit, for the checker to report.
  std::vector<int64_t> taken_twice;
  std::vector<int64_t> taken_unknown;  // never appended by a commit
  std::vector<TaskKey> reported_twice;
};

class SimBackend : public ForwardingBackend {
 public:
  // `target` must outlive this backend. Failures are drawn from `seed`.
  SimBackend(Backend& target, uint64_t seed)
      : ForwardingBackend(target), random_(seed) {}

  // Each later call (Begin included) fails with probability `p`.
  void set_failure_rate(double p) { failure_rate_ = p; }
  double failure_rate() const { return failure_rate_; }
  // Failures injected so far.
  int64_t injected() const { return injected_; }
  const ReportLedger& ledger() const { return ledger_; }
  // The runs that committed transactions wrote to (their run, step state,
  // task or report rows) since the last call; the checker re-reads only
  // those among the runs that had already ended.
  std::vector<RunId> TakeTouchedRuns();
  // The messages committed transactions archived or deleted since the last
  // call, by queue and id (a task's message is the one write not keyed by
  // its run).
  std::vector<std::pair<std::string, int64_t>> TakeEndedMessages();

 protected:
  absl::Status BeforeBegin() override { return MaybeFail(); }
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override;

 private:
  class Tx;
  absl::Status MaybeFail();

  SimRandom random_;
  double failure_rate_ = 0;
  int64_t injected_ = 0;
  ReportLedger ledger_;
  std::vector<RunId> touched_;
  std::vector<std::pair<std::string, int64_t>> ended_;
};

}  // namespace sluice::simulation

#endif  // SLUICE_TESTS_SIMULATION_SIM_BACKEND_H_
