// Development recompilation on Postgres: a recompile that commits while an
// old-generation worker's claim is between its generation check and its
// read must not hand that worker a run of the new shape. Each statement of
// a Postgres transaction reads the latest commits, so the check holds the
// flow's deploy lock until the claim commits. Skips when
// SLUICE_TEST_POSTGRES_URL is unset.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "pg_session.h"
#include "postgres_jobs_fixture.h"
#include "sluice/clock.h"
#include "sluice/engine.h"
#include "sluice/forwarding_backend.h"

namespace sluice::testing {
namespace {

// Runs `during` once, when a transaction first reads messages (in the
// engine's claim, after its generation check).
class BeforeFirstRead : public ForwardingBackend {
 public:
  BeforeFirstRead(Backend& target, std::function<void()> during)
      : ForwardingBackend(target), during_(std::move(during)) {}

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    class Hooked : public ForwardingTransaction {
     public:
      Hooked(std::unique_ptr<Transaction> t, BeforeFirstRead* owner)
          : ForwardingTransaction(std::move(t)), owner_(owner) {}

     protected:
      absl::Status BeforeCall(std::string_view method) override {
        if (method == "ReadMessages" && owner_->during_) {
          std::exchange(owner_->during_, nullptr)();
        }
        return absl::OkStatus();
      }

     private:
      BeforeFirstRead* owner_;
    };
    return std::make_unique<Hooked>(std::move(tx), this);
  }

 private:
  std::function<void()> during_;
};

Handler Echo() {
  return
      [](const Json& in, TaskContext&) -> absl::StatusOr<Json> { return in; };
}

TEST_F(PostgresJobsTest,
       RecompileDuringAnOldGenerationsClaim_WaitsForTheClaimToCommit) {
  Flow shape1("dev");
  shape1.Step("first", Echo());
  Flow shape2("dev");
  shape2.Step("first", Echo())
      .Step("second", {.depends_on = {"first"}}, Echo());
  EngineOptions development;
  development.development_recompile = true;
  absl::StatusOr<std::unique_ptr<Backend>> other_backend =
      OpenPostgres(db_->url());
  ASSERT_TRUE(other_backend.ok()) << other_backend.status();
  absl::StatusOr<std::unique_ptr<Engine>> deployer =
      Engine::Create(**other_backend, development);
  ASSERT_TRUE(deployer.ok()) << deployer.status();
  ASSERT_TRUE((*deployer)->Deploy(shape1).ok());

  absl::StatusOr<postgres_internal::Session> observer =
      postgres_internal::Session::Open(db_->url());
  ASSERT_TRUE(observer.ok()) << observer.status();
  // A session waiting for an advisory lock: the deploy waits for the claim.
  auto deploy_waits = [&] {
    absl::StatusOr<std::string> waiting = observer->QueryText(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
        "AND NOT granted AND database = (SELECT oid FROM pg_database "
        "WHERE datname = current_database())",
        {}, "advisory lock waiters");
    return waiting.ok() && *waiting != "0";
  };
  std::thread recompile;
  absl::Notification started;
  BeforeFirstRead hooked(*backend_, [&] {
    recompile = std::thread([&] {
      absl::StatusOr<DeployOutcome> outcome = (*deployer)->Deploy(shape2);
      EXPECT_TRUE(outcome.ok()) << outcome.status();
      EXPECT_TRUE((*deployer)->StartRun("dev", J("{}")).ok());
      started.Notify();
    });
    // Until the new run exists (the claim would then read it) or the
    // recompile waits for the claim's lock.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!started.HasBeenNotified() && !deploy_waits() &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
  });
  // The old worker's clock runs an hour ahead, so the new run's message is
  // visible to its claim whenever that claim took its time.
  ManualClock ahead(absl::Now() + absl::Hours(1));
  EngineOptions old_options = development;
  old_options.clock = &ahead;
  absl::StatusOr<std::unique_ptr<Engine>> old_worker =
      Engine::Create(hooked, old_options);
  ASSERT_TRUE(old_worker.ok()) << old_worker.status();
  ClaimRequest request;
  request.queue = shape1.shape().steps.front().queue_name;
  request.worker_id = "old-generation";
  request.served.AddFlow(shape1.shape());
  request.generations.push_back(FlowGeneration{"dev", 1});

  absl::StatusOr<std::vector<ClaimedTask>> claimed =
      (*old_worker)->Claim(request);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_TRUE(claimed->empty()) << "the old generation claimed a new run";
  recompile.join();
  EXPECT_EQ((*old_worker)->Claim(request).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace sluice::testing
