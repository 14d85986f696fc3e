// A throwaway store for a test parameterized by backend: "memory",
// "sqlite" (a file in a scratch directory, removed afterwards) or
// "postgres" (a fresh migrated database on the SLUICE_TEST_POSTGRES_URL
// cluster, dropped afterwards). The backend is open; the test makes its
// engine on it.
//
//   if (ScratchStore::Unavailable(GetParam()))
//     GTEST_SKIP() << kPostgresSkipMessage;
//   absl::StatusOr<std::unique_ptr<ScratchStore>> store =
//       ScratchStore::Open(GetParam());
//   ASSERT_TRUE(store.ok()) << store.status();
#ifndef SLUICE_TESTS_SUPPORT_SCRATCH_STORE_H_
#define SLUICE_TESTS_SUPPORT_SCRATCH_STORE_H_

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/status/statusor.h"
#include "sluice/backend.h"
#include "sluice/backends.h"
#include "sluice/internal/strings.h"
#include "support/postgres_test_database.h"

namespace sluice::testing {

class ScratchStore {
 public:
  // Whether `kind` can't be tested here: Postgres without
  // SLUICE_TEST_POSTGRES_URL (the test skips with kPostgresSkipMessage).
  static bool Unavailable(std::string_view kind) {
    return kind == "postgres" && PostgresTestUrl().empty();
  }

  static absl::StatusOr<std::unique_ptr<ScratchStore>> Open(
      std::string_view kind) {
    std::unique_ptr<ScratchStore> store(new ScratchStore);
    if (kind == "memory") {
      store->url_ = "memory:";
    } else if (kind == "sqlite") {
      char dir[] = "/tmp/sluice-scratch-XXXXXX";
      if (mkdtemp(dir) == nullptr) {
        return absl::InternalError("can't make a scratch directory in /tmp");
      }
      store->dir_ = dir;
      store->url_ = "sqlite:" + store->dir_ + "/sluice.db";
    } else if (kind == "postgres") {
      absl::StatusOr<std::unique_ptr<TestDatabase>> database =
          TestDatabase::Create();
      if (!database.ok()) return database.status();
      store->database_ = std::move(*database);
      store->url_ = store->database_->url();
    } else {
      return absl::InvalidArgumentError(StrCat(
          "no scratch store \"", kind, "\"; use memory, sqlite or postgres"));
    }
    absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(store->url_);
    if (!backend.ok()) return backend.status();
    store->backend_ = std::move(*backend);
    return store;
  }

  // Closes the backend, then removes the file or drops the database.
  ~ScratchStore() {
    backend_.reset();
    database_.reset();
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  ScratchStore(const ScratchStore&) = delete;
  ScratchStore& operator=(const ScratchStore&) = delete;

  Backend& backend() { return *backend_; }
  const std::string& url() const { return url_; }

 private:
  ScratchStore() = default;

  std::string dir_;  // the SQLite file's directory, if any
  std::unique_ptr<TestDatabase> database_;
  std::string url_;
  std::unique_ptr<Backend> backend_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_SCRATCH_STORE_H_
