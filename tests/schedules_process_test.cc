// Three scheduler processes on one store for two simulated hours of
// every-minute schedules under a manual clock: exactly 120 runs per
// schedule (issue 10, "what it must show"). Each process reads the
// simulated time from its stdin, so all three pass at each minute at once
// and race for every fire time.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/job.h"
#include "sluice/schedule.h"
#include "support/store_test.h"

namespace sluice::testing {
namespace {

constexpr int kSchedulers = 3;
constexpr int kMinutes = 120;
const char* const kSchedules[] = {"a", "b", "c"};

struct SchedulerProcess {
  Child child;
  int in = -1;  // the write end of its stdin
};

SchedulerProcess SpawnScheduler(const std::string& url) {
  // Close-on-exec, so a scheduler spawned later does not hold an earlier
  // one's stdin open (which would keep that one from ever seeing EOF).
  int in[2];
  EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
  int out[2];
  EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
  SchedulerProcess process;
  process.child.pid = fork();
  if (process.child.pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    close(in[1]);
    close(out[0]);
    execl(SLUICE_TEST_SCHEDULER, SLUICE_TEST_SCHEDULER, url.c_str(), nullptr);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  process.in = in[1];
  process.child.out = out[0];
  return process;
}

using SchedulesProcessTest = StoreTest;

TEST_P(SchedulesProcessTest, ThreeSchedulersForTwoHours_120RunsPerSchedule) {
  const absl::Time start = absl::FromUnixSeconds(1'800'000'000);
  ManualClock clock(start);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(*backend_, {.clock = &clock});
  ASSERT_TRUE(engine.ok()) << engine.status();
  Job tick(
      "tick", {.queue = "ticks"},
      [](const Json& in, TaskContext&) -> absl::StatusOr<Json> { return in; });
  ASSERT_TRUE((*engine)->Deploy(tick).ok());
  std::vector<ScheduleSpec> specs;
  for (const char* name : kSchedules) {
    specs.push_back({.name = name, .target = "tick", .cron = "* * * * *"});
  }
  ASSERT_TRUE((*engine)->UpsertSchedules("fleet", specs).ok());

  std::vector<SchedulerProcess> schedulers;
  for (int i = 0; i < kSchedulers; ++i) {
    schedulers.push_back(SpawnScheduler(url_));
    children_.push_back(schedulers.back().child);
  }
  int started = 0;
  for (int minute = 1; minute <= kMinutes; ++minute) {
    const std::string now =
        std::to_string(absl::ToUnixSeconds(start + absl::Minutes(minute)));
    for (SchedulerProcess& s : schedulers) {
      const std::string line = now + "\n";
      ASSERT_EQ(write(s.in, line.data(), line.size()),
                static_cast<ssize_t>(line.size()));
    }
    for (SchedulerProcess& s : schedulers) {
      std::string reply;
      ASSERT_TRUE(
          ReadLine(s.child.out, absl::Now() + absl::Seconds(60), &reply))
          << "scheduler " << s.child.pid << " did not pass at minute "
          << minute;
      ASSERT_EQ(reply.rfind("passed " + now + " ", 0), 0u) << reply;
      started += std::stoi(reply.substr(reply.rfind(' ') + 1));
    }
  }
  for (size_t i = 0; i < schedulers.size(); ++i) {
    close(schedulers[i].in);
    int status = 0;
    ASSERT_EQ(waitpid(schedulers[i].child.pid, &status, 0),
              schedulers[i].child.pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    children_[i].pid = -1;
  }

  EXPECT_EQ(started, kMinutes * 3);
  absl::StatusOr<std::vector<RunRecord>> runs =
      (*engine)->ListRuns("tick", 10000);
  ASSERT_TRUE(runs.ok()) << runs.status();
  std::map<std::string, std::set<std::string>> fire_times;
  for (const RunRecord& run : *runs) {
    fire_times[std::string(run.metadata.at("schedule_name").as_string())]
        .insert(std::string(run.metadata.at("fire_time").as_string()));
  }
  EXPECT_EQ(runs->size(), static_cast<size_t>(kMinutes * 3));
  for (const char* name : kSchedules) {
    EXPECT_EQ(fire_times[name].size(), static_cast<size_t>(kMinutes)) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, SchedulesProcessTest,
                         ::testing::Values("postgres", "sqlite"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
