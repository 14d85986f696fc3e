// The queue registry at deployment: private queues are owned by their
// concrete flow, shared ones by nobody; a queue owned by another flow, a
// shared queue named like a private one, or a queue that exists outside the
// registry is refused before anything changes.
#include "queues_fixture.h"
#include "sluice/job.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class QueueRegistry : public QueuesConformance {};

TEST_P(QueueRegistry, StepQueueOwnedByAnotherFlow_RefusesTheWholeFlow) {
  Flow owner("orders__ship");  // flow mode: its queue is "orders__ship"
  owner.Step("a", Echo());
  Deploy(owner);
  Flow flow("orders", {.queue_per_step = true});
  flow.Step("pack", Echo()).Step("ship", {.depends_on = {"pack"}}, Echo());
  absl::StatusOr<DeployOutcome> outcome = engine().Deploy(flow);
  ASSERT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  std::string message(outcome.status().message());
  EXPECT_THAT(message, HasSubstr("flow \"orders\": queue \"orders__ship\" is "
                                 "owned by flow \"orders__ship\""));
  EXPECT_THAT(message, HasSubstr("step \"ship\""));
  // Nothing changed: the step queue that was free was not created either.
  EXPECT_THAT(RegisteredNames(), ElementsAre("orders__ship"));
  EXPECT_FALSE(FlowStored("orders"));
  EXPECT_EQ(Registered("orders__ship")->owner_flow, "orders__ship");
}

TEST_P(QueueRegistry, SharedQueueNamedLikeAPrivateQueue_IsRefused) {
  Flow billing("billing");
  billing.Step("charge", Echo());
  Deploy(billing);
  Job job("invoice_mail", {.queue = "billing"}, Echo());
  absl::StatusOr<DeployOutcome> outcome = engine().Deploy(job);
  ASSERT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status().message()),
              HasSubstr("is owned by flow \"billing\""));
  EXPECT_THAT(std::string(outcome.status().message()),
              HasSubstr("shared queue; choose another queue name"));

  Flow mapped("mapped", {.queue = "mapped_rest"});
  mapped.Step("first", Echo())
      .Step("second", {.depends_on = {"first"}, .queue = "billing"}, Echo());
  outcome = engine().Deploy(mapped);
  ASSERT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status().message()),
              HasSubstr("queue \"billing\" is owned by flow \"billing\", so "
                        "step \"second\""));
  EXPECT_THAT(RegisteredNames(), ElementsAre("billing"));
  EXPECT_FALSE(FlowStored("mapped"));
  EXPECT_FALSE(FlowStored("invoice_mail"));
}

TEST_P(QueueRegistry, PrivateStepQueueNamedLikeASharedQueue_IsRefused) {
  Job job("ping", {.queue = "alerts__send"}, Echo());
  ASSERT_TRUE(engine().Deploy(job).ok());
  Flow flow("Alerts", {.queue_per_step = true});
  flow.Step("check", Echo()).Step("send", {.depends_on = {"check"}}, Echo());
  absl::StatusOr<DeployOutcome> outcome = engine().Deploy(flow);
  ASSERT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status().message()),
              HasSubstr("queue \"alerts__send\" is owned by no flow (it is "
                        "shared), so step \"send\" can't use it as a private "
                        "queue"));
  EXPECT_THAT(RegisteredNames(), ElementsAre("alerts__send"));
  EXPECT_FALSE(FlowStored("Alerts"));
}

TEST_P(QueueRegistry, QueueExistingOutsideTheRegistry_IsRefusedUnchanged) {
  MakeUnregisteredQueue("ghost__b");
  Flow flow("ghost", {.queue_per_step = true});
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Echo());
  absl::StatusOr<DeployOutcome> outcome = engine().Deploy(flow);
  ASSERT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status().message()),
              HasSubstr("queue \"ghost__b\" (step \"b\") already exists but is "
                        "not in the queue registry"));
  EXPECT_TRUE(RegisteredNames().empty());
  EXPECT_FALSE(FlowStored("ghost"));

  // The same for a shared queue of an explicit map.
  MakeUnregisteredQueue("ghost_shared");
  Flow mapped("ghost_map", {.queue = "ghost_rest"});
  mapped.Step("a", {.queue = "ghost_shared"}, Echo());
  outcome = engine().Deploy(mapped);
  ASSERT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status().message()),
              HasSubstr("choose another queue name"));
  EXPECT_TRUE(RegisteredNames().empty());
}

TEST_P(QueueRegistry, ExplicitQueues_AreSharedByFlowsAndJobs_WithoutOwner) {
  Flow first("first_user", {.queue = "first_rest"});
  first.Step("a", {.queue = "common"}, Echo())
      .Step("b", {.depends_on = {"a"}}, Echo());
  Flow second("second_user", {.queue = "common"});
  second.Step("x", Echo());
  Job job("common_job", {.queue = "common"}, Echo());
  Deploy(first);
  Deploy(second);
  ASSERT_TRUE(engine().Deploy(job).ok());
  EXPECT_THAT(RegisteredNames(), ElementsAre("common", "first_rest"));
  EXPECT_EQ(Registered("common")->owner_flow, "");
  EXPECT_EQ(Registered("first_rest")->owner_flow, "");
  // Redeploying each verifies, and the registry is unchanged.
  EXPECT_EQ(*engine().Deploy(first), DeployOutcome::kVerified);
  EXPECT_EQ(*engine().Deploy(job), DeployOutcome::kVerified);
  EXPECT_THAT(RegisteredNames(), ElementsAre("common", "first_rest"));
  // One count covers every user of the shared queue.
  Start(first, J("1"));
  Start(second, J("2"));
  ASSERT_TRUE(engine().Enqueue(job, J("3")).ok());
  absl::StatusOr<QueueState> counts = engine().Counts("common");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->counts.waiting, 3);
}

SLUICE_CONFORMANCE_SUITE(QueueRegistry);

}  // namespace
}  // namespace sluice::testing
