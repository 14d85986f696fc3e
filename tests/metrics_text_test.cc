// WritePrometheusText, read back with the test checker.
#include <string>

#include "gtest/gtest.h"
#include "sluice/metrics.h"
#include "support/prometheus_checker.h"

namespace sluice {
namespace {

using testing::ParsePrometheusText;
using testing::PromText;

HistogramSnapshot Histogram(std::vector<double> bounds,
                            std::vector<int64_t> counts, double sum) {
  HistogramSnapshot h;
  h.upper_bounds = std::move(bounds);
  h.bucket_counts = std::move(counts);
  for (int64_t c : h.bucket_counts) h.count += c;
  h.sum = sum;
  return h;
}

MetricsSnapshot FullSnapshot() {
  MetricsSnapshot s;
  s.runs.push_back({.flow = "email",
                    .started = 5,
                    .completed = 3,
                    .failed = 1,
                    .cancelled = 1});
  StepTaskCounts t;
  t.flow = "album";
  t.step = "resize";
  t.claimed = 7;
  t.completed = 4;
  t.retried = 2;
  t.failed = 1;
  t.stalled = 1;
  t.handler_seconds = Histogram({0.1, 1}, {2, 1, 1}, 3.25);
  t.latency_seconds = Histogram({0.1, 1}, {0, 4, 0}, 1.5);
  s.tasks.push_back(t);
  QueueMetrics q;
  q.queue = "album";
  q.waiting = 3;
  q.delayed = 2;
  q.active = 1;
  q.claim_batch_size = Histogram({1, 10}, {1, 2, 0}, 12);
  s.queues.push_back(q);
  s.outbox_backlog = 4;
  s.live_workers = 2;
  return s;
}

TEST(PrometheusText, EveryLineParses_AndEveryMetricHasAType) {
  PromText text = ParsePrometheusText(WritePrometheusText(FullSnapshot()));
  EXPECT_TRUE(text.problems.empty()) << ::testing::PrintToString(text.problems);
  for (const char* family :
       {"sluice_runs_started_total", "sluice_runs_completed_total",
        "sluice_runs_failed_total", "sluice_runs_cancelled_total",
        "sluice_tasks_claimed_total", "sluice_tasks_completed_total",
        "sluice_tasks_retried_total", "sluice_tasks_failed_total",
        "sluice_tasks_stalled_total"}) {
    EXPECT_EQ(text.types[family], "counter") << family;
  }
  for (const char* family :
       {"sluice_task_handler_duration_seconds", "sluice_task_latency_seconds",
        "sluice_claim_batch_size"}) {
    EXPECT_EQ(text.types[family], "histogram") << family;
  }
  for (const char* family : {"sluice_queue_tasks", "sluice_outbox_backlog",
                             "sluice_workers", "sluice_store_up"}) {
    EXPECT_EQ(text.types[family], "gauge") << family;
  }
}

TEST(PrometheusText, ValuesReadBackWithTheirLabels) {
  PromText text = ParsePrometheusText(WritePrometheusText(FullSnapshot()));
  EXPECT_EQ(text.Value("sluice_runs_started_total", {{"flow", "email"}}), 5);
  EXPECT_EQ(text.Value("sluice_runs_cancelled_total", {{"flow", "email"}}), 1);
  EXPECT_EQ(text.Value("sluice_tasks_retried_total",
                       {{"flow", "album"}, {"step", "resize"}}),
            2);
  EXPECT_EQ(text.Value("sluice_queue_tasks",
                       {{"queue", "album"}, {"state", "delayed"}}),
            2);
  EXPECT_EQ(text.Value("sluice_outbox_backlog"), 4);
  EXPECT_EQ(text.Value("sluice_workers"), 2);
  EXPECT_EQ(text.Value("sluice_store_up"), 1);
}

TEST(PrometheusText, HistogramBucketsAreCumulative_EndingWithInf) {
  PromText text = ParsePrometheusText(WritePrometheusText(FullSnapshot()));
  std::map<std::string, std::string> series = {{"flow", "album"},
                                               {"step", "resize"}};
  auto bucket = [&](const std::string& le) {
    std::map<std::string, std::string> labels = series;
    labels["le"] = le;
    return text.Value("sluice_task_handler_duration_seconds_bucket", labels);
  };
  EXPECT_EQ(bucket("0.1"), 2);
  EXPECT_EQ(bucket("1"), 3);
  EXPECT_EQ(bucket("+Inf"), 4);
  EXPECT_EQ(text.Value("sluice_task_handler_duration_seconds_count", series),
            4);
  EXPECT_EQ(text.Value("sluice_task_handler_duration_seconds_sum", series),
            3.25);
}

TEST(PrometheusText, LabelValuesAreEscaped) {
  MetricsSnapshot s;
  std::string odd = "we\"ird\\flow\nname";
  s.runs.push_back({.flow = odd, .started = 1});
  std::string rendered = WritePrometheusText(s);
  EXPECT_NE(rendered.find(R"(flow="we\"ird\\flow\nname")"), std::string::npos)
      << rendered;
  PromText text = ParsePrometheusText(rendered);
  EXPECT_TRUE(text.problems.empty()) << ::testing::PrintToString(text.problems);
  EXPECT_EQ(text.Value("sluice_runs_started_total", {{"flow", odd}}), 1);
}

TEST(PrometheusText, StoreThatDidNotAnswer_LeavesItsGaugesOut) {
  MetricsSnapshot s;
  s.store_error = "UNAVAILABLE: connection refused";
  s.queues.push_back(QueueMetrics{.queue = "mail"});
  PromText text = ParsePrometheusText(WritePrometheusText(s));
  EXPECT_TRUE(text.problems.empty()) << ::testing::PrintToString(text.problems);
  EXPECT_EQ(text.Value("sluice_store_up"), 0);
  EXPECT_FALSE(text.Value("sluice_outbox_backlog").has_value());
  EXPECT_FALSE(text.Value("sluice_queue_tasks",
                          {{"queue", "mail"}, {"state", "waiting"}})
                   .has_value());
}

// The checker itself must catch what it is there to catch.
TEST(PrometheusChecker, RejectsSamplesWithoutType_AndNonCumulativeBuckets) {
  EXPECT_FALSE(ParsePrometheusText("x_total 1\n").problems.empty());
  EXPECT_FALSE(
      ParsePrometheusText("# TYPE x counter\nx{a=\"b} 1\n").problems.empty());
  EXPECT_FALSE(ParsePrometheusText("# TYPE h histogram\n"
                                   "h_bucket{le=\"1\"} 3\n"
                                   "h_bucket{le=\"+Inf\"} 2\n"
                                   "h_sum 1\nh_count 2\n")
                   .problems.empty());
  EXPECT_FALSE(ParsePrometheusText("# TYPE h histogram\n"
                                   "h_bucket{le=\"1\"} 3\n"
                                   "h_sum 1\nh_count 3\n")
                   .problems.empty());
  EXPECT_TRUE(ParsePrometheusText("# TYPE h histogram\n"
                                  "h_bucket{le=\"1\"} 1\n"
                                  "h_bucket{le=\"+Inf\"} 2\n"
                                  "h_sum 1\nh_count 2\n")
                  .problems.empty());
}

}  // namespace
}  // namespace sluice
