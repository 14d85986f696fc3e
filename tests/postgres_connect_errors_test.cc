// What a failed Postgres connection reports: a code that says whether
// retrying can help, and never the URL's password. The malformed-URL cases
// need no server; the rest use SLUICE_TEST_POSTGRES_URL, whose cluster
// (scripts/pg_cluster.sh) makes the role sluice_password_test give a
// password.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pg_connect_errors.h"
#include "pg_status.h"
#include "sluice/backends.h"
#include "sluice/internal/strings.h"
#include "sluice/postgres.h"
#include "support/postgres_sql.h"
#include "support/postgres_test_database.h"

namespace sluice::testing {
namespace {

using postgres_internal::CodeForSqlstate;
using postgres_internal::WithoutQuotedText;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPasswordRole[] = "sluice_password_test";

// `url` with `parameter` ("key=value") appended to its query.
std::string With(const std::string& url, std::string_view parameter) {
  return StrCat(url, url.find('?') == std::string::npos ? "?" : "&", parameter);
}

TEST(PostgresConnectErrorsTest, Sqlstates_MapToCodesWithARetryMeaning) {
  EXPECT_EQ(CodeForSqlstate("28P01"), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CodeForSqlstate("28000"), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CodeForSqlstate("42501"), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CodeForSqlstate("3D000"), absl::StatusCode::kNotFound);
  EXPECT_EQ(CodeForSqlstate("08006"), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CodeForSqlstate("57P03"), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CodeForSqlstate("53300"), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CodeForSqlstate("57014"), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(CodeForSqlstate("40001"), absl::StatusCode::kAborted);
  EXPECT_EQ(CodeForSqlstate("XX000"), absl::StatusCode::kInternal);
}

TEST(PostgresConnectErrorsTest, QuotedText_IsHiddenExceptOptionNames) {
  EXPECT_EQ(WithoutQuotedText("invalid percent-encoded token: \"pa%zzss\""),
            "invalid percent-encoded token: \"...\"");
  EXPECT_EQ(WithoutQuotedText(
                "invalid integer value \"pa\" for connection option \"port\""),
            "invalid integer value \"...\" for connection option \"port\"");
  EXPECT_EQ(WithoutQuotedText("missing \"=\" after \"s3cret\" in string"),
            "missing \"=\" after \"...\" in string");
  EXPECT_EQ(WithoutQuotedText("unpaired \"s3cret"), "unpaired \"...");
}

struct MalformedUrl {
  std::string url;
  std::vector<std::string> secrets;  // none may appear in the message
};

TEST(PostgresConnectErrorsTest, MalformedUrl_IsInvalidArgument_NeverEchoed) {
  const std::vector<MalformedUrl> cases = {
      {"postgresql://app:se%zzcret@127.0.0.1:1/app", {"se%zz", "zzcret"}},
      {"postgresql://app:p@ss@127.0.0.1:1/app", {"p@ss", "ss@127"}},
      {"postgresql://app:pa/ss@127.0.0.1:1/app", {"pa/ss", "ss@"}},
      {"postgresql://app:12/ss@127.0.0.1:1/app", {"12/ss", "ss@"}},
      {"postgresql://app:s3cret@127.0.0.1:1/app?sslmode=s3cret", {"s3cret"}},
      {"postgresql://app:s3cret@127.0.0.1:1/app?s3cret=1", {"s3cret"}},
      {"host=127.0.0.1 password=s3cret port=s3cret", {"s3cret"}},
      {"host=127.0.0.1 password='s3cret", {"s3cret"}},
  };
  for (const MalformedUrl& test : cases) {
    SCOPED_TRACE(test.url);
    absl::Status status = OpenPostgres(test.url).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    for (const std::string& secret : test.secrets) {
      EXPECT_THAT(status.message(), Not(HasSubstr(secret)));
    }
  }
}

TEST(PostgresConnectErrorsTest, UnknownScheme_IsNamedWithoutItsPassword) {
  absl::Status status = OpenBackend("postgre://app:s3cret@db/app").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("postgre://app:***@db/app"),
                                      Not(HasSubstr("s3cret"))));
}

TEST(PostgresConnectErrorsTest, ConnectionRefused_IsUnavailable) {
  absl::Status status =
      OpenPostgres("postgresql://app:s3cret@127.0.0.1:1/app").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("retry later"), Not(HasSubstr("s3cret"))));
}

// --- Against the test cluster ----------------------------------------------

class PostgresRefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
  }
};

TEST_F(PostgresRefusalTest, MissingDatabase_IsNotFound_NamingIt) {
  absl::Status status =
      OpenBackend(WithDatabase(PostgresTestUrl(), "sluice_no_such_database"))
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("\"sluice_no_such_database\" does not exist"),
                    HasSubstr("3D000"), Not(HasSubstr("retry"))));
}

TEST_F(PostgresRefusalTest, UnknownRole_IsPermissionDenied) {
  absl::Status status =
      OpenBackend(With(PostgresTestUrl(), "user=sluice_no_such_role")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("sluice_no_such_role"), HasSubstr("28000")));
}

TEST_F(PostgresRefusalTest, BadServerSettingInUrl_IsInvalidArgument) {
  absl::Status status =
      OpenBackend(
          With(PostgresTestUrl(), "options=-c%20statement_timeout%3Dsoon"))
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("statement_timeout"));
}

TEST_F(PostgresRefusalTest, WrongOrMissingPassword_IsPermissionDenied) {
  SqlSession admin(PostgresTestUrl());
  ASSERT_TRUE(admin.ok());
  if (admin.Count("SELECT count(*) FROM pg_hba_file_rules WHERE $1 = "
                  "ANY(user_name) AND auth_method <> 'trust'",
                  {kPasswordRole}) < 1) {
    GTEST_SKIP() << "the test cluster does not ask " << kPasswordRole
                 << " for a password; start it with scripts/pg_cluster.sh";
  }
  // Concurrent tests may both create the role.
  admin.Rows(StrCat("DO $$ BEGIN CREATE ROLE ", kPasswordRole,
                    " LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; "
                    "END $$"));
  admin.Rows(StrCat("ALTER ROLE ", kPasswordRole, " PASSWORD 'right'"));
  const std::string url = WithDatabase(
      With(PostgresTestUrl(), StrCat("user=", kPasswordRole)), "postgres");

  absl::Status wrong = OpenBackend(With(url, "password=wrong")).status();
  EXPECT_EQ(wrong.code(), absl::StatusCode::kPermissionDenied) << wrong;
  EXPECT_THAT(wrong.message(),
              AllOf(HasSubstr("password authentication"), HasSubstr("28P01"),
                    Not(HasSubstr("wrong"))));

  absl::Status missing = OpenBackend(url).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kPermissionDenied) << missing;

  // The right password gets past authentication, to the schema check of
  // a database that was never migrated.
  absl::Status right = OpenBackend(With(url, "password=right")).status();
  EXPECT_EQ(right.code(), absl::StatusCode::kFailedPrecondition) << right;
}

}  // namespace
}  // namespace sluice::testing
