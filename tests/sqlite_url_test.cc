// sqlite: backend URLs with options (sqlite:PATH?synchronous=normal|full).
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backends.h"
#include "sqlite_backend.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

TEST(SqliteUrlTest, PlainPath_DefaultsToNormal) {
  absl::StatusOr<SqliteUrl> url = ParseSqliteUrl("/tmp/app.db");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->path, "/tmp/app.db");
  EXPECT_FALSE(url->options.synchronous_full);
}

TEST(SqliteUrlTest, SynchronousFull_SetsOption) {
  absl::StatusOr<SqliteUrl> url = ParseSqliteUrl("app.db?synchronous=full");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->path, "app.db");
  EXPECT_TRUE(url->options.synchronous_full);
}

TEST(SqliteUrlTest, SynchronousNormal_AnyCase) {
  absl::StatusOr<SqliteUrl> url = ParseSqliteUrl("app.db?synchronous=NORMAL");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_FALSE(url->options.synchronous_full);
}

TEST(SqliteUrlTest, UnknownValue_NamesIt) {
  absl::StatusOr<SqliteUrl> url = ParseSqliteUrl("app.db?synchronous=off");
  EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(url.status().message(), HasSubstr("synchronous=\"off\""));
}

TEST(SqliteUrlTest, UnknownOption_NamesIt) {
  absl::StatusOr<SqliteUrl> url =
      ParseSqliteUrl("app.db?synchronous=full&cache=shared");
  EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(url.status().message(), HasSubstr("\"cache=shared\""));
}

TEST(SqliteUrlTest, EmptyPath_IsRefused) {
  EXPECT_EQ(ParseSqliteUrl("?synchronous=full").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SqliteUrlTest, OpenBackend_BadOption_CreatesNoFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "sluice_url_test_bad.db")
          .string();
  std::filesystem::remove(path);
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend("sqlite:" + path + "?synchronous=sometimes");
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SqliteUrlTest, OpenBackend_SynchronousFull_Opens) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "sluice_url_test_full.db")
          .string();
  std::filesystem::remove(path);
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend("sqlite:" + path + "?synchronous=full");
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "sqlite");
  backend->reset();
  for (const char* ext : {"", "-wal", "-shm"}) {
    std::filesystem::remove(path + ext);
  }
}

}  // namespace
}  // namespace sluice
