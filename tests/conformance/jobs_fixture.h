// Shared pieces of the jobs conformance tests (jobs_*_test.cc).
#ifndef SLUICE_TESTS_CONFORMANCE_JOBS_FIXTURE_H_
#define SLUICE_TESTS_CONFORMANCE_JOBS_FIXTURE_H_

#include <string>
#include <vector>

#include "harness.h"
#include "sluice/job.h"

namespace sluice::testing {

class JobsConformance : public Conformance {
 protected:
  // A job on queue "work" whose handler returns {"got": payload}.
  static Job EchoJob(std::string name = "echo", JobOptions options = {}) {
    if (options.queue == "default") options.queue = "work";
    return Job(std::move(name), options,
               [](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
                 return boost::json::object{{"got", payload}};
               });
  }

  void DeployJob(const Job& job) {
    absl::StatusOr<DeployOutcome> outcome = engine().Deploy(job);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
  }

  EnqueueResult Enqueue(const Job& job, const Json& payload,
                        const EnqueueOptions& options = {}) {
    absl::StatusOr<EnqueueResult> result =
        engine().Enqueue(job, payload, options);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : EnqueueResult();
  }

  QueueCounts CountsOf(std::string_view queue) {
    absl::StatusOr<QueueState> state = engine().Counts(queue);
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() ? state->counts : QueueCounts();
  }

  // Every run, newest first.
  std::vector<RunRecord> AllRuns() {
    absl::StatusOr<std::vector<RunRecord>> runs = engine().ListRuns("", 10000);
    EXPECT_TRUE(runs.ok()) << runs.status();
    return runs.ok() ? std::move(*runs) : std::vector<RunRecord>();
  }

  // The run ids a claim of `job` takes now, in claim order.
  std::vector<RunId> ClaimRuns(const Job& job, int limit = 100) {
    std::vector<RunId> ids;
    for (const ClaimedTask& task : Claim(job.flow(), limit)) {
      ids.push_back(task.key.run_id);
    }
    return ids;
  }

  // Claims and completes everything of `job` claimable now.
  int DriveJob(const Job& job) { return Drive(job.flow()); }

  std::optional<DedupeRecord> DedupeEntry(std::string_view flow,
                                          std::string_view key) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return std::nullopt;
    absl::StatusOr<std::optional<DedupeRecord>> entry =
        (*tx)->GetDedupe(flow, key);
    EXPECT_TRUE(entry.ok()) << entry.status();
    return entry.ok() ? *entry : std::nullopt;
  }
};

// Expects `status` to be kInvalidArgument with a message containing `part`.
#define EXPECT_INVALID(status, part)                                    \
  do {                                                                  \
    absl::Status s_ = (status);                                         \
    EXPECT_EQ(s_.code(), absl::StatusCode::kInvalidArgument) << s_;     \
    EXPECT_THAT(std::string(s_.message()), ::testing::HasSubstr(part)); \
  } while (false)

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CONFORMANCE_JOBS_FIXTURE_H_
