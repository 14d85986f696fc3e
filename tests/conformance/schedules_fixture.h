// Shared pieces of the schedules conformance tests (schedules_*_test.cc).
#ifndef SLUICE_TESTS_CONFORMANCE_SCHEDULES_FIXTURE_H_
#define SLUICE_TESTS_CONFORMANCE_SCHEDULES_FIXTURE_H_

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "harness.h"
#include "sluice/job.h"
#include "sluice/schedule.h"

namespace sluice::testing {

class SchedulesConformance : public Conformance {
 protected:
  void SetUp() override {
    Conformance::SetUp();
    if (IsSkipped()) return;
    absl::StatusOr<DeployOutcome> deployed = engine().Deploy(tick_);
    ASSERT_TRUE(deployed.ok()) << deployed.status();
  }

  // Every `cron` in `zone`, starting the job "tick".
  static ScheduleSpec Every(std::string name, std::string cron,
                            std::string zone = "UTC") {
    return ScheduleSpec{.name = std::move(name),
                        .target = "tick",
                        .cron = std::move(cron),
                        .time_zone = std::move(zone),
                        .payload = Json(boost::json::object{{"n", 1}})};
  }

  void Upsert(std::string_view group, std::vector<ScheduleSpec> specs) {
    absl::Status status = engine().UpsertSchedules(group, specs);
    ASSERT_TRUE(status.ok()) << status;
  }

  std::vector<ScheduleInfo> List(std::string_view group = "") {
    absl::StatusOr<std::vector<ScheduleInfo>> list =
        engine().ListSchedules(group);
    EXPECT_TRUE(list.ok()) << list.status();
    return list.ok() ? *std::move(list) : std::vector<ScheduleInfo>();
  }

  // "group/name" of each stored schedule, in order.
  std::vector<std::string> Names(std::string_view group = "") {
    std::vector<std::string> names;
    for (const ScheduleInfo& info : List(group)) {
      names.push_back(info.group + "/" + info.spec.name);
    }
    return names;
  }

  SchedulerPass Pass(Engine& engine) {
    absl::StatusOr<SchedulerPass> pass = engine.RunSchedulerOnce(clock().Now());
    EXPECT_TRUE(pass.ok()) << pass.status();
    return pass.ok() ? *pass : SchedulerPass();
  }
  SchedulerPass Pass() { return Pass(engine()); }

  // Moves the clock by `step` and passes, `times` times.
  void Tick(absl::Duration step, int times) {
    for (int i = 0; i < times; ++i) {
      clock().Advance(step);
      Pass();
    }
  }

  std::vector<RunRecord> Runs(std::string_view flow = "tick") {
    absl::StatusOr<std::vector<RunRecord>> runs =
        engine().ListRuns(flow, 10000);
    EXPECT_TRUE(runs.ok()) << runs.status();
    return runs.ok() ? *std::move(runs) : std::vector<RunRecord>();
  }

  // Runs per schedule name, from the metadata the scheduler sets.
  std::map<std::string, int> RunsPerSchedule() {
    std::map<std::string, int> counts;
    for (const RunRecord& run : Runs()) {
      ++counts[std::string(run.metadata.at("schedule_name").as_string())];
    }
    return counts;
  }

  // The fire times of the runs, oldest first, as wall times in `zone`.
  std::vector<std::string> FireTimes(const std::string& zone_name) {
    absl::TimeZone zone;
    EXPECT_TRUE(absl::LoadTimeZone(zone_name, &zone));
    std::vector<absl::Time> fires;
    for (const RunRecord& run : Runs()) {
      absl::Time fire;
      std::string err;
      EXPECT_TRUE(absl::ParseTime(
          absl::RFC3339_full,
          std::string(run.metadata.at("fire_time").as_string()), &fire, &err))
          << err;
      fires.push_back(fire);
    }
    std::sort(fires.begin(), fires.end());
    std::vector<std::string> times;
    for (absl::Time fire : fires) {
      times.push_back(absl::FormatTime("%Y-%m-%d %H:%M:%S %z", fire, zone));
    }
    return times;
  }

  bool IsSkipped() { return ::testing::Test::IsSkipped(); }

  Job tick_{"tick",
            {.queue = "ticks"},
            [](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
              return payload;
            }};
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CONFORMANCE_SCHEDULES_FIXTURE_H_
