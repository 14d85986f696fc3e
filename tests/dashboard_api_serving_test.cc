// How the dashboard serves: many open keep-alive connections do not hold
// up a new one, and the flow catalog the handlers share knows a job
// deployed after it was read.
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "dashboard_api_fixture.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace sluice::testing {
namespace {

using DashboardServingTest = DashboardApiTest;

// httplib serves a connection on one thread until it closes, so the
// listener needs a thread for every client open at once. With too few,
// a new connection waited for some idle keep-alive session to time out
// (5 seconds, httplib's keep-alive timeout) and closed it; it gets 4 here.
TEST_P(DashboardServingTest, ANewClient_IsServedWhileTwentyIdleOnesStayOpen) {
  StartServer();
  std::vector<std::unique_ptr<httplib::Client>> idle;
  for (int i = 0; i < 20; ++i) {
    auto client =
        std::make_unique<httplib::Client>(server_->address(), server_->port());
    client->set_keep_alive(true);
    httplib::Result result = client->Get("/api/config");
    ASSERT_TRUE(result) << "client " << i << ": "
                        << httplib::to_string(result.error());
    ASSERT_EQ(result->status, 200);
    idle.push_back(std::move(client));
  }
  httplib::Client late(server_->address(), server_->port());
  late.set_connection_timeout(4, 0);
  late.set_read_timeout(4, 0);
  const absl::Time start = absl::Now();
  httplib::Result result = late.Get("/api/config");
  ASSERT_TRUE(result) << "a new client was not served while 20 were open: "
                      << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  EXPECT_LT(absl::Now() - start, absl::Seconds(4))
      << "served only once an idle keep-alive session timed out";
}

TEST_P(DashboardServingTest, AJobDeployedAfterARequest_ShowsItsQueueAtOnce) {
  ASSERT_TRUE(engine_->Deploy(MailJob()).ok());
  StartServer();
  ASSERT_EQ(Get("/api/runs").status, 200);  // the catalog is read here
  Job late("late_job", {.queue = "late_queue"},
           [](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
             return payload;
           });
  ASSERT_TRUE(engine_->Deploy(late).ok());
  absl::StatusOr<EnqueueResult> run = engine_->Enqueue("late_job", Json(1));
  ASSERT_TRUE(run.ok()) << run.status();

  Reply detail = Get("/api/runs/" + run->run_id.ToString());
  ASSERT_EQ(detail.status, 200) << detail.text;
  EXPECT_EQ(detail.body.at("run").at("queue"), Json("late_queue"));
  Reply list = Get("/api/runs?flow=late_job");
  ASSERT_EQ(list.status, 200) << list.text;
  ASSERT_EQ(list.body.at("runs").as_array().size(), 1u) << list.text;
  EXPECT_EQ(list.body.at("runs").at(0).at("queue"), Json("late_queue"));
}

INSTANTIATE_TEST_SUITE_P(Backends, DashboardServingTest, DashboardBackends(),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
