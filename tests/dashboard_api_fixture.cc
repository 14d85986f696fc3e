#include "dashboard_api_fixture.h"

#include <utility>

#include "absl/time/clock.h"
#include "httplib.h"
#include "sluice/errors.h"

namespace sluice::testing {

void DashboardApiTest::SetUp() {
  if (ScratchStore::Unavailable(GetParam())) {
    GTEST_SKIP() << kPostgresSkipMessage;
  }
  absl::StatusOr<std::unique_ptr<ScratchStore>> store =
      ScratchStore::Open(GetParam());
  ASSERT_TRUE(store.ok()) << store.status();
  store_ = std::move(*store);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(store_->backend());
  ASSERT_TRUE(engine.ok()) << engine.status();
  engine_ = std::move(*engine);
}

void DashboardApiTest::TearDown() {
  for (std::unique_ptr<Worker>& worker : workers_) {
    EXPECT_TRUE(worker->Stop().ok());
  }
  workers_.clear();
  server_.reset();
  engine_.reset();
  store_.reset();
}

void DashboardApiTest::StartServer(DashboardOptions options) {
  absl::StatusOr<std::unique_ptr<AdminServer>> server = AdminServer::Start(
      *engine_, {.add_routes = [this, options](httplib::Server& s) {
        AddDashboardRoutes(s, *engine_, options);
      }});
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = std::move(*server);
}

Reply DashboardApiTest::Call(const std::string& method, const std::string& path,
                             const std::string& authorization) {
  httplib::Client client(server_->address(), server_->port());
  client.set_read_timeout(30, 0);
  httplib::Headers headers;
  if (!authorization.empty()) headers.emplace("Authorization", authorization);
  httplib::Result result =
      method == "POST"
          ? client.Post(path.c_str(), headers, "", "application/json")
      : method == "DELETE" ? client.Delete(path.c_str(), headers)
                           : client.Get(path.c_str(), headers);
  Reply reply;
  if (!result) {
    ADD_FAILURE() << method << " " << path << ": "
                  << httplib::to_string(result.error());
    return reply;
  }
  reply.status = result->status;
  reply.text = result->body;
  reply.content_type = result->get_header_value("Content-Type");
  if (reply.content_type == "application/json") {
    absl::StatusOr<Json> body = ParseJson(reply.text, "reply");
    EXPECT_TRUE(body.ok()) << body.status();
    if (body.ok()) reply.body = *std::move(body);
  }
  return reply;
}

bool DashboardApiTest::WaitFor(const std::function<bool()>& condition) {
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

RunStatus DashboardApiTest::WaitForEnd(const RunId& id) {
  RunStatus status = RunStatus::kStarted;
  EXPECT_TRUE(WaitFor([&] {
    absl::StatusOr<RunView> view = engine_->GetRun(id);
    if (view.ok()) status = view->run.status;
    return view.ok() && IsTerminal(status);
  })) << "run "
      << id.ToString() << " did not end";
  return status;
}

Job& DashboardApiTest::MailJob() {
  if (!mail_job_) {
    mail_job_ = std::make_unique<Job>(
        "mail", JobOptions{.queue = "mail"},
        [this](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
          if (fail_) return NonRetryable("the mail server said no");
          return payload;
        });
  }
  return *mail_job_;
}

Flow& DashboardApiTest::AlbumFlow() {
  if (!album_) {
    album_ = std::make_unique<Flow>("album");
    album_
        ->Step(
            "split",
            [](const Json& input, TaskContext&) -> absl::StatusOr<StepResult> {
              return Json(input.at("run").at("items"));
            })
        .Map("each", {.depends_on = {"split"}},
             [](const Json& item, TaskContext&) -> absl::StatusOr<StepResult> {
               return Json(item.as_int64() * 2);
             })
        .Step(
            "total", {.depends_on = {"each"}},
            [](const Json& input, TaskContext&) -> absl::StatusOr<StepResult> {
              int64_t sum = 0;
              for (const Json& v : input.at("each").as_array()) {
                sum += v.as_int64();
              }
              return Json(sum);
            });
  }
  return *album_;
}

void DashboardApiTest::StartWorker(const Flow& flow) {
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine_->StartWorker(flow, {.concurrency = 2});
  ASSERT_TRUE(worker.ok()) << worker.status();
  workers_.push_back(std::move(*worker));
}

void DashboardApiTest::StartWorker(const Job& job) {
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine_->StartWorker(WorkerSpec().Serve(job), {.concurrency = 2});
  ASSERT_TRUE(worker.ok()) << worker.status();
  workers_.push_back(std::move(*worker));
}

}  // namespace sluice::testing
