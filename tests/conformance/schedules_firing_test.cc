// Schedules: firing under a manual clock, exactly once per fire time, with
// misfire policies, daylight-saving changes, seconds and aliases.
#include <thread>

#include "schedules_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;

using ScheduleFiring = SchedulesConformance;

TEST_P(ScheduleFiring, EveryMinute_ForNMinutes_StartsExactlyNRuns) {
  Upsert("g", {Every("m", "* * * * *")});
  Tick(absl::Minutes(1), 30);
  EXPECT_EQ(Runs().size(), 30u);
}

TEST_P(ScheduleFiring, RunsCarryPayloadOptionsAndScheduleMetadata) {
  ScheduleSpec spec = Every("m", "* * * * *");
  spec.options.priority = 9;
  spec.options.metadata = J(R"({"team": "ops"})");
  Upsert("g", {spec});
  Tick(absl::Minutes(1), 1);
  std::vector<RunRecord> runs = Runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].input, J(R"({"n": 1})"));
  EXPECT_EQ(runs[0].priority, 9);
  EXPECT_EQ(runs[0].metadata,
            J(R"({"team": "ops", "schedule_group": "g", "schedule_name": "m",
                  "fire_time": "2027-01-15T08:01:00.000000Z"})"));
  EXPECT_EQ(runs[0].external_key, "schedule:g/m@2027-01-15T08:01:00.000000Z");
}

TEST_P(ScheduleFiring, PassesAtTheSameTime_FireOnce) {
  Upsert("g", {Every("m", "* * * * *")});
  clock().Advance(absl::Minutes(1));
  EXPECT_EQ(Pass().runs_started, 1);
  EXPECT_EQ(Pass().runs_started, 0);
  EXPECT_EQ(Runs().size(), 1u);
}

TEST_P(ScheduleFiring, TwoSchedulersTakingTurns_NeverDoubleFire) {
  absl::StatusOr<std::unique_ptr<Engine>> other =
      Engine::Create(backend(), DefaultOptions());
  ASSERT_TRUE(other.ok()) << other.status();
  Upsert("g", {Every("a", "* * * * *"), Every("b", "*/2 * * * *")});
  for (int minute = 0; minute < 20; ++minute) {
    clock().Advance(absl::Minutes(1));
    Pass(**other);
    Pass();
    Pass(**other);
  }
  EXPECT_THAT(RunsPerSchedule(),
              ElementsAre(std::pair<const std::string, int>("a", 20),
                          std::pair<const std::string, int>("b", 10)));
}

TEST_P(ScheduleFiring, TwoSchedulersAtOnce_NeverDoubleFire) {
  absl::StatusOr<std::unique_ptr<Engine>> other =
      Engine::Create(backend(), DefaultOptions());
  ASSERT_TRUE(other.ok()) << other.status();
  Upsert("g", {Every("a", "* * * * *"), Every("b", "* * * * *")});
  for (int minute = 0; minute < 10; ++minute) {
    clock().Advance(absl::Minutes(1));
    std::thread first([&] { Pass(); });
    std::thread second([&] { Pass(**other); });
    first.join();
    second.join();
  }
  EXPECT_THAT(RunsPerSchedule(),
              ElementsAre(std::pair<const std::string, int>("a", 10),
                          std::pair<const std::string, int>("b", 10)));
}

TEST_P(ScheduleFiring, MisfireSkip_DropsMissedFireTimes) {
  Upsert("g", {Every("m", "* * * * *")});
  clock().Advance(absl::Minutes(10));
  SchedulerPass pass = Pass();
  EXPECT_EQ(pass.misfires, 1);
  // Only 08:10, the fire time within the one-minute grace, runs.
  EXPECT_THAT(FireTimes("UTC"), ElementsAre("2027-01-15 08:10:00 +0000"));
  Tick(absl::Minutes(1), 2);
  EXPECT_EQ(Runs().size(), 3u);
}

TEST_P(ScheduleFiring, MisfireRunOnce_StartsOneRunForAllMissedFireTimes) {
  ScheduleSpec spec = Every("m", "* * * * *");
  spec.misfire = Misfire::kRunOnce;
  Upsert("g", {spec});
  clock().Advance(absl::Minutes(10));
  SchedulerPass pass = Pass();
  EXPECT_EQ(pass.misfires, 1);
  EXPECT_EQ(pass.runs_started, 2);
  // 08:01..08:09 were missed: one run, named by the first; 08:10 on time.
  EXPECT_THAT(FireTimes("UTC"), ElementsAre("2027-01-15 08:01:00 +0000",
                                            "2027-01-15 08:10:00 +0000"));
}

