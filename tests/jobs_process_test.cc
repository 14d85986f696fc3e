// Jobs through real worker processes, on SQLite and on Postgres: 10,000
// jobs with random priorities, run-at times and dedupe keys, two workers,
// one SIGKILLed while it holds jobs. Every job runs to completion exactly
// once per its dedupe rule, claims follow priority, and nothing is lost.
//
// The Postgres case needs SLUICE_TEST_POSTGRES_URL and skips without it.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "support/child_process.h"
#include "support/postgres_test_database.h"
#include "support/store_test.h"
#include "support/test_flows.h"

namespace sluice::testing {
namespace {

constexpr int kJobs = 10'000;
constexpr int kKeys = 200;  // the dedupe keys 10% of the jobs draw from
constexpr absl::Duration kDeadline = absl::Seconds(180);
// Two claims that start together may commit in either order, so a claim
// counts as late only when it came this long after a lower-priority one.
constexpr absl::Duration kClaimSkew = absl::Milliseconds(500);

// One handler call, as a worker logged it.
struct Call {
  std::string run;
  int priority = 0;
  absl::Time claimed;
  int attempt = 0;
};

std::vector<Call> ReadCalls(const std::string& path) {
  std::vector<Call> calls;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    Call call;
    int64_t claimed_us = 0;
    if (fields >> call.run >> call.priority >> claimed_us >> call.attempt) {
      call.claimed = absl::FromUnixMicros(claimed_us);
      calls.push_back(call);
    }
  }
  return calls;
}

// What the test enqueued: one item per job, and when it became claimable.
struct Planned {
  Engine::EnqueueItem item;
  int priority = 0;
  absl::Time visible_at;
};

std::vector<Planned> Plan(absl::Time now) {
  std::mt19937 random(20261202);
  std::uniform_int_distribution<int> priority(0, 9);
  std::uniform_int_distribution<int> percent(0, 99);
  std::uniform_int_distribution<int> delay_ms(1, 1500);
  std::uniform_int_distribution<int> key(0, kKeys - 1);
  std::vector<Planned> plan(kJobs);
  for (int i = 0; i < kJobs; ++i) {
    Planned& p = plan[i];
    p.priority = priority(random);
    p.visible_at = now;
    p.item.payload = boost::json::object{{"i", i}, {"p", p.priority}};
    p.item.options.priority = p.priority;
    if (percent(random) < 20) {
      p.visible_at = now + absl::Milliseconds(delay_ms(random));
      p.item.options.run_at = p.visible_at;
    }
    if (percent(random) < 10) {
      p.item.options.dedupe = Dedupe{.key = "k" + std::to_string(key(random))};
    }
  }
  return plan;
}

class JobsProcessTest : public StoreTest {
 protected:
  Child* StartWorkerProcess(const std::string& id, int hang_after) {
    std::vector<std::string> args = {"jobs", url_, "worker_id=" + id,
                                     "log=" + dir_ + "/" + id + ".log"};
    if (hang_after >= 0) {
      args.push_back("hang_after=" + std::to_string(hang_after));
    }
    children_.push_back(Spawn(SLUICE_TEST_WORKER, std::move(args)));
    Child* child = &children_.back();
    std::string line;
    EXPECT_TRUE(ReadLine(child->out, absl::Now() + kDeadline, &line))
        << id << " did not start";
    EXPECT_EQ(line, "ready");
    return child;
  }
};

TEST_P(JobsProcessTest, TenThousandJobs_OneWorkerKilled_EachRunsOncePerRule) {
  const Job job = ProcJob(nullptr);
  ASSERT_TRUE(engine_->Deploy(job).ok());

  // Everything is enqueued before the workers start, so every dedupe key is
  // still pending when its duplicates arrive: one run per key.
  std::vector<Planned> plan = Plan(absl::Now());
  std::vector<EnqueueResult> results;
  for (size_t first = 0; first < plan.size(); first += 500) {
    std::vector<Engine::EnqueueItem> chunk;
    for (size_t i = first; i < std::min(plan.size(), first + 500); ++i) {
      chunk.push_back(plan[i].item);
    }
    absl::StatusOr<std::vector<EnqueueResult>> enqueued =
        engine_->EnqueueMany(job.name(), chunk);
    ASSERT_TRUE(enqueued.ok()) << enqueued.status();
    ASSERT_EQ(enqueued->size(), chunk.size());
    results.insert(results.end(), enqueued->begin(), enqueued->end());
  }

  std::map<std::string, RunId> run_of_key;
  std::map<RunId, int> planned_of_run;  // the item that made each run
  for (int i = 0; i < kJobs; ++i) {
    const std::optional<Dedupe>& dedupe = plan[i].item.options.dedupe;
    if (dedupe) {
      auto [it, first] = run_of_key.emplace(dedupe->key, results[i].run_id);
      EXPECT_EQ(results[i].duplicate, !first) << "item " << i;
      EXPECT_EQ(results[i].run_id, it->second) << "key " << dedupe->key;
    } else {
      EXPECT_FALSE(results[i].duplicate) << "item " << i;
    }
    if (!results[i].duplicate) planned_of_run[results[i].run_id] = i;
  }
  int keyless = 0;
  for (const Planned& p : plan) keyless += !p.item.options.dedupe.has_value();
  ASSERT_EQ(planned_of_run.size(), keyless + run_of_key.size());

  Child* survivor = StartWorkerProcess("survivor", -1);
  Child* victim = StartWorkerProcess("victim", 300);
  ASSERT_FALSE(HasFailure());
  std::string line;
  ASSERT_TRUE(ReadLine(victim->out, absl::Now() + kDeadline, &line))
      << "the victim never hung";
  ASSERT_EQ(line, "hang");
  EXPECT_TRUE(WIFSIGNALED(KillAndReap(*victim, SIGKILL)));

  const int64_t runs = static_cast<int64_t>(planned_of_run.size());
  auto all_completed = [&] {
    absl::StatusOr<QueueState> state = engine_->Counts("proc");
    return state.ok() && state->counts.completed == runs;
  };
  ASSERT_TRUE(AwaitCondition(all_completed, kDeadline))
      << "not every job completed within " << kDeadline;
  int status = KillAndReap(*survivor, SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  absl::StatusOr<QueueState> state = engine_->Counts("proc");
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->counts.waiting + state->counts.delayed +
                state->counts.active + state->counts.failed +
                state->counts.cancelled,
            0);

  // Exactly one handler call led to each completion: every survivor call
  // (it stopped gracefully), plus the victim's last call of a job it
  // completed before it hung.
  std::vector<Call> survivor_calls = ReadCalls(dir_ + "/survivor.log");
  std::vector<Call> victim_calls = ReadCalls(dir_ + "/victim.log");
  EXPECT_FALSE(survivor_calls.empty());
  EXPECT_GT(victim_calls.size(), 300u);
  std::map<std::string, int> survivor_count;
  for (const Call& c : survivor_calls) ++survivor_count[c.run];
  int completed_by_victim = 0;
  for (const auto& [run_id, index] : planned_of_run) {
    absl::StatusOr<RunView> view = engine_->GetRun(run_id);
    ASSERT_TRUE(view.ok()) << view.status();
    ASSERT_EQ(view->tasks.size(), 1u);
    const TaskRecord& task = view->tasks[0];
    const std::string text = run_id.ToString();
    EXPECT_EQ(view->run.status, RunStatus::kCompleted) << text;
    EXPECT_EQ(task.status, TaskStatus::kCompleted) << text;
    const bool by_victim = task.worker_id == "victim";
    completed_by_victim += by_victim;
    EXPECT_EQ(survivor_count[text] + (by_victim ? 1 : 0), 1) << text;
    ASSERT_TRUE(view->run.output.has_value()) << text;
    EXPECT_EQ(view->run.output->at("job"), plan[index].item.payload) << text;
  }
  EXPECT_GT(completed_by_victim, 0);

  // Claims follow priority: no job was first claimed well after a
  // lower-priority job while it was already claimable. (A job claimed more
  // than once was first claimed by the victim, at a time nobody logged.)
  std::map<std::string, Call> first_claim;
  for (const std::vector<Call>* calls : {&survivor_calls, &victim_calls}) {
    for (const Call& c : *calls) {
      if (c.attempt == 1) first_claim.emplace(c.run, c);
    }
  }
  std::vector<Call> by_claim;
  for (const auto& [run, call] : first_claim) by_claim.push_back(call);
  std::sort(by_claim.begin(), by_claim.end(),
            [](const Call& a, const Call& b) { return a.claimed < b.claimed; });
  int inversions = 0;
  for (const auto& [run_id, index] : planned_of_run) {
    auto mine = first_claim.find(run_id.ToString());
    if (mine == first_claim.end()) continue;
    const Call& me = mine->second;
    // Any lower-priority job claimed while I was claimable, well before me?
    for (const Call& other : by_claim) {
      if (other.claimed + kClaimSkew >= me.claimed) break;
      if (other.priority < me.priority &&
          other.claimed >= plan[index].visible_at + kClaimSkew) {
        ++inversions;
        ADD_FAILURE() << "job " << run_id.ToString() << " (priority "
                      << me.priority << ", claimable " << plan[index].visible_at
                      << ") was claimed at " << me.claimed
                      << ", after priority " << other.priority << " job "
                      << other.run << " at " << other.claimed;
        break;
      }
    }
    if (inversions > 5) break;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsProcessTest,
                         ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
