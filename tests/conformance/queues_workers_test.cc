// Step workers and shared-queue workers: a worker serves one queue and the
// chosen steps on it, dispatches by (flow, step), registers what it serves,
// and stops on a message of a (flow, step) it does not serve.
#include "queues_fixture.h"
#include "sluice/job.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class QueueWorkers : public QueuesConformance {
 protected:
  // A handler that tags its input with `tag`, so outputs show who ran.
  static Handler Tag(std::string tag) {
    return [tag](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
      return Json{{"by", tag}, {"input", input}};
    };
  }
};

TEST_P(QueueWorkers, StepWorkersForEachQueue_CompleteMultiQueueRuns) {
  Flow flow("sums", {.queue_per_step = true});
  flow.Step("split",
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              return input.as_object().at("run");
            })
      .Map("square", {.depends_on = {"split"}},
           [](const Json& n, TaskContext&) -> absl::StatusOr<Json> {
             return Json(n.as_int64() * n.as_int64());
           })
      .Step("sum", {.depends_on = {"square"}},
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              int64_t total = 0;
              for (const Json& v : input.as_object().at("square").as_array()) {
                total += v.as_int64();
              }
              return Json(total);
            });
  // One worker per step, each choosing its queue a different way.
  workers_.push_back(MustStart(WorkerSpec().Serve(flow, {"split"})));
  workers_.push_back(MustStart(WorkerSpec().Queue("sums__square").Serve(flow)));
  workers_.push_back(
      MustStart(WorkerSpec().Queue("sums__sum").Serve(flow, {"sum"})));
  for (const auto& w : workers_) ASSERT_NE(w, nullptr);
  EXPECT_EQ(workers_[0]->queue(), "sums__split");
  EXPECT_EQ(workers_[1]->queue(), "sums__square");
  EXPECT_EQ(workers_[2]->queue(), "sums__sum");
  std::vector<RunId> runs;
  for (int i = 1; i <= 3; ++i) {
    boost::json::array input;
    for (int k = 1; k <= i; ++k) input.push_back(k);
    runs.push_back(Start(flow, Json(std::move(input))));
  }
  ASSERT_TRUE(AwaitRunsEnd(runs));
  EXPECT_EQ(View(runs[0]).run.output, J(R"({"sum":1})"));
  EXPECT_EQ(View(runs[1]).run.output, J(R"({"sum":5})"));
  EXPECT_EQ(View(runs[2]).run.output, J(R"({"sum":14})"));
  // Each worker ran only its own step: 3 splits, 1+2+3 squares, 3 sums.
  for (const auto& w : workers_) EXPECT_TRUE(w->Stop().ok());
  EXPECT_EQ(workers_[0]->stats().completed, 3);
  EXPECT_EQ(workers_[1]->stats().completed, 6);
  EXPECT_EQ(workers_[2]->stats().completed, 3);
}

