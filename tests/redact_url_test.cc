#include "sluice/redact_url.h"

#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(RedactUrlTest, UriPassword_IsHidden) {
  EXPECT_EQ(RedactUrl("postgresql://app:s3cret@db:5432/app?sslmode=require"),
            "postgresql://app:***@db:5432/app?sslmode=require");
}

TEST(RedactUrlTest, UriWithoutPassword_IsUnchanged) {
  for (const char* url :
       {"postgresql://app@db/app", "postgresql:///postgres?host=/tmp/pg",
        "postgresql://db:5432/app", "postgres://app@db:5432/app?x=a@b",
        "memory:", "sqlite:/var/lib/app/sluice.db"}) {
    EXPECT_EQ(RedactUrl(url), url);
  }
}

TEST(RedactUrlTest, UnescapedSeparatorsInPassword_AreHiddenWhole) {
  EXPECT_EQ(RedactUrl("postgresql://app:p@ss/w?rd@db/app"),
            "postgresql://app:***@db/app");
  EXPECT_EQ(RedactUrl("postgresql://app:bad%zzescape@db/app"),
            "postgresql://app:***@db/app");
}

TEST(RedactUrlTest, QueryPassword_IsHidden) {
  EXPECT_EQ(RedactUrl("postgresql://db/app?user=me&password=s3cret&x=1"),
            "postgresql://db/app?user=me&password=***&x=1");
  EXPECT_EQ(RedactUrl("postgresql://db/app?pass%77ord=s3cret"),
            "postgresql://db/app?pass%77ord=***");
}

TEST(RedactUrlTest, QueryPasswordAfterAnAmpersandInTheHost_IsHidden) {
  // Found by fuzz/backend_url_fuzzer.cc.
  EXPECT_EQ(RedactUrl("postgres://&/app?password=s3cret/p"),
            "postgres://&/app?password=***");
}

// libpq ends the userinfo at the first '/', so here the only '@' is inside
// the query's password, which must not be left half in view.
TEST(RedactUrlTest, QueryPasswordHoldingTheLastAt_IsHiddenWhole) {
  // Found by fuzz/backend_url_fuzzer.cc.
  EXPECT_EQ(RedactUrl("postgres://host:5&=x/db?password=@s3cret/p"),
            "postgres://host:***");
  EXPECT_EQ(RedactUrl("postgres://u:a&password=b@db/app"), "postgres://u:***");
}

TEST(RedactUrlTest, KeywordValuePassword_IsHidden) {
  EXPECT_EQ(RedactUrl("host=db password=s3cret user=app"),
            "host=db password=*** user=app");
  EXPECT_EQ(RedactUrl("host=db password = 'a \\' b' user=app"),
            "host=db password = *** user=app");
  EXPECT_EQ(RedactUrl("dbname='postgresql://app:s3cret@db/app' port=5"),
            "dbname='postgresql://app:***@db/app' port=5");
}

// libpq reads "d\\ p'd='a" as one unquoted value (a backslash escapes the
// space, and a quote inside a value is a character), so the password that
// follows is a key of its own.
TEST(RedactUrlTest, BackslashEscapedSpaceInAValue_DoesNotEndIt) {
  EXPECT_EQ(RedactUrl("host=d\\ p'd='a password='s2' user=app"),
            "host=d\\ p'd='a password=*** user=app");
  EXPECT_EQ(RedactUrl("host=db\\"), "host=db\\");
}

TEST(RedactUrlTest, KeywordValueItCannotParse_HidesTheRest) {
  EXPECT_EQ(RedactUrl("host=db password='s3cret"), "host=db password=***");
  EXPECT_EQ(RedactUrl("host=db junk s3cret"), "host=db junk ***");
}

}  // namespace
}  // namespace sluice
