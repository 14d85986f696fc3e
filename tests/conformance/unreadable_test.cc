// The engine's side of unreadable stored data, on every backend: a backend
// that reports a row as unreadable (as SQLite and Postgres do for a row that
// no longer decodes; see tests/sqlite_unreadable_test.cc) gets that row's
// task and run failed, and everything else goes on. Memory never stores an
// unreadable row, so a wrapper marks records of one run as unreadable.
#include "harness.h"
#include "sluice/forwarding_backend.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Which records of which run read as unreadable.
struct Marks {
  RunId run;
  bool task_inputs = true;  // as the claim reads them
  int output_step = -1;     // task outputs of this step, as reports read them
};

// Reports records of `marks.run` as unreadable.
class MarksRunUnreadable : public ForwardingBackend {
 public:
  explicit MarksRunUnreadable(Backend& target) : ForwardingBackend(target) {}
  Marks marks;

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    class Marking : public ForwardingTransaction {
     public:
      Marking(std::unique_ptr<Transaction> tx, const Marks& marks)
          : ForwardingTransaction(std::move(tx)), marks_(marks) {}
      absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasksByMessage(
          std::string_view queue, std::span<const int64_t> ids,
          Fields fields) override {
        SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<TaskRecord>> tasks,
                                target().GetTasksByMessage(queue, ids, fields));
        for (std::optional<TaskRecord>& task : tasks) {
          if (!task || task->key.run_id != marks_.run || !marks_.task_inputs ||
              fields != Fields::kAll) {
            continue;
          }
          task->input = Json();
          task->unreadable = "task input is not valid JSON: syntax error";
        }
        return tasks;
      }
      absl::StatusOr<std::vector<StepOutputs>> GetTaskOutputs(
          std::span<const StepRef> steps) override {
        SLUICE_ASSIGN_OR_RETURN(std::vector<StepOutputs> outputs,
                                target().GetTaskOutputs(steps));
        for (size_t i = 0; i < steps.size(); ++i) {
          if (steps[i].run_id != marks_.run ||
              steps[i].step_index != marks_.output_step) {
            continue;
          }
          outputs[i].unreadable = "task output of task 1 is not finite";
        }
        return outputs;
      }

     private:
      const Marks& marks_;
    };
    return std::make_unique<Marking>(std::move(tx), marks);
  }
};

class UnreadableConformance : public Conformance {};

TEST_P(UnreadableConformance, UnreadableTask_FailsOnlyItsRun) {
  MarksRunUnreadable marking(backend());
  UseEngine(marking, DefaultOptions());
  Flow flow("unr_conf", {.base_delay = absl::Seconds(1)});
  flow.Step("job", Echo());
  Deploy(flow);
  RunId healthy = Start(flow, J("1"));
  marking.marks.run = Start(flow, J("2"));

  EXPECT_EQ(Drive(flow), 1);

  EXPECT_EQ(View(healthy).run.status, RunStatus::kCompleted);
  RunView bad = View(marking.marks.run);
  EXPECT_EQ(bad.run.status, RunStatus::kFailed);
  EXPECT_THAT(bad.run.error,
              StartsWith("stored data unreadable: step \"job\" task 0"));
  ASSERT_EQ(bad.tasks.size(), 1u);
  EXPECT_EQ(bad.tasks[0].status, TaskStatus::kFailed);
  EXPECT_EQ(bad.tasks[0].attempts, 0);
  EXPECT_TRUE(MessageOf(bad.tasks[0])->archived);
  EXPECT_EQ(PendingReports(), 0);
}

TEST_P(UnreadableConformance, UnreadableOutput_FailsItsStepAndRunOnly) {
  MarksRunUnreadable marking(backend());
  UseEngine(marking, DefaultOptions());
  Flow flow("unr_conf_map", {.base_delay = absl::Seconds(1)});
  flow.Step("list", Echo())
      .Map("each", {.depends_on = {"list"}}, Echo())
      .Step("after", {.depends_on = {"each"}}, Echo());
  Deploy(flow);
  RunId healthy = Start(flow, J("{}"));
  RunId bad = Start(flow, J("{}"));
  // "list" returns the array "each" maps over.
  std::vector<TaskResult> results;
  for (const ClaimedTask& task : Claim(flow)) {
    results.push_back({task.key, task.attempt, J("[1,2]")});
  }
  Finish(std::move(results));
  marking.marks = Marks{.run = bad, .task_inputs = false, .output_step = 1};

  Drive(flow);

  EXPECT_EQ(View(healthy).run.status, RunStatus::kCompleted);
  RunView view = View(bad);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_THAT(view.run.error, HasSubstr("step \"each\": task output"));
  EXPECT_EQ(StepOf(view, "each").status, StepStatus::kFailed);
  EXPECT_EQ(StepOf(view, "after").status, StepStatus::kCancelled);
}

SLUICE_CONFORMANCE_SUITE(UnreadableConformance);

}  // namespace
}  // namespace sluice::testing
