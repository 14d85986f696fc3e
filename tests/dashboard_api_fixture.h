// The dashboard API tests' fixture: an engine on one backend (memory,
// SQLite, or Postgres with SLUICE_TEST_POSTGRES_URL) behind an AdminServer
// with the dashboard's routes, and an HTTP client that returns each reply's
// status and parsed JSON body.
#ifndef SLUICE_TESTS_DASHBOARD_API_FIXTURE_H_
#define SLUICE_TESTS_DASHBOARD_API_FIXTURE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "sluice/admin_server.h"
#include "sluice/backends.h"
#include "sluice/dashboard.h"
#include "sluice/engine.h"
#include "sluice/job.h"
#include "support/postgres_test_database.h"
#include "support/scratch_store.h"

namespace sluice::testing {

struct Reply {
  int status = 0;  // 0 when the server did not answer
  Json body;       // null unless the body is JSON
  std::string text;
  std::string content_type;
};

class DashboardApiTest : public ::testing::TestWithParam<std::string> {
 public:
  static constexpr char kToken[] = "s3cret-token";

 protected:
  void SetUp() override;
  void TearDown() override;

  // Starts the listener with the dashboard's routes.
  void StartServer(DashboardOptions options = {});

  // One request; `authorization` is sent as the Authorization header
  // unless empty.
  Reply Call(const std::string& method, const std::string& path,
             const std::string& authorization = "");
  Reply Get(const std::string& path) { return Call("GET", path); }

  // Polls `condition` until it holds or 30 seconds pass.
  static bool WaitFor(const std::function<bool()>& condition);
  // Waits until the run has ended; its status then.
  RunStatus WaitForEnd(const RunId& id);

  // A job on queue "mail" that fails (without retry) while `fail_` is set
  // and returns its payload otherwise.
  Job& MailJob();
  // A flow "album": split (returns the run input's items) -> each (a map:
  // doubles every item) -> total (their sum).
  Flow& AlbumFlow();
  // Starts a worker serving `flow`; kept until the test ends.
  void StartWorker(const Flow& flow);
  void StartWorker(const Job& job);

  std::unique_ptr<ScratchStore> store_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<AdminServer> server_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Job> mail_job_;
  std::unique_ptr<Flow> album_;
  std::atomic<bool> fail_{false};
};

// The backends every dashboard API test runs on.
inline auto DashboardBackends() {
  return ::testing::Values("memory", "sqlite", "postgres");
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_DASHBOARD_API_FIXTURE_H_
