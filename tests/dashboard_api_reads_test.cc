// The dashboard's read endpoints over HTTP on every backend: config,
// overview (counts, workers, throughput), the runs list (filters, paging,
// bad filters), a run's detail (graph, tasks, attempts, truncation), flows,
// and a JSON 404 for unknown API paths.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "boost/json/object.hpp"
#include "dashboard_api_fixture.h"
#include "gtest/gtest.h"
#include "sluice/version.h"

namespace sluice::testing {
namespace {

std::string ErrorOf(const Reply& reply) {
  if (!reply.body.is_object() || !reply.body.as_object().contains("error")) {
    return "<no error field in: " + reply.text + ">";
  }
  return std::string(reply.body.at("error").as_string());
}

std::vector<std::string> RunIds(const Reply& reply) {
  std::vector<std::string> ids;
  for (const Json& run : reply.body.at("runs").as_array()) {
    ids.emplace_back(run.at("id").as_string());
  }
  return ids;
}

TEST_P(DashboardApiTest, Config_SaysReadOnlyWithoutAToken) {
  StartServer();
  Reply reply = Get("/api/config");
  ASSERT_EQ(reply.status, 200) << reply.text;
  EXPECT_EQ(reply.content_type, "application/json");
  EXPECT_EQ(reply.body.at("read_only"), Json(true));
  EXPECT_EQ(reply.body.at("version"), Json(SLUICE_VERSION));
}

TEST_P(DashboardApiTest, Config_WithAToken_IsNotReadOnly) {
  StartServer({.token = kToken});
  EXPECT_EQ(Get("/api/config").body.at("read_only"), Json(false));
}

TEST_P(DashboardApiTest, Overview_CountsWaitingWork_ThenWorkersAndThroughput) {
  ASSERT_TRUE(engine_->Deploy(MailJob()).ok());
  StartServer();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(engine_->Enqueue("mail", Json(i)).ok());
  }
  auto mail = [](const Reply& reply) -> Json {
    for (const Json& q : reply.body.at("queues").as_array()) {
      if (q.at("queue") == Json("mail")) return q;
    }
    return nullptr;
  };
  Reply before;
  ASSERT_TRUE(WaitFor([&] {
    before = Get("/api/overview");
    return !mail(before).is_null() && mail(before).at("waiting") == Json(3);
  })) << before.text;
  Json queue = mail(before);
  EXPECT_EQ(queue.at("active"), Json(0));
  EXPECT_EQ(queue.at("workers"), Json(0));
  EXPECT_EQ(queue.at("unserved"), Json(true));
  EXPECT_GE(queue.at("oldest_waiting_seconds").to_number<double>(), 0.0);
  EXPECT_TRUE(before.body.at("workers").as_array().empty());
  EXPECT_TRUE(before.body.at("now").is_string());

  StartWorker(MailJob());
  // Counts are at most a second old: poll until the work shows done.
  auto completed_per_minute = [](const Json& q) {
    int64_t sum = 0;
    for (const Json& m : q.at("throughput").as_array()) {
      sum += m.at("completed").as_int64();
    }
    return sum;
  };
  Reply after;
  ASSERT_TRUE(WaitFor([&] {
    after = Get("/api/overview");
    Json q = mail(after);
    return q.at("completed") == Json(3) && completed_per_minute(q) == 3 &&
           q.at("workers") == Json(1);
  })) << after.text;
  queue = mail(after);
  EXPECT_EQ(queue.at("waiting"), Json(0));
  EXPECT_EQ(queue.at("unserved"), Json(false));
  EXPECT_TRUE(queue.at("oldest_waiting_seconds").is_null());
  const boost::json::array& minutes = queue.at("throughput").as_array();
  ASSERT_EQ(minutes.size(), 15u);
  for (size_t i = 1; i < minutes.size(); ++i) {
    EXPECT_LT(minutes[i - 1].at("minute").as_string(),
              minutes[i].at("minute").as_string());
  }
  const boost::json::array& workers = after.body.at("workers").as_array();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].at("queues"), (boost::json::array{"mail"}));
  EXPECT_FALSE(workers[0].at("id").as_string().empty());
  EXPECT_TRUE(workers[0].at("last_seen").is_string());
}

