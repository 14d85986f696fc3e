// Jobs and runs: ListRuns filters, order and cursors.
#include <algorithm>

#include "jobs_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAreArray;

class JobsList : public JobsConformance {
 protected:
  // Every page of `filter`, in order.
  std::vector<RunId> Walk(RunFilter filter) {
    std::vector<RunId> ids;
    for (int pages = 0; pages < 1000; ++pages) {
      absl::StatusOr<RunPage> page = engine().ListRuns(filter);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      for (const RunRecord& run : page->runs) ids.push_back(run.run_id);
      if (page->cursor.empty()) break;
      filter.cursor = page->cursor;
    }
    return ids;
  }
  std::vector<RunId> Ids(const RunFilter& filter) {
    absl::StatusOr<RunPage> page = engine().ListRuns(filter);
    EXPECT_TRUE(page.ok()) << page.status();
    std::vector<RunId> ids;
    if (page.ok()) {
      for (const RunRecord& run : page->runs) ids.push_back(run.run_id);
    }
    return ids;
  }
};

TEST_P(JobsList, PagesWithoutGapsOrRepeats_WhenTimesTie) {
  Job job = EchoJob();
  DeployJob(job);
  std::vector<RunId> enqueued;
  for (int tick = 0; tick < 3; ++tick) {
    for (int i = 0; i < 7; ++i)
      enqueued.push_back(Enqueue(job, Json(i)).run_id);
    clock().Advance(absl::Seconds(1));
  }
  std::vector<RunId> newest_first = Walk({.limit = 4});
  ASSERT_EQ(newest_first.size(), enqueued.size());
  std::vector<RunId> sorted = newest_first;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<RunId> oldest_first = Walk({.newest_first = false, .limit = 5});
  std::reverse(oldest_first.begin(), oldest_first.end());
  EXPECT_EQ(oldest_first, newest_first);  // the exact mirror
  // Newest first by time; within a tie by id descending.
  std::vector<RunId> first_tick(enqueued.begin(), enqueued.begin() + 7);
  std::sort(first_tick.rbegin(), first_tick.rend());
  EXPECT_THAT(std::vector<RunId>(newest_first.end() - 7, newest_first.end()),
              ElementsAreArray(first_tick));
}

TEST_P(JobsList, ACursorFromAnotherFilter_IsRefused) {
  Job job = EchoJob();
  DeployJob(job);
  for (int i = 0; i < 3; ++i) Enqueue(job, Json(i));
  absl::StatusOr<RunPage> page = engine().ListRuns({.limit = 1});
  ASSERT_TRUE(page.ok());
  ASSERT_FALSE(page->cursor.empty());
  RunFilter other{
      .statuses = {RunStatus::kStarted}, .limit = 1, .cursor = page->cursor};
  EXPECT_INVALID(engine().ListRuns(other).status(), "cursor");
  EXPECT_INVALID(engine().ListRuns({.cursor = "not-a-cursor"}).status(),
                 "cursor");
  // The same filter with another limit takes it.
  EXPECT_TRUE(engine().ListRuns({.limit = 2, .cursor = page->cursor}).ok());
}

TEST_P(JobsList, BadFilters_AreRefused) {
  EXPECT_INVALID(engine().ListRuns({.limit = 0}).status(), "limit 0");
  EXPECT_INVALID(engine().ListRuns({.limit = 10001}).status(), "limit 10001");
  EXPECT_INVALID(engine().ListRuns({.metadata = J("3")}).status(),
                 "metadata must be a JSON object");
  EXPECT_INVALID(engine().ListRuns({.names = {"bad name"}}).status(),
                 "is invalid");
  EXPECT_INVALID(
      engine().ListRuns({.from = clock().Now(), .to = clock().Now()}).status(),
      "`from` must be earlier than `to`");
}

TEST_P(JobsList, FiltersByNameStatusAndMetadata) {
  Job a = EchoJob("job_a");
  Job b = EchoJob("job_b", {.queue = "other"});
  DeployJob(a);
  DeployJob(b);
  RunId a1 =
      Enqueue(a, J("1"), {.metadata = J(R"({"tenant":"x","tier":1})")}).run_id;
  RunId a2 = Enqueue(a, J("2"), {.metadata = J(R"({"tenant":"y"})")}).run_id;
  RunId b1 = Enqueue(b, J("3"), {.metadata = J(R"({"tenant":"x"})")}).run_id;
  EXPECT_EQ(DriveJob(b), 1);
  EXPECT_EQ(Ids({.names = {"job_a"}}), (std::vector<RunId>{a2, a1}));
  EXPECT_EQ(Ids({.statuses = {RunStatus::kCompleted}}), std::vector<RunId>{b1});
  EXPECT_EQ(Ids({.metadata = J(R"({"tenant":"x"})")}),
            (std::vector<RunId>{b1, a1}));
  EXPECT_EQ(Ids({.metadata = J(R"({"tenant":"x","tier":1})")}),
            std::vector<RunId>{a1});
  EXPECT_EQ(Ids({.names = {"job_b"}, .metadata = J(R"({"tenant":"y"})")}),
            std::vector<RunId>{});
}

TEST_P(JobsList, QueueFilter_ListsTheRunsOfFlowsOnThatQueue) {
  Job mail = EchoJob("mail_job", {.queue = "mail"});
  Job work = EchoJob("work_job");
  DeployJob(mail);
  DeployJob(work);
  Flow digest("digest", {.queue = "mail"});
  digest.Step("s", Echo());
  Deploy(digest);
  RunId m = Enqueue(mail, J("1")).run_id;
  Enqueue(work, J("2"));
  absl::StatusOr<EnqueueResult> d = engine().StartRun("digest", J("{}"), {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(Ids({.queue = "mail"}), (std::vector<RunId>{d->run_id, m}));
  EXPECT_EQ(Ids({.names = {"mail_job"}, .queue = "mail"}),
            std::vector<RunId>{m});
  EXPECT_TRUE(Ids({.queue = "unused"}).empty());
}

TEST_P(JobsList, TimeRangeAndFinishOrder) {
  Job job = EchoJob();
  DeployJob(job);
  absl::Time t0 = clock().Now();
  RunId first = Enqueue(job, J("1")).run_id;
  clock().Advance(absl::Minutes(1));
  RunId second = Enqueue(job, J("2")).run_id;
  clock().Advance(absl::Minutes(1));
  RunId third = Enqueue(job, J("3")).run_id;
  EXPECT_EQ(Ids({.from = t0 + absl::Seconds(30), .to = t0 + absl::Minutes(2)}),
            std::vector<RunId>{second});
  // Finish them in the order third, first; second stays queued.
  std::vector<ClaimedTask> claimed = Claim(job.flow());
  ASSERT_EQ(claimed.size(), 3u);
  Complete(claimed[2], J("null"));
  clock().Advance(absl::Minutes(1));
  Complete(claimed[0], J("null"));
  EXPECT_EQ(Ids({.order_by = RunQuery::OrderBy::kFinishedAt}),
            (std::vector<RunId>{first, third}));
  EXPECT_EQ(
      Ids({.order_by = RunQuery::OrderBy::kFinishedAt, .newest_first = false}),
      (std::vector<RunId>{third, first}));
  (void)second;
}

SLUICE_CONFORMANCE_SUITE(JobsList);

}  // namespace
}  // namespace sluice::testing