TEST_P(QueueWorkers, SharedQueueOfTwoFlowsAndAJob_OneWorkerDispatches) {
  Flow alpha("alpha", {.queue = "alpha_rest"});
  alpha.Step("fetch", {.queue = "shared_q"}, Tag("alpha.fetch"))
      .Step("store", {.depends_on = {"fetch"}}, Tag("alpha.store"));
  Flow beta("beta", {.queue = "beta_rest"});
  beta.Step("score", {.queue = "shared_q"}, Tag("beta.score"))
      .Step("report", {.depends_on = {"score"}}, Tag("beta.report"));
  Job ping("ping", {.queue = "shared_q"},
           [](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
             return Json{{"by", "ping"}, {"input", payload}};
           });
  QueuesTestBackend& wrapped = Wrapped();
  workers_.push_back(MustStart(
      WorkerSpec().Queue("shared_q").Serve(alpha).Serve(beta).Serve(ping)));
  workers_.push_back(MustStart(WorkerSpec().Serve(alpha, {"store"})));
  workers_.push_back(MustStart(WorkerSpec().Queue("beta_rest").Serve(beta)));
  for (const auto& w : workers_) ASSERT_NE(w, nullptr);
  absl::StatusOr<RunId> a = engine().StartRun("alpha", J("1"));
  absl::StatusOr<RunId> b = engine().StartRun("beta", J("2"));
  absl::StatusOr<EnqueueResult> p = engine().Enqueue(ping, J("3"));
  ASSERT_TRUE(a.ok() && b.ok() && p.ok());
  ASSERT_TRUE(AwaitRunsEnd({*a, *b, p->run_id}));
  EXPECT_EQ(StepOf(View(*a), "fetch").output,
            J(R"({"by":"alpha.fetch","input":{"run":1}})"));
  EXPECT_EQ(
      View(*a).run.output.value().as_object().at("store").as_object().at("by"),
      J(R"("alpha.store")"));
  EXPECT_EQ(StepOf(View(*b), "score").output,
            J(R"({"by":"beta.score","input":{"run":2}})"));
  EXPECT_EQ(View(p->run_id).run.output,
            J(R"({"job":{"by":"ping","input":3}})"));
  // The shared-queue worker ran the three (flow, step) pairs on its queue.
  for (const auto& w : workers_) EXPECT_TRUE(w->Stop().ok());
  WorkerStats shared = workers_[0]->stats();
  EXPECT_EQ(shared.completed, 3);
  EXPECT_EQ(workers_[1]->stats().completed, 1);
  EXPECT_EQ(workers_[2]->stats().completed, 1);
  // Each registered with exactly what it serves, in definition order.
  std::string shared_id = workers_[0]->id();
  std::optional<WorkerRecord> registered;
  for (const WorkerRecord& r : wrapped.upserts()) {
    if (r.worker_id == shared_id) registered = r;
  }
  ASSERT_TRUE(registered.has_value());
  EXPECT_EQ(registered->queue_name, "shared_q");
  EXPECT_EQ(registered->flow_slug, "alpha");
  EXPECT_THAT(registered->served, ElementsAre(ServedSteps{"alpha", {"fetch"}},
                                              ServedSteps{"beta", {"score"}},
                                              ServedSteps{"ping", {"job"}}));
}

TEST_P(QueueWorkers, StepWorkerGivenAnotherStepsMessage_StopsBatchVisible) {
  // Two root steps share one queue; a worker for "left" only.
  Flow flow("two_roots", {.queue = "roots"});
  flow.Step("left", Echo()).Step("right", Echo());
  Deploy(flow);
  RunId run = Start(flow, J(R"({"secret":"do-not-log-me"})"));
  std::unique_ptr<Worker> worker =
      MustStart(WorkerSpec().Serve(flow, {"left"}));
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->WaitFor(kWorkerTestDeadline));
  absl::Status fatal = worker->Wait();
  ASSERT_EQ(fatal.code(), absl::StatusCode::kFailedPrecondition);
  std::string message(fatal.message());
  EXPECT_THAT(message, HasSubstr("step \"right\", which this worker does "
                                 "not serve"));
  EXPECT_THAT(message, HasSubstr("the batch was left visible"));
  EXPECT_THAT(message, Not(HasSubstr("do-not-log-me")));
  EXPECT_EQ(worker->stats().claimed, 0);
  // Neither task was claimed, and both messages are visible now.
  for (const char* step : {"left", "right"}) {
    TaskRecord task = TaskOf(run, step);
    EXPECT_EQ(task.status, TaskStatus::kQueued) << step;
    EXPECT_EQ(task.attempts, 0) << step;
    std::optional<MessageLocation> where = MessageOf(task);
    ASSERT_TRUE(where.has_value()) << step;
    EXPECT_FALSE(where->archived) << step;
    EXPECT_LE(where->message.visible_at, clock().Now()) << step;
  }
  // A worker that serves both steps takes the same batch.
  absl::StatusOr<std::vector<ClaimedTask>> claimed =
      ClaimOn("roots", StepsOn(flow, "roots"));
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_EQ(claimed->size(), 2u);
}

