// Runs: inputs, step inputs, map fan-out, outputs, JSON scalars, queue
// identity, cancellation.
#include <set>

#include "boost/json/serialize.hpp"
#include "harness.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class Runs : public Conformance {};

// root -> map over root's array -> reduce
Flow Pipeline(std::string slug = "pipeline") {
  Flow flow(std::move(slug));
  flow.Step("root",
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              return input.at("run").at("items");
            })
      .Map("square", {.depends_on = {"root"}},
           [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
             int64_t v = input.as_int64();
             return v * v;
           })
      .Step("sum", {.depends_on = {"square"}},
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              int64_t total = 0;
              for (const Json& v : input.at("square").as_array()) {
                total += v.as_int64();
              }
              return total;
            });
  return flow;
}

TEST_P(Runs, UnknownFlow_IsNotFound) {
  absl::StatusOr<RunId> run = engine().StartRun("missing", J("{}"));
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("not deployed"));
}

TEST_P(Runs, InvalidFlowSlug_IsRejected) {
  absl::StatusOr<RunId> run = engine().StartRun("bad slug", J("{}"));
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(Runs, InputOverSizeLimit_IsRejectedAndNothingIsStored) {
  Flow flow = Pipeline();
  Deploy(flow);
  EngineOptions options = DefaultOptions();
  options.max_payload_bytes = 64;
  UseEngine(backend(), options);
  Json big = boost::json::object{{"items", boost::json::array(40, 1)}};
  absl::StatusOr<RunId> run = engine().StartRun("pipeline", big);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(run.status().message()),
              HasSubstr("over the limit of 64"));
  absl::StatusOr<std::vector<RunRecord>> runs = engine().ListRuns("", 10);
  ASSERT_TRUE(runs.ok());
  EXPECT_TRUE(runs->empty());
}

TEST_P(Runs, RootMapWithNonArrayInput_IsRejected) {
  Flow flow("root_map");
  flow.Map("each", Echo());
  Deploy(flow);
  absl::StatusOr<RunId> run = engine().StartRun("root_map", J(R"({"a":1})"));
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(run.status().message()),
              HasSubstr("must be a JSON array, not object"));
  absl::StatusOr<RunId> null_input = engine().StartRun("root_map", Json());
  ASSERT_FALSE(null_input.ok());
  EXPECT_THAT(std::string(null_input.status().message()),
              HasSubstr("not null"));
}

TEST_P(Runs, Start_CreatesRunStepStatesAndRootTask) {
  Flow flow = Pipeline();
  Deploy(flow);
  RunId run = Start(flow, J(R"({"items":[1,2,3]})"));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kStarted);
  EXPECT_EQ(view.run.remaining_steps, 3);
  ASSERT_EQ(view.steps.size(), 3u);
  EXPECT_EQ(StepOf(view, "root").status, StepStatus::kStarted);
  EXPECT_EQ(StepOf(view, "square").status, StepStatus::kCreated);
  EXPECT_EQ(StepOf(view, "square").initial_tasks, std::nullopt);
  EXPECT_EQ(StepOf(view, "sum").remaining_deps, 1);
  ASSERT_EQ(view.tasks.size(), 1u);
  EXPECT_EQ(view.tasks[0].status, TaskStatus::kQueued);
  EXPECT_EQ(view.tasks[0].attempts, 0);
}

TEST_P(Runs, Pipeline_CompletesWithLeafOutput) {
  Flow flow = Pipeline();
  Deploy(flow);
  RunId run = Start(flow, J(R"({"items":[1,2,3,4]})"));
  EXPECT_EQ(Drive(flow), 1 + 4 + 1);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(view.run.remaining_steps, 0);
  EXPECT_EQ(*view.run.output, J(R"({"sum":30})"));
  EXPECT_EQ(*StepOf(view, "square").output, J("[1,4,9,16]"));
  for (const TaskRecord& t : view.tasks) {
    EXPECT_EQ(t.status, TaskStatus::kCompleted);
    EXPECT_EQ(t.attempts, 1);
  }
}

