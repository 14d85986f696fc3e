// The admin listener over HTTP: /metrics scraped while 1,000 jobs run
// through a worker, on SQLite (and Postgres with SLUICE_TEST_POSTGRES_URL),
// with the counters matching the runs; /healthz.
#include "sluice/admin_server.h"

#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "sluice/forwarding_backend.h"
#include "sluice/job.h"
#include "support/postgres_test_database.h"
#include "support/prometheus_checker.h"
#include "support/scratch_store.h"

namespace sluice {
namespace {

using testing::ParsePrometheusText;
using testing::PromText;

constexpr int kJobs = 1000;

class AdminServerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (testing::ScratchStore::Unavailable(GetParam())) {
      GTEST_SKIP() << testing::kPostgresSkipMessage;
    }
    absl::StatusOr<std::unique_ptr<testing::ScratchStore>> store =
        testing::ScratchStore::Open(GetParam());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  // GETs `path`; the test fails if the server does not answer.
  httplib::Result Get(const AdminServer& server, const std::string& path) {
    httplib::Client client(server.address(), server.port());
    client.set_read_timeout(30, 0);
    return client.Get(path.c_str());
  }

  // Scrapes /metrics and parses it; every scrape must be well-formed.
  PromText Scrape(const AdminServer& server) {
    httplib::Result result = Get(server, "/metrics");
    EXPECT_TRUE(result) << httplib::to_string(result.error());
    if (!result) return PromText();
    EXPECT_EQ(result->status, 200);
    EXPECT_EQ(result->get_header_value("Content-Type"), kPrometheusContentType);
    PromText text = ParsePrometheusText(result->body);
    EXPECT_TRUE(text.problems.empty())
        << ::testing::PrintToString(text.problems);
    return text;
  }

  std::unique_ptr<testing::ScratchStore> store_;
};

TEST_P(AdminServerTest, ScrapesWhileAThousandJobsRun_CountersMatchTheRuns) {
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(store_->backend());
  ASSERT_TRUE(engine.ok()) << engine.status();
  // Handlers wait until the test has scraped a worker mid-run.
  absl::Notification release;
  Job job("scraped", {.queue = "scraped"},
          [&release](const Json& payload,
                     const TaskContext&) -> absl::StatusOr<Json> {
            release.WaitForNotificationWithTimeout(absl::Seconds(60));
            return payload;
          });
  ASSERT_TRUE((*engine)->Deploy(job).ok());
  absl::StatusOr<std::unique_ptr<AdminServer>> server =
      AdminServer::Start(**engine);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->address(), "127.0.0.1");
  EXPECT_GT((*server)->port(), 0);

  std::vector<Engine::EnqueueItem> items;
  for (int i = 0; i < kJobs; ++i) items.push_back({Json(i), {}});
  ASSERT_TRUE((*engine)->EnqueueMany("scraped", items).ok());
  absl::StatusOr<std::unique_ptr<Worker>> worker = (*engine)->StartWorker(
      WorkerSpec().Serve(job), {.concurrency = 8, .batch_size = 50});
  ASSERT_TRUE(worker.ok()) << worker.status();

  const std::map<std::string, std::string> flow = {{"flow", "scraped"}};
  const std::map<std::string, std::string> step = {{"flow", "scraped"},
                                                   {"step", "job"}};
  // Mid-run: tasks claimed and held by blocked handlers, none completed.
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  PromText mid;
  do {
    mid = Scrape(**server);
  } while (mid.Value("sluice_tasks_claimed_total", step).value_or(0) == 0 &&
           absl::Now() < deadline);
  EXPECT_EQ(mid.Value("sluice_runs_started_total", flow), kJobs);
  EXPECT_GT(mid.Value("sluice_tasks_claimed_total", step).value_or(0), 0);
  EXPECT_EQ(mid.Value("sluice_tasks_completed_total", step), 0);
  EXPECT_EQ(mid.Value("sluice_workers"), 1);
  EXPECT_LT(mid.Value("sluice_queue_tasks",
                      {{"queue", "scraped"}, {"state", "waiting"}})
                .value_or(kJobs),
            kJobs);
  EXPECT_GT(mid.Value("sluice_queue_tasks",
                      {{"queue", "scraped"}, {"state", "active"}})
                .value_or(0),
            0);
  release.Notify();