TEST_P(DashboardApiTest, RunsList_PagesWithCursors_InBothOrders) {
  ASSERT_TRUE(engine_->Deploy(MailJob()).ok());
  StartServer();
  std::set<std::string> started;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<EnqueueResult> run = engine_->Enqueue("mail", Json(i));
    ASSERT_TRUE(run.ok()) << run.status();
    started.insert(run->run_id.ToString());
  }
  for (const char* order : {"newest", "oldest"}) {
    std::vector<std::string> seen;
    std::string path =
        std::string("/api/runs?flow=mail&limit=2&order=") + order;
    Reply page = Get(path);
    for (int pages = 0; pages < 10; ++pages) {
      ASSERT_EQ(page.status, 200) << page.text;
      for (const std::string& id : RunIds(page)) seen.push_back(id);
      if (page.body.at("next_cursor").is_null()) break;
      page = Get(path + "&cursor=" +
                 std::string(page.body.at("next_cursor").as_string()));
    }
    EXPECT_EQ(seen.size(), 5u) << order;
    EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), started);
  }
  Reply newest = Get("/api/runs?limit=5");
  Reply oldest = Get("/api/runs?limit=5&order=oldest");
  std::vector<std::string> reversed = RunIds(oldest);
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(RunIds(newest), reversed);
  const Json& run = newest.body.at("runs").at(0);
  EXPECT_EQ(run.at("flow"), Json("mail"));
  EXPECT_EQ(run.at("version"), Json("mail"));
  EXPECT_EQ(run.at("status"), Json("started"));
  EXPECT_EQ(run.at("queue"), Json("mail"));
  EXPECT_TRUE(run.at("created_at").is_string());
  EXPECT_TRUE(run.at("finished_at").is_null());
}

TEST_P(DashboardApiTest, RunsList_FiltersByStatusTimeAndAlias) {
  Flow v1("greet_v1");
  v1.Alias("greet").Step(
      "hello", [](const Json&, TaskContext&) -> absl::StatusOr<StepResult> {
        return Json("hi");
      });
  Flow v2("greet_v2");
  v2.Alias("greet").Step(
      "hello", {.max_attempts = 2},
      [](const Json&, TaskContext&) -> absl::StatusOr<StepResult> {
        return Json("hello");
      });
  ASSERT_TRUE(engine_->Deploy(v1).ok());
  ASSERT_TRUE(engine_->Deploy(v2).ok());
  ASSERT_TRUE(engine_->Deploy(MailJob()).ok());
  StartServer();
  absl::StatusOr<RunId> first = engine_->StartRun("greet", Json(1));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(engine_->Activate("greet", "greet_v2", "greet_v1").ok());
  absl::StatusOr<RunId> second = engine_->StartRun("greet", Json(2));
  ASSERT_TRUE(second.ok());
  fail_ = true;
  absl::StatusOr<EnqueueResult> failed = engine_->Enqueue("mail", Json(3));
  ASSERT_TRUE(failed.ok());
  StartWorker(MailJob());
  ASSERT_EQ(WaitForEnd(failed->run_id), RunStatus::kFailed);

  Reply greet = Get("/api/runs?flow=greet");
  ASSERT_EQ(greet.status, 200) << greet.text;
  EXPECT_EQ(RunIds(greet),
            (std::vector<std::string>{second->ToString(), first->ToString()}));
  EXPECT_EQ(greet.body.at("runs").at(0).at("flow"), Json("greet"));
  EXPECT_EQ(greet.body.at("runs").at(0).at("version"), Json("greet_v2"));
  EXPECT_EQ(RunIds(Get("/api/runs?flow=greet_v1")),
            std::vector<std::string>{first->ToString()});
  EXPECT_EQ(RunIds(Get("/api/runs?status=failed")),
            std::vector<std::string>{failed->run_id.ToString()});
  EXPECT_EQ(RunIds(Get("/api/runs?status=failed,completed")),
            std::vector<std::string>{failed->run_id.ToString()});
  EXPECT_EQ(RunIds(Get("/api/runs?status=started")).size(), 2u);
  EXPECT_TRUE(RunIds(Get("/api/runs?since=2999-01-01T00:00:00Z")).empty());
  EXPECT_EQ(RunIds(Get("/api/runs?until=2999-01-01T00:00:00Z")).size(), 3u);
  EXPECT_TRUE(RunIds(Get("/api/runs?flow=nobody")).empty());
}