TEST_P(ScheduleFiring, SpringForward_SkippedWallTimeFiresOnceAfterTheGap) {
  // 2027-03-28 in Berlin: 02:00 CET becomes 03:00 CEST.
  clock().Set(absl::FromCivil(absl::CivilSecond(2027, 3, 27, 12, 0, 0),
                              absl::UTCTimeZone()));
  Upsert("g", {Every("night", "30 2 * * *", "Europe/Berlin"),
               Every("quarter", "*/15 1-3 * * *", "Europe/Berlin")});
  Tick(absl::Minutes(5), 12 * 24 * 2);  // two days, every 5 minutes
  std::map<std::string, int> per = RunsPerSchedule();
  EXPECT_EQ(per["night"], 2);  // 03-28 at 03:00 CEST, 03-29 at 02:30
  // 01:00-03:45 has 12 fire times a day. On 03-28: 01:00-01:45 (4), the
  // four at 02:xx collapse onto 03:00 CEST, which also is 03:00's own fire
  // time (1), then 03:15-03:45 (3). On 03-29 all 12.
  EXPECT_EQ(per["quarter"], 8 + 12);
}

TEST_P(ScheduleFiring, FallBack_RepeatedWallTimeFiresOnce) {
  // 2027-10-31 in Berlin: 03:00 CEST falls back to 02:00 CET.
  clock().Set(absl::FromCivil(absl::CivilSecond(2027, 10, 30, 12, 0, 0),
                              absl::UTCTimeZone()));
  Upsert("g", {Every("night", "30 2 * * *", "Europe/Berlin")});
  Tick(absl::Minutes(5), 12 * 24);
  EXPECT_THAT(FireTimes("Europe/Berlin"),
              ElementsAre("2027-10-31 02:30:00 +0200"));
}

TEST_P(ScheduleFiring, SixFields_FireOnSeconds) {
  Upsert("g", {Every("s", "*/10 * * * * *")});
  Tick(absl::Seconds(5), 24);  // two minutes
  EXPECT_EQ(Runs().size(), 12u);
}

TEST_P(ScheduleFiring, Aliases_FireAsTheirFiveFields) {
  Upsert("g", {Every("hourly", "@hourly"), Every("daily", "@daily"),
               Every("midnight", "@midnight")});
  Tick(absl::Minutes(30), 2 * 24 * 2);  // two days
  std::map<std::string, int> per = RunsPerSchedule();
  EXPECT_EQ(per["hourly"], 48);
  EXPECT_EQ(per["daily"], 2);
  EXPECT_EQ(per["midnight"], 2);
}

TEST_P(ScheduleFiring, MissingTarget_FiresNothingUntilDeployed) {
  ScheduleSpec spec = Every("m", "* * * * *");
  spec.target = "later";
  Upsert("g", {spec});
  clock().Advance(absl::Minutes(1));
  SchedulerPass pass = Pass();
  EXPECT_EQ(pass.errors, 1);
  EXPECT_EQ(List("g")[0].cursor, clock().Now() - absl::Minutes(1));
  Job later(
      "later", {.queue = "ticks"},
      [](const Json& in, TaskContext&) -> absl::StatusOr<Json> { return in; });
  ASSERT_TRUE(engine().Deploy(later).ok());
  EXPECT_EQ(Pass().runs_started, 1);
  EXPECT_EQ(Runs("later").size(), 1u);
}

TEST_P(ScheduleFiring, FlowTarget_StartsTheActiveVersionOfItsAlias) {
  Flow v1("report_v1");
  v1.Alias("report").Step("only", Echo());
  Deploy(v1);
  ScheduleSpec spec = Every("m", "@hourly");
  spec.target = "report";
  Upsert("g", {spec});
  Tick(absl::Hours(1), 2);
  EXPECT_EQ(Runs("report_v1").size(), 2u);
}

TEST_P(ScheduleFiring, Pass_ReportsTheNextFireTime) {
  Upsert("g", {Every("a", "0 * * * *"), Every("b", "30 8 * * *")});
  SchedulerPass pass = Pass();
  ASSERT_TRUE(pass.next_fire.has_value());
  EXPECT_EQ(*pass.next_fire, clock().Now() + absl::Minutes(30));
}

TEST_P(ScheduleFiring, BackgroundScheduler_FiresWhenTheClockMoves) {
  Upsert("g", {Every("m", "* * * * *")});
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler =
      engine().StartScheduler({.poll_interval = absl::Milliseconds(5)});
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  for (int minute = 1; minute <= 3; ++minute) {
    clock().Advance(absl::Minutes(1));
    (*scheduler)->Wake();
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (Runs().size() < static_cast<size_t>(minute) &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    EXPECT_EQ(Runs().size(), static_cast<size_t>(minute));
  }
  (*scheduler)->Stop();
  EXPECT_EQ(Runs().size(), 3u);
  EXPECT_FALSE(
      engine().StartScheduler({.poll_interval = absl::ZeroDuration()}).ok());
}

SLUICE_CONFORMANCE_SUITE(ScheduleFiring);

}  // namespace
}  // namespace sluice::testing
