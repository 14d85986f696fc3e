// The dashboard's actions over HTTP on every backend: cancel, retry and
// delete with the token; refusals (read-only, missing or wrong token, bad
// id, unknown run, wrong state) answer a clear 4xx and change nothing.
#include <string>

#include "absl/strings/match.h"
#include "dashboard_api_fixture.h"
#include "gtest/gtest.h"

namespace sluice::testing {
namespace {

const std::string kBearer = std::string("Bearer ") + DashboardApiTest::kToken;

std::string ErrorOf(const Reply& reply) {
  if (!reply.body.is_object() || !reply.body.as_object().contains("error")) {
    return "<no error field in: " + reply.text + ">";
  }
  return std::string(reply.body.at("error").as_string());
}

class DashboardActionsTest : public DashboardApiTest {
 protected:
  // A run of the mail job that failed (its one attempt refused).
  RunId FailedRun() {
    fail_ = true;
    if (workers_.empty()) StartWorker(MailJob());
    absl::StatusOr<EnqueueResult> run = engine_->Enqueue("mail", Json("x"));
    EXPECT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(WaitForEnd(run->run_id), RunStatus::kFailed);
    return run->run_id;
  }

  // The run's status and how many attempts its ledger holds.
  std::pair<RunStatus, size_t> StateOf(const RunId& id) {
    absl::StatusOr<RunView> view = engine_->GetRun(id);
    EXPECT_TRUE(view.ok()) << view.status();
    if (!view.ok()) return {RunStatus::kStarted, 0};
    return {view->run.status, view->attempts.size()};
  }
};

TEST_P(DashboardActionsTest, ReadOnlyDashboard_RefusesEveryAction) {
  StartServer();  // no token
  RunId id = FailedRun();
  auto before = StateOf(id);
  const std::string path = "/api/runs/" + id.ToString();
  for (const auto& [method, suffix] :
       {std::pair<std::string, std::string>{"POST", "/retry"},
        {"POST", "/cancel"},
        {"DELETE", ""}}) {
    Reply reply = Call(method, path + suffix, kBearer);
    EXPECT_EQ(reply.status, 403) << method << suffix;
    EXPECT_EQ(ErrorOf(reply),
              "the dashboard is read-only: no token is configured");
  }
  EXPECT_EQ(StateOf(id), before);
}

TEST_P(DashboardActionsTest, MissingOrWrongToken_IsRefused_NothingChanges) {
  StartServer({.token = kToken});
  RunId id = FailedRun();
  auto before = StateOf(id);
  const std::string retry = "/api/runs/" + id.ToString() + "/retry";
  const std::string remove = "/api/runs/" + id.ToString();

  Reply missing = Call("POST", retry);
  EXPECT_EQ(missing.status, 401);
  EXPECT_TRUE(absl::StrContains(ErrorOf(missing), "Authorization: Bearer"))
      << ErrorOf(missing);
  Reply scheme = Call("DELETE", remove, std::string("Basic ") + kToken);
  EXPECT_EQ(scheme.status, 401);
  EXPECT_EQ(Call("POST", retry, "Bearer").status, 401);  // no token in it
  for (const std::string& wrong :
       {std::string("Bearer nope"), std::string("Bearer ") + kToken + "x",
        std::string("Bearer s3cret-toke")}) {
    Reply reply = Call("POST", retry, wrong);
    EXPECT_EQ(reply.status, 403) << wrong;
    EXPECT_EQ(ErrorOf(reply), "the token is wrong");
    EXPECT_EQ(Call("DELETE", remove, wrong).status, 403) << wrong;
  }
  EXPECT_EQ(StateOf(id), before);
  EXPECT_EQ(Get(remove).status, 200);  // not deleted
}

TEST_P(DashboardActionsTest, Retry_ResumesAFailedRun_ThenA409OnceCompleted) {
  StartServer({.token = kToken});
  RunId id = FailedRun();
  fail_ = false;
  const std::string retry = "/api/runs/" + id.ToString() + "/retry";
  Reply ok = Call("POST", retry, kBearer);
  ASSERT_EQ(ok.status, 200) << ok.text;
  EXPECT_EQ(ok.body, (boost::json::object{{"ok", true}}));
  ASSERT_EQ(WaitForEnd(id), RunStatus::kCompleted);
  auto completed = StateOf(id);
  EXPECT_EQ(completed.second, 2u);  // the failed attempt and the retry

  Reply again = Call("POST", retry, kBearer);
  EXPECT_EQ(again.status, 409) << again.text;
  EXPECT_FALSE(ErrorOf(again).empty());
  Reply cancel =
      Call("POST", "/api/runs/" + id.ToString() + "/cancel", kBearer);
  EXPECT_EQ(cancel.status, 409) << cancel.text;
  EXPECT_EQ(StateOf(id), completed);
}

TEST_P(DashboardActionsTest, Cancel_AWaitingRun_ThenDeleteIt) {
  ASSERT_TRUE(engine_->Deploy(MailJob()).ok());
  StartServer({.token = kToken});
  // No worker: the run waits on its queue.
  absl::StatusOr<EnqueueResult> run = engine_->Enqueue("mail", Json("x"));
  ASSERT_TRUE(run.ok());
  const std::string path = "/api/runs/" + run->run_id.ToString();

  Reply early = Call("DELETE", path, kBearer);
  EXPECT_EQ(early.status, 409) << early.text;  // still started
  EXPECT_EQ(StateOf(run->run_id).first, RunStatus::kStarted);

  Reply cancel = Call("POST", path + "/cancel", kBearer);
  ASSERT_EQ(cancel.status, 200) << cancel.text;
  EXPECT_EQ(WaitForEnd(run->run_id), RunStatus::kCancelled);
  EXPECT_EQ(Get(path).body.at("run").at("status"), Json("cancelled"));

  Reply removed = Call("DELETE", path, kBearer);
  ASSERT_EQ(removed.status, 200) << removed.text;
  EXPECT_EQ(Get(path).status, 404);
  EXPECT_EQ(engine_->GetRun(run->run_id).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(DashboardActionsTest, BadIdIs400_UnknownRunIs404) {
  StartServer({.token = kToken});
  Reply bad = Call("POST", "/api/runs/xyz/retry", kBearer);
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(absl::StrContains(ErrorOf(bad), "is not a run id"));
  const std::string unknown = "/api/runs/" + RunId::Random().ToString();
  EXPECT_EQ(Call("POST", unknown + "/retry", kBearer).status, 404);
  EXPECT_EQ(Call("POST", unknown + "/cancel", kBearer).status, 404);
  EXPECT_EQ(Call("DELETE", unknown, kBearer).status, 404);
  // The token is checked before the id: nothing is said without it.
  EXPECT_EQ(Call("POST", "/api/runs/xyz/retry").status, 401);
}

INSTANTIATE_TEST_SUITE_P(Backends, DashboardActionsTest, DashboardBackends(),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