TEST_P(DashboardApiTest, RunsList_BadFilters_Are400NamingTheProblem) {
  ASSERT_TRUE(engine_->Deploy(MailJob()).ok());
  StartServer();
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(engine_->Enqueue("mail", Json(i)).ok());
  struct Case {
    std::string query;
    std::string error_has;
  };
  std::string other_cursor(Get("/api/runs?limit=1&status=started")
                               .body.at("next_cursor")
                               .as_string());
  std::vector<Case> cases = {
      {"status=running", "status \"running\" is unknown"},
      {"status=completed,,failed", "status \"\" is unknown"},
      {"since=yesterday", "since \"yesterday\" is not an RFC 3339 time"},
      {"until=2026-13-01T00:00:00Z", "until \"2026-13-01T00:00:00Z\""},
      {"since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z",
       "since must be earlier than until"},
      {"limit=0", "limit \"0\" is out of range 1..200"},
      {"limit=201", "limit \"201\" is out of range 1..200"},
      {"limit=ten", "limit \"ten\" is out of range"},
      {"order=sideways", "order \"sideways\" is unknown"},
      {"cursor=not-a-cursor", "cursor is not one this query produced"},
      {"limit=1&status=completed&cursor=" + other_cursor,
       "cursor is not one this query produced"},
      {"flow=bad-slug!", "flow"},
  };
  for (const Case& c : cases) {
    Reply reply = Get("/api/runs?" + c.query);
    EXPECT_EQ(reply.status, 400) << c.query << ": " << reply.text;
    EXPECT_TRUE(absl::StrContains(ErrorOf(reply), c.error_has))
        << c.query << ": " << ErrorOf(reply);
  }
}

TEST_P(DashboardApiTest,
       RunDetail_ShowsGraphTasksAttempts_TruncatesLargeValues) {
  StartServer({.max_payload_bytes = 64});
  StartWorker(AlbumFlow());
  boost::json::array items = {1, 2, 3};
  std::string padding(200, 'x');
  absl::StatusOr<RunId> id = engine_->StartRun(
      "album", boost::json::object{{"items", items}, {"padding", padding}});
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(WaitForEnd(*id), RunStatus::kCompleted);

  Reply reply = Get("/api/runs/" + id->ToString());
  ASSERT_EQ(reply.status, 200) << reply.text;
  const Json& run = reply.body.at("run");
  EXPECT_EQ(run.at("id"), Json(id->ToString()));
  EXPECT_EQ(run.at("flow"), Json("album"));
  EXPECT_EQ(run.at("status"), Json("completed"));
  EXPECT_EQ(run.at("queue"), Json("album"));
  EXPECT_TRUE(run.at("finished_at").is_string());
  EXPECT_EQ(run.at("error"), Json(""));
  // The input is over 64 bytes: a preview of its text and its size.
  const Json& input = run.at("input");
  EXPECT_EQ(input.at("truncated"), Json(true));
  EXPECT_GT(input.at("bytes").as_int64(), 200);
  EXPECT_TRUE(absl::StartsWith(std::string(input.at("preview").as_string()),
                               "{\"items\""));
  // The leaf step's output, (1 + 2 + 3) * 2.
  EXPECT_EQ(run.at("output"), (boost::json::object{{"total", 12}}));

  const boost::json::array& steps =
      reply.body.at("graph").at("steps").as_array();
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].at("slug"), Json("split"));
  EXPECT_EQ(steps[0].at("kind"), Json("single"));
  EXPECT_TRUE(steps[0].at("depends_on").as_array().empty());
  EXPECT_EQ(steps[1].at("slug"), Json("each"));
  EXPECT_EQ(steps[1].at("kind"), Json("map"));
  EXPECT_EQ(steps[1].at("depends_on"), (boost::json::array{"split"}));
  EXPECT_EQ(steps[1].at("done"), Json(3));
  EXPECT_EQ(steps[1].at("total"), Json(3));
  EXPECT_EQ(steps[2].at("depends_on"), (boost::json::array{"each"}));
  for (const Json& step : steps)
    EXPECT_EQ(step.at("status"), Json("completed"));

  const boost::json::array& tasks = reply.body.at("tasks").as_array();
  ASSERT_EQ(tasks.size(), 5u);  // split, 3 x each, total
  std::multiset<std::string> task_steps;
  for (const Json& task : tasks) {
    task_steps.insert(std::string(task.at("step").as_string()));
    EXPECT_EQ(task.at("status"), Json("completed"));
    EXPECT_EQ(task.at("attempts"), Json(1));
  }
  EXPECT_EQ(task_steps.count("each"), 3u);
  const boost::json::array& attempts = reply.body.at("attempts").as_array();
  ASSERT_EQ(attempts.size(), 5u);
  for (const Json& attempt : attempts) {
    EXPECT_EQ(attempt.at("outcome"), Json("completed"));
    EXPECT_EQ(attempt.at("attempt"), Json(1));
    EXPECT_FALSE(attempt.at("worker").as_string().empty());
    EXPECT_TRUE(attempt.at("started_at").is_string());
    EXPECT_TRUE(attempt.at("finished_at").is_string());
  }
}

