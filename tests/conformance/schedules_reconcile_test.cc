// Schedules: reconciling a group, refusing bad specs, listing.
#include "schedules_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ScheduleReconcile = SchedulesConformance;

TEST_P(ScheduleReconcile, Upsert_StoresTheSpecsAndListsTheirNextFireTime) {
  ScheduleSpec spec = Every("nightly", "0 2 * * *", "Europe/Berlin");
  spec.options.priority = 7;
  spec.misfire = Misfire::kRunOnce;
  Upsert("reports", {spec});
  std::vector<ScheduleInfo> list = List("reports");
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].group, "reports");
  EXPECT_EQ(list[0].spec.target, "tick");
  EXPECT_EQ(list[0].spec.cron, "0 2 * * *");
  EXPECT_EQ(list[0].spec.time_zone, "Europe/Berlin");
  EXPECT_EQ(list[0].spec.payload, J(R"({"n": 1})"));
  EXPECT_EQ(list[0].spec.options.priority, 7);
  EXPECT_EQ(list[0].spec.misfire, Misfire::kRunOnce);
  EXPECT_EQ(list[0].cursor, clock().Now());
  // The clock starts at 2027-01-15 08:00 UTC, 09:00 in Berlin.
  ASSERT_TRUE(list[0].next_fire.has_value());
  EXPECT_EQ(*list[0].next_fire,
            absl::FromCivil(absl::CivilSecond(2027, 1, 16, 1, 0, 0),
                            absl::UTCTimeZone()));
}

TEST_P(ScheduleReconcile, Upsert_ReconcilesOnlyItsOwnGroup) {
  Upsert("a", {Every("one", "* * * * *"), Every("two", "* * * * *")});
  Upsert("b", {Every("one", "@hourly")});
  Upsert("a", {Every("two", "*/5 * * * *"), Every("three", "@daily")});
  EXPECT_THAT(Names(), ElementsAre("a/three", "a/two", "b/one"));
  EXPECT_EQ(List("a")[1].spec.cron, "*/5 * * * *");
  EXPECT_EQ(List("b")[0].spec.cron, "@hourly");
}

TEST_P(ScheduleReconcile, Upsert_EmptyListDeletesTheGroupOnly) {
  Upsert("a", {Every("one", "* * * * *")});
  Upsert("b", {Every("one", "* * * * *")});
  Upsert("a", {});
  EXPECT_THAT(Names(), ElementsAre("b/one"));
}

TEST_P(ScheduleReconcile, Upsert_UnchangedKeepsUpdatedAtAndChangedKeepsCursor) {
  Upsert("g", {Every("s", "* * * * *")});
  const ScheduleInfo first = List("g")[0];
  clock().Advance(absl::Minutes(3));
  Pass();  // moves the cursor
  const absl::Time cursor = List("g")[0].cursor;
  EXPECT_GT(cursor, first.cursor);
  Upsert("g", {Every("s", "* * * * *")});
  EXPECT_EQ(List("g")[0].updated_at, first.updated_at);
  clock().Advance(absl::Seconds(10));
  Upsert("g", {Every("s", "*/2 * * * *")});
  const ScheduleInfo changed = List("g")[0];
  EXPECT_EQ(changed.updated_at, clock().Now());
  EXPECT_EQ(changed.created_at, first.created_at);
  EXPECT_EQ(changed.cursor, cursor);
}

TEST_P(ScheduleReconcile, BadSpecs_AreRefusedAndChangeNothing) {
  Upsert("g", {Every("kept", "* * * * *")});
  auto refused = [&](std::string_view group, ScheduleSpec spec) {
    std::vector<ScheduleSpec> specs = {Every("new", "@hourly"), spec};
    absl::Status status = engine().UpsertSchedules(group, specs);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    return std::string(status.message());
  };
  EXPECT_THAT(refused("g", Every("bad", "61 * * * *")),
              HasSubstr("spec \"bad\": cron expression \"61 * * * *\": "
                        "minute field \"61\" has 61, out of range 0-59"));
  EXPECT_THAT(refused("g", Every("bad", "* * * * *", "Mars/Olympus")),
              HasSubstr("unknown time zone \"Mars/Olympus\""));
  EXPECT_THAT(refused("g", Every("new", "@daily")), HasSubstr("appears twice"));
  EXPECT_THAT(refused("g", Every("bad name", "@daily")),
              HasSubstr("schedule name \"bad name\""));
  ScheduleSpec with_id = Every("bad", "@daily");
  with_id.options.id = "mine";
  EXPECT_THAT(refused("g", with_id), HasSubstr("options.id is not allowed"));
  ScheduleSpec no_target = Every("bad", "@daily");
  no_target.target = "";
  EXPECT_THAT(refused("g", no_target), HasSubstr("target"));
  ScheduleSpec negative_grace = Every("bad", "@daily");
  negative_grace.misfire_grace = absl::Seconds(-1);
  EXPECT_THAT(refused("g", negative_grace), HasSubstr("misfire_grace"));
  EXPECT_THAT(refused("", Every("ok", "@daily")),
              HasSubstr("schedule group \"\""));
  EXPECT_THAT(Names(), ElementsAre("g/kept"));
}

TEST_P(ScheduleReconcile, ListSchedules_OfEveryGroupOrOne) {
  Upsert("b", {Every("x", "@weekly")});
  Upsert("a", {Every("y", "0 0 1 1 *"), Every("x", "@monthly")});
  EXPECT_THAT(Names(), ElementsAre("a/x", "a/y", "b/x"));
  EXPECT_THAT(Names("b"), ElementsAre("b/x"));
  EXPECT_THAT(Names("c"), ElementsAre());
}

SLUICE_CONFORMANCE_SUITE(ScheduleReconcile);

}  // namespace
}  // namespace sluice::testing
