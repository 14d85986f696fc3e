// A test on one real store, named by the test parameter: "sqlite" (a file
// in a scratch directory) or "postgres" (a fresh database on the cluster
// named by SLUICE_TEST_POSTGRES_URL; skipped without it). It opens a backend
// and an engine on the store, and kills any worker processes it started.
#ifndef SLUICE_TESTS_SUPPORT_STORE_TEST_H_
#define SLUICE_TESTS_SUPPORT_STORE_TEST_H_

#include <signal.h>
#include <stdlib.h>

#include <deque>
#include <filesystem>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "support/child_process.h"
#include "support/postgres_test_database.h"

namespace sluice::testing {

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/sluice-store-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    if (GetParam() == "postgres") {
      if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
      absl::StatusOr<std::unique_ptr<TestDatabase>> database =
          TestDatabase::Create();
      ASSERT_TRUE(database.ok()) << database.status();
      database_ = std::move(*database);
      url_ = database_->url();
    } else {
      url_ = "sqlite:" + dir_ + "/store.db";
    }
    absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url_);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(*backend_);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }

  void TearDown() override {
    for (Child& child : children_) {
      if (child.pid > 0) KillAndReap(child, SIGKILL);
    }
    engine_.reset();
    backend_.reset();
    database_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string dir_;
  std::string url_;
  std::unique_ptr<TestDatabase> database_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Engine> engine_;
  std::deque<Child> children_;  // killed in TearDown if still running
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_STORE_TEST_H_