TEST_P(DashboardApiTest, RunDetail_BadId400_UnknownRun404) {
  StartServer();
  Reply bad = Get("/api/runs/not-a-run");
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(absl::StrContains(ErrorOf(bad), "\"not-a-run\" is not a run id"))
      << ErrorOf(bad);
  Reply unknown = Get("/api/runs/" + RunId::Random().ToString());
  EXPECT_EQ(unknown.status, 404) << unknown.text;
  EXPECT_FALSE(ErrorOf(unknown).empty());
}

TEST_P(DashboardApiTest, Flows_ListAliasesVersionsAndSteps) {
  ASSERT_TRUE(engine_->Deploy(AlbumFlow()).ok());
  Flow v1("greet_v1");
  v1.Alias("greet").Step(
      "hello", [](const Json&, TaskContext&) -> absl::StatusOr<StepResult> {
        return Json("hi");
      });
  Flow v2("greet_v2");
  v2.Alias("greet")
      .Step("hello",
            [](const Json&, TaskContext&) -> absl::StatusOr<StepResult> {
              return Json("hi");
            })
      .Wait("approval", {.depends_on = {"hello"}}, {});
  ASSERT_TRUE(engine_->Deploy(v1).ok());
  ASSERT_TRUE(engine_->Deploy(v2).ok());
  StartServer();
  Reply reply = Get("/api/flows");
  ASSERT_EQ(reply.status, 200) << reply.text;
  const boost::json::array& flows = reply.body.at("flows").as_array();
  ASSERT_EQ(flows.size(), 2u);
  EXPECT_EQ(flows[0].at("alias"), Json("album"));
  EXPECT_EQ(flows[0].at("active_version"), Json("album"));
  EXPECT_EQ(flows[0].at("steps").as_array().size(), 3u);
  EXPECT_EQ(flows[0].at("steps").at(1).at("kind"), Json("map"));
  const Json& greet = flows[1];
  EXPECT_EQ(greet.at("alias"), Json("greet"));
  EXPECT_EQ(greet.at("active_version"), Json("greet_v1"));
  const boost::json::array& versions = greet.at("versions").as_array();
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].at("slug"), Json("greet_v1"));
  EXPECT_EQ(versions[0].at("active"), Json(true));
  EXPECT_EQ(versions[1].at("slug"), Json("greet_v2"));
  EXPECT_EQ(versions[1].at("active"), Json(false));
  EXPECT_TRUE(versions[1].at("created_at").is_string());
  // The steps shown are the active version's.
  EXPECT_EQ(greet.at("steps").as_array().size(), 1u);
}

TEST_P(DashboardApiTest, UnknownApiPath_Is404Json) {
  StartServer();
  for (const auto& [method, path] :
       std::vector<std::pair<std::string, std::string>>{
           {"GET", "/api/nothing"},
           {"GET", "/api/runs/a/b/c"},
           {"POST", "/api/overview"},
           {"DELETE", "/api/flows"}}) {
    Reply reply = Call(method, path);
    EXPECT_EQ(reply.status, 404) << method << " " << path;
    EXPECT_TRUE(absl::StrContains(ErrorOf(reply), "no such API endpoint"))
        << reply.text;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DashboardApiTest, DashboardBackends(),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