TEST_P(QueueWorkers, ClaimForOneStep_OnAQueueWithAnotherFlowsMessage_IsFatal) {
  Flow mine("mine", {.queue = "mixed"});
  mine.Step("a", Echo());
  Flow theirs("theirs", {.queue = "mixed"});
  theirs.Step("a", Echo());
  Deploy(mine);
  Deploy(theirs);
  RunId run = Start(theirs, J("1"));
  absl::StatusOr<std::vector<ClaimedTask>> claimed =
      ClaimOn("mixed", StepsOn(mine, "mixed"));
  ASSERT_EQ(claimed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(claimed.status().message()),
              HasSubstr("flow \"theirs\" step \"a\", which this worker does "
                        "not serve"));
  TaskRecord task = TaskOf(run, "a");
  EXPECT_EQ(task.status, TaskStatus::kQueued);
  EXPECT_LE(MessageOf(task)->message.visible_at, clock().Now());
}

TEST_P(QueueWorkers, BadWorkerSpecs_AreRefusedBeforeAnythingStarts) {
  Flow flow("picky", {.queue_per_step = true});
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Echo());
  auto refused = [&](const WorkerSpec& spec, std::string_view text) {
    absl::StatusOr<std::unique_ptr<Worker>> w =
        engine().StartWorker(spec, Fast());
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(w.status().message()), HasSubstr(text));
  };
  // A step-mode flow's steps are on several queues.
  refused(WorkerSpec().Serve(flow), "one worker serves one queue");
  // No step of the flow on the chosen queue.
  refused(WorkerSpec().Queue("elsewhere").Serve(flow),
          "flow \"picky\" has no step on queue \"elsewhere\"");
  // A named step that is not on the chosen queue.
  refused(WorkerSpec().Queue("picky__a").Serve(flow, {"a", "b"}),
          "step \"b\" of flow \"picky\" is on queue \"picky__b\", not on the "
          "worker's queue \"picky__a\"");
  refused(WorkerSpec().Serve(flow, {"nope"}), "has no step \"nope\"");
  refused(WorkerSpec().Serve(flow, {}), "empty step list");
  refused(WorkerSpec().Queue("Bad-Name").Serve(flow), "queue name");
  // Nothing was deployed and no worker registered.
  EXPECT_FALSE(FlowStored("picky"));
  EXPECT_TRUE(RegisteredNames().empty());
  auto tx = backend().Begin();
  ASSERT_TRUE(tx.ok());
  absl::StatusOr<std::vector<WorkerRecord>> workers = (*tx)->ListWorkers();
  ASSERT_TRUE(workers.ok());
  EXPECT_TRUE(workers->empty());
}

TEST_P(QueueWorkers, StepWorker_NeedsHandlersOnlyForTheStepsItServes) {
  Flow full("partial", {.queue_per_step = true});
  full.Step("a", Returns(J("1")))
      .Step("b", {.depends_on = {"a"}}, Returns(J("2")));
  // This process has only step b's handler; the shape is complete.
  Flow only_b("partial", {.queue_per_step = true});
  only_b.Step("a", StepSpec{})
      .Step("b", {.depends_on = {"a"}}, Returns(J("2")));
  workers_.push_back(MustStart(WorkerSpec().Serve(only_b, {"b"})));
  ASSERT_NE(workers_.back(), nullptr);
  absl::StatusOr<std::unique_ptr<Worker>> a_worker =
      engine().StartWorker(WorkerSpec().Serve(only_b, {"a"}), Fast());
  EXPECT_THAT(std::string(a_worker.status().message()),
              HasSubstr("step \"a\" has no handler"));
  workers_.push_back(MustStart(WorkerSpec().Serve(full, {"a"})));
  ASSERT_NE(workers_.back(), nullptr);
  RunId run = Start(full, J("0"));
  ASSERT_TRUE(AwaitRunsEnd({run}));
  EXPECT_EQ(View(run).run.output, J(R"({"b":2})"));
}

SLUICE_CONFORMANCE_SUITE(QueueWorkers);

}  // namespace
}  // namespace sluice::testing