  // Scrape until every run and every task is counted (the worker counts a
  // batch's runs and its tasks one after the other, so a scrape can fall
  // between them); counters only grow on the way.
  double last_completed = 0;
  PromText end;
  auto all_counted = [&] {
    return end.Value("sluice_runs_completed_total", flow).value_or(0) >=
               kJobs &&
           end.Value("sluice_tasks_completed_total", step).value_or(0) >=
               kJobs &&
           end.Value("sluice_task_latency_seconds_count", step).value_or(0) >=
               kJobs;
  };
  do {
    end = Scrape(**server);
    double completed =
        end.Value("sluice_tasks_completed_total", step).value_or(0);
    EXPECT_GE(completed, last_completed);
    EXPECT_LE(completed, kJobs);
    last_completed = completed;
  } while (!all_counted() && absl::Now() < deadline);
  EXPECT_EQ(end.Value("sluice_runs_started_total", flow), kJobs);
  EXPECT_EQ(end.Value("sluice_runs_completed_total", flow), kJobs);
  EXPECT_EQ(end.Value("sluice_runs_failed_total", flow), 0);
  EXPECT_EQ(end.Value("sluice_tasks_claimed_total", step), kJobs);
  EXPECT_EQ(end.Value("sluice_tasks_completed_total", step), kJobs);
  EXPECT_EQ(end.Value("sluice_tasks_retried_total", step), 0);
  EXPECT_EQ(end.Value("sluice_task_handler_duration_seconds_count", step),
            kJobs);
  EXPECT_EQ(end.Value("sluice_task_latency_seconds_count", step), kJobs);
  EXPECT_EQ(end.Value("sluice_claim_batch_size_sum", {{"queue", "scraped"}}),
            kJobs);
  EXPECT_EQ(end.Value("sluice_queue_tasks",
                      {{"queue", "scraped"}, {"state", "waiting"}}),
            0);
  EXPECT_EQ(end.Value("sluice_queue_tasks",
                      {{"queue", "scraped"}, {"state", "active"}}),
            0);
  EXPECT_EQ(end.Value("sluice_store_up"), 1);

  ASSERT_TRUE((*worker)->Stop().ok());
  EXPECT_EQ(Scrape(**server).Value("sluice_workers"), 0);
  EXPECT_EQ((*worker)->stats().completed, kJobs);
}

TEST_P(AdminServerTest, Healthz_IsOkWhileTheStoreAnswers) {
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(store_->backend());
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<std::unique_ptr<AdminServer>> server =
      AdminServer::Start(**engine);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Result result = Get(**server, "/healthz");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->body, "ok\n");
}

INSTANTIATE_TEST_SUITE_P(Backends, AdminServerTest,
                         ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

// A backend whose Begin fails while `down` is set.
class SwitchableBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  std::atomic<bool> down{false};

 protected:
  absl::Status BeforeBegin() override {
    return down ? absl::UnavailableError("connection refused")
                : absl::OkStatus();
  }
};

TEST(AdminServer, Healthz_Is503WhileTheStoreIsDown_AndMetricsStillServe) {
  absl::StatusOr<std::unique_ptr<Backend>> memory = OpenBackend("memory:");
  ASSERT_TRUE(memory.ok());
  SwitchableBackend backend(**memory);
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(backend);
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<std::unique_ptr<AdminServer>> server =
      AdminServer::Start(**engine);
  ASSERT_TRUE(server.ok()) << server.status();
  backend.down = true;
  httplib::Client client((*server)->address(), (*server)->port());
  httplib::Result health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_NE(health->body.find("connection refused"), std::string::npos);
  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(ParsePrometheusText(metrics->body).Value("sluice_store_up"), 0);
  backend.down = false;
  EXPECT_EQ(client.Get("/healthz")->status, 200);
}

TEST(AdminServer, AddRoutes_ServesTheHostsRoutesBesideMetrics) {
  absl::StatusOr<std::unique_ptr<Backend>> memory = OpenBackend("memory:");
  ASSERT_TRUE(memory.ok());
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**memory);
  ASSERT_TRUE(engine.ok());
  absl::StatusOr<std::unique_ptr<AdminServer>> server =
      AdminServer::Start(**engine, {.add_routes = [](httplib::Server& http) {
        http.Get("/dashboard",
                 [](const httplib::Request&, httplib::Response& response) {
                   response.set_content("hello", "text/plain");
                 });
      }});
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client((*server)->address(), (*server)->port());
  EXPECT_EQ(client.Get("/dashboard")->body, "hello");
  EXPECT_EQ(client.Get("/metrics")->status, 200);
  (*server)->Stop();
  (*server)->Stop();  // idempotent
  EXPECT_FALSE(client.Get("/metrics"));
}

TEST(AdminServer, BadPortOrForeignAddress_IsAClearError) {
  absl::StatusOr<std::unique_ptr<Backend>> memory = OpenBackend("memory:");
  ASSERT_TRUE(memory.ok());
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**memory);
  ASSERT_TRUE(engine.ok());
  absl::StatusOr<std::unique_ptr<AdminServer>> bad =
      AdminServer::Start(**engine, {.port = 70000});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  // An address that is not this host's (TEST-NET-3) can't be bound.
  absl::StatusOr<std::unique_ptr<AdminServer>> elsewhere =
      AdminServer::Start(**engine, {.address = "203.0.113.1", .port = 9464});
  EXPECT_EQ(elsewhere.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(elsewhere.status().message().find("203.0.113.1:9464"),
            absl::string_view::npos)
      << elsewhere.status();
}

}  // namespace
}  // namespace sluice