TEST_P(Runs, SingleStepInput_HoldsRunInputAndCompletedDependencies) {
  Flow flow("inputs");
  flow.Step("a", Returns(J(R"({"x":1})")))
      .Step("b", Returns(J("false")))
      .Step("c", {.depends_on = {"a", "b"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J(R"({"user":"ada"})"));
  Drive(flow);
  EXPECT_EQ(*TaskOf(run, "c").output,
            J(R"({"run":{"user":"ada"},"a":{"x":1},"b":false})"));
}

TEST_P(Runs, RootMap_OneTaskPerElementWithTheElementAsInput) {
  Flow flow("root_map");
  flow.Map("each", Echo());
  Deploy(flow);
  RunId run = Start(flow, J(R"([{"id":1},"two",3,null])"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 4u);
  EXPECT_EQ(claimed[0].input, J(R"({"id":1})"));
  EXPECT_EQ(claimed[1].input, J(R"("two")"));
  EXPECT_EQ(claimed[2].input, J("3"));
  EXPECT_EQ(claimed[3].input, J("null"));
  for (const ClaimedTask& t : claimed) Complete(t, t.input);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output, J(R"({"each":[{"id":1},"two",3,null]})"));
}

// More elements than one insert statement takes (the SQLite backend writes
// tasks and messages 1,024 rows at a time): every element still gets its
// task and its own message, in element order.
TEST_P(Runs, RootMapOverThousandsOfElements_CreatesEveryTaskInOrder) {
  constexpr int kElements = 2'500;
  Flow flow("wide_map");
  flow.Map("each", Echo());
  Deploy(flow);
  boost::json::array input;
  for (int i = 0; i < kElements; ++i) input.emplace_back(i);
  RunId run = Start(flow, input);
  std::set<int64_t> messages;
  for (const TaskRecord& task : View(run).tasks) {
    messages.insert(task.message_id);
  }
  EXPECT_EQ(messages.size(), static_cast<size_t>(kElements));
  std::vector<ClaimedTask> claimed;
  for (int round = 0; round < 3; ++round) {
    for (ClaimedTask& task : Claim(flow, 1'000)) {
      claimed.push_back(std::move(task));
    }
  }
  ASSERT_EQ(claimed.size(), static_cast<size_t>(kElements));
  std::vector<TaskResult> results;
  for (int i = 0; i < kElements; ++i) {
    EXPECT_EQ(claimed[i].key.task_index, i);
    EXPECT_EQ(claimed[i].input, Json(i));
    results.push_back({claimed[i].key, claimed[i].attempt, claimed[i].input});
  }
  Finish(std::move(results));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(view.run.output->at("each"), Json(input));
}

// A map's tasks are written in chunks (WriteBatch::kTaskChunk) after the
// tasks created before it and before those created after it.
TEST_P(Runs, WideMapBetweenSingleSteps_IsClaimedInCreationOrder) {
  constexpr int kElements = 1'500;
  Flow flow("map_between");
  flow.Step("first", Echo()).Map("each", Echo()).Step("last", Echo());
  Deploy(flow);
  boost::json::array input;
  for (int i = 0; i < kElements; ++i) input.emplace_back(i);
  Start(flow, input);
  std::vector<ClaimedTask> claimed = Claim(flow, 1'000);
  for (ClaimedTask& task : Claim(flow, 1'000)) {
    claimed.push_back(std::move(task));
  }
  ASSERT_EQ(claimed.size(), static_cast<size_t>(kElements + 2));
  EXPECT_EQ(claimed.front().step_slug, "first");
  for (int i = 0; i < kElements; ++i) {
    EXPECT_EQ(claimed[i + 1].step_slug, "each");
    EXPECT_EQ(claimed[i + 1].key.task_index, i);
  }
  EXPECT_EQ(claimed.back().step_slug, "last");
}

// The run fails at its start, after the map's tasks were queued in the
// same transaction: every chunk is written cancelled, its messages
// archived.
TEST_P(Runs, WideMapEndedInTheTransactionThatStartedIt_IsCancelledWhole) {
  constexpr int kElements = 2'100;
  Flow flow("map_ended");
  flow.Map("each", Echo())
      .Step("guard",
            {.if_pattern = J(R"({"run":[-1]})"), .when_unmet = Policy::kFail},
            Echo());
  Deploy(flow);
  boost::json::array input;
  for (int i = 0; i < kElements; ++i) input.emplace_back(i);
  RunId run = Start(flow, input);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  ASSERT_EQ(view.tasks.size(), static_cast<size_t>(kElements));
  for (const TaskRecord& task : view.tasks) {
    EXPECT_EQ(task.status, TaskStatus::kCancelled);
    EXPECT_EQ(task.input, Json(task.key.task_index));
  }
  EXPECT_TRUE(MessageOf(view.tasks.front())->archived);
  EXPECT_TRUE(MessageOf(view.tasks.back())->archived);
  EXPECT_TRUE(Claim(flow).empty());
}

TEST_P(Runs, RootMapOverEmptyArray_CompletesAtOnceWithEmptyOutput) {
  Flow flow("empty_root");
  flow.Map("each", Echo()).Step("after", {.depends_on = {"each"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[]"));
  RunView view = View(run);
  EXPECT_EQ(StepOf(view, "each").status, StepStatus::kCompleted);
  EXPECT_EQ(*StepOf(view, "each").output, J("[]"));
  EXPECT_EQ(StepOf(view, "after").status, StepStatus::kStarted);
  Drive(flow);
  view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output, J(R"({"after":{"run":[],"each":[]}})"));
}

TEST_P(Runs, DependentMapOverEmptyArray_CompletesWithEmptyOutput) {
  Flow flow("empty_dependent");
  flow.Step("list", Returns(J("[]")))
      .Map("each", {.depends_on = {"list"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  EXPECT_EQ(Drive(flow), 1);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output, J(R"({"each":[]})"));
  EXPECT_EQ(StepOf(view, "each").initial_tasks, 0);
}

TEST_P(Runs, ChainOfEmptyMaps_CompletesInOneTransaction) {
  Flow flow("empty_chain");
  flow.Map("m0", Echo());
  for (int i = 1; i < 60; ++i) {
    flow.Map("m" + std::to_string(i),
             {.depends_on = {"m" + std::to_string(i - 1)}}, Echo());
  }
  Deploy(flow);
  RunId run = Start(flow, J("[]"));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output, J(R"({"m59":[]})"));
}

TEST_P(Runs, MapOutput_IsInElementOrderWhateverTheCompletionOrder) {
  Flow flow("order");
  flow.Map("each", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[0,1,2,3,4]"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 5u);
  for (int i : {3, 0, 4, 2, 1}) {
    Complete(claimed[i], Json(claimed[i].input.as_int64() * 10));
  }
  EXPECT_EQ(*View(run).run.output, J(R"({"each":[0,10,20,30,40]})"));
}

TEST_P(Runs, MapStepFedByMapStep_UsesItsAggregatedOutput) {
  Flow flow("map_map");
  flow.Map("double",
           [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
             return in.as_int64() * 2;
           })
      .Map("inc", {.depends_on = {"double"}},
           [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
             return in.as_int64() + 1;
           });
  Deploy(flow);
  RunId run = Start(flow, J("[1,2,3]"));
  EXPECT_EQ(Drive(flow), 6);
  EXPECT_EQ(*View(run).run.output, J(R"({"inc":[3,5,7]})"));
}

TEST_P(Runs, SingleStepFeedingMapWithNonArray_FailsTheRunWithTypeViolation) {
  Flow flow("type_violation");
  flow.Step("list", Returns(J(R"({"not":"an array"})")))
      .Map("each", {.depends_on = {"list"}}, Echo())
      .Step("other", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_THAT(view.run.error, HasSubstr("[TYPE_VIOLATION]"));
  EXPECT_THAT(StepOf(view, "list").error,
              HasSubstr("Map step \"each\" expects array"));
  EXPECT_EQ(StepOf(view, "list").status, StepStatus::kFailed);
  TaskRecord list = TaskOf(run, "list");
  EXPECT_EQ(list.status, TaskStatus::kFailed);
  EXPECT_EQ(list.attempts, 1);  // never retried
  EXPECT_THAT(list.error, HasSubstr("Produced object instead of array"));
  for (const TaskRecord& t : view.tasks) {
    EXPECT_TRUE(IsTerminal(t.status)) << ToString(t.status);
  }
}

TEST_P(Runs, RunOutput_HoldsCompletedLeafStepsOnly) {
  Flow flow("leaves");
  flow.Step("a", Returns(J("1")))
      .Step("b", {.depends_on = {"a"}}, Returns(J("2")))
      .Step("c",
            {.depends_on = {"a"}, .if_pattern = J(R"({"run":{"c":true}})")},
            Returns(J("3")));
  Deploy(flow);
  RunId run = Start(flow, J(R"({"c":false})"));
  Drive(flow);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output, J(R"({"b":2})"));
  EXPECT_EQ(StepOf(view, "c").status, StepStatus::kSkipped);
}

TEST_P(Runs, JsonScalars_ArePreservedExactly) {
  for (const char* scalar : {"false", "0", "\"\"", "null", "true", "-1.5",
                             "1234567890123456", "18446744073709551615"}) {
    Flow flow("scalars");
    flow.Step("echo",
              [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
                return input.at("run");
              })
        .Step("again", {.depends_on = {"echo"}},
              [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
                return input.at("echo");
              });
    Deploy(flow);
    RunId run = Start(flow, J(scalar));
    Drive(flow);
    RunView view = View(run);
    ASSERT_EQ(view.run.status, RunStatus::kCompleted) << scalar;
    EXPECT_EQ(view.run.input, J(scalar)) << scalar;
    Json expected = J(std::string("{\"again\":") + scalar + "}");
    EXPECT_EQ(*view.run.output, expected) << scalar;
    EXPECT_EQ(view.run.output->at("again").kind(), expected.at("again").kind());
    EXPECT_TRUE(StepOf(view, "echo").output.has_value()) << scalar;
  }
}

TEST_P(Runs, MapAggregation_PreservesScalarsAndNulls) {
  Flow flow("aggregate_scalars");
  flow.Map("each", Echo());
  Deploy(flow);
  RunId run = Start(flow, J(R"([false,null,7,"",0,{}])"));
  Drive(flow);
  EXPECT_EQ(boost::json::serialize(*View(run).run.output),
            R"({"each":[false,null,7,"",0,{}]})");
}

TEST_P(Runs, StartRuns_IsAllOrNothing) {
  Flow flow("batch_map");
  flow.Map("each", Echo());
  Deploy(flow);
  std::vector<Json> inputs = {J("[1]"), J("{}"), J("[2]")};
  absl::StatusOr<std::vector<RunId>> runs =
      engine().StartRuns("batch_map", inputs);
  ASSERT_FALSE(runs.ok());
  EXPECT_THAT(std::string(runs.status().message()), HasSubstr("(input 1)"));
  absl::StatusOr<std::vector<RunRecord>> listed =
      engine().ListRuns("batch_map", 10);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  inputs[1] = J("[]");
  runs = engine().StartRuns("batch_map", inputs);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ(runs->size(), 3u);
  EXPECT_EQ(Drive(flow), 2);
  for (const RunId& id : *runs) {
    EXPECT_EQ(View(id).run.status, RunStatus::kCompleted);
  }
}

TEST_P(Runs, ListRuns_FiltersByFlowNewestFirst) {
  Flow a("list_a");
  a.Step("s", Echo());
  Flow b("list_b");
  b.Step("s", Echo());
  Deploy(a);
  Deploy(b);
  RunId first = Start(a, J("1"));
  clock().Advance(absl::Seconds(1));
  Start(b, J("2"));
  clock().Advance(absl::Seconds(1));
  RunId third = Start(a, J("3"));
  absl::StatusOr<std::vector<RunRecord>> runs = engine().ListRuns("list_a", 10);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].run_id, third);
  EXPECT_EQ((*runs)[1].run_id, first);
  EXPECT_FALSE(engine().ListRuns("", 0).ok());
}

TEST_P(Runs, GetRun_UnknownRun_IsNotFound) {
  absl::StatusOr<RunView> view = engine().GetRun(RunId::Random());
  ASSERT_FALSE(view.ok());
  EXPECT_EQ(view.status().code(), absl::StatusCode::kNotFound);
}

TEST_P(Runs, EveryTask_StoresItsQueueAndMessageAtCreation) {
  Flow flow("Mixed_Case");
  flow.Map("each", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2,3]"));
  RunView view = View(run);
  ASSERT_EQ(view.tasks.size(), 3u);
  std::vector<int64_t> ids;
  for (const TaskRecord& t : view.tasks) {
    EXPECT_EQ(t.queue_name, "mixed_case");
    ids.push_back(t.message_id);
    std::optional<MessageLocation> where = MessageOf(t);
    ASSERT_TRUE(where.has_value());
    EXPECT_FALSE(where->archived);
    EXPECT_EQ(where->message.body.at("task_index").as_int64(),
              t.key.task_index);
    EXPECT_EQ(where->message.body.at("run_id").as_string(), run.ToString());
  }
  EXPECT_TRUE(ids[0] < ids[1] && ids[1] < ids[2]);
  Drive(flow);
  for (const TaskRecord& t : View(run).tasks) {
    TaskRecord before = view.tasks[t.key.task_index];
    EXPECT_EQ(t.message_id, before.message_id);  // never re-derived
    EXPECT_FALSE(MessageOf(t).has_value());      // deleted on completion
  }
}

TEST_P(Runs, CancelRun_CancelsUnfinishedTasksAndArchivesTheirMessages) {
  Flow flow("cancel_me");
  flow.Map("each", Echo()).Step("after", {.depends_on = {"each"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2,3]"));
  std::vector<ClaimedTask> claimed = Claim(flow, 2);
  ASSERT_EQ(claimed.size(), 2u);
  Complete(claimed[0], J("1"));
  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kImmediate).ok());
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCancelled);
  EXPECT_EQ(StepOf(view, "each").status, StepStatus::kCancelled);
  EXPECT_EQ(StepOf(view, "after").status, StepStatus::kCancelled);
  std::vector<TaskStatus> statuses;
  for (const TaskRecord& t : view.tasks) {
    statuses.push_back(t.status);
    std::optional<MessageLocation> where = MessageOf(t);
    if (t.status == TaskStatus::kCompleted) {
      EXPECT_FALSE(where.has_value());  // deleted on completion
    } else {
      ASSERT_TRUE(where.has_value());
      EXPECT_TRUE(where->archived);
    }
  }
  EXPECT_THAT(statuses,
              ElementsAre(TaskStatus::kCompleted, TaskStatus::kCancelled,
                          TaskStatus::kCancelled));
  // The running handler's late result changes nothing.
  FinishOutcome late = Complete(claimed[1], J("2"));
  EXPECT_EQ(late.dispositions[0], ResultDisposition::kStale);
  EXPECT_EQ(View(run).run.status, RunStatus::kCancelled);
  absl::Status again = engine().CancelRun(run);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine().CancelRun(RunId::Random()).code(),
            absl::StatusCode::kNotFound);
}

SLUICE_CONFORMANCE_SUITE(Runs);

}  // namespace
}  // namespace sluice::testing
