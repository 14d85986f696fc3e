// The checks every JSON payload passes before it reaches a backend.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "boost/json/monotonic_resource.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/json.h"
#include "utf8.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

absl::Status ParseError(std::string_view text) {
  return ParseJson(text, "run input").status();
}

void ExpectInvalid(const absl::Status& status, std::string_view needle) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(needle));
}

std::string Nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// A value nested `depth` arrays deep, built without recursion; the arrays
// live in `resource`, which frees them at once rather than by a recursive
// destructor.
Json NestedValue(size_t depth, boost::json::storage_ptr resource) {
  Json root{boost::json::array(resource)};
  Json* inner = &root;
  for (size_t i = 1; i < depth; ++i) {
    inner = &inner->as_array().emplace_back(boost::json::array(resource));
  }
  return root;
}

TEST(ParseJson, RefusesNumbersThatAreNotFinite) {
  ExpectInvalid(ParseError(R"({"a":1e99999})"), "not finite");
  ExpectInvalid(ParseError(R"({"a":[1,-1e400]})"), "at $.a[1]");
}

TEST(ParseJson, RefusesInvalidUtf8) {
  ExpectInvalid(ParseError("{\"a\":\"\xff\"}"), "run input is not valid JSON");
  ExpectInvalid(ParseError("{\"\xc3\x28\":1}"), "run input is not valid JSON");
}

TEST(ParseJson, AcceptsTheDepthLimitAndRefusesOneMore) {
  EXPECT_TRUE(ParseJson(Nested(kMaxJsonDepth), "run input").ok());
  ExpectInvalid(ParseError(Nested(kMaxJsonDepth + 1)),
                "nests deeper than the limit of 256");
  ExpectInvalid(ParseError(Nested(100'000)), "nests deeper");
}

TEST(ParseJson, RefusesIntegersOutsideTheSixtyFourBitRange) {
  EXPECT_TRUE(
      ParseJson("[-9223372036854775808,18446744073709551615]", "x").ok());
  ExpectInvalid(ParseError("[18446744073709551616]"), "outside the 64-bit");
  ExpectInvalid(ParseError("{\"n\":-9223372036854775809}"),
                "outside the 64-bit");
  // Fractions, exponents and digits inside strings are not integers.
  EXPECT_TRUE(ParseJson(R"([1.5e30, 123456789012345678901.5,
                            "123456789012345678901234"])",
                        "x")
                  .ok());
}

TEST(ParseJson, ReadsNumbersExactlySoTheyNeverDriftThroughStorage) {
  // Correctly rounded: the double nearest each literal, and what is written
  // reads back as the same double however often it is stored.
  for (std::string_view text :
       {"92233260375847758085e-34", "9.223326037584776E-15", "0.1",
        "1.7976931348623157e308", "5e-324", "2.2250738585072011e-308"}) {
    double nearest = std::strtod(std::string(text).c_str(), nullptr);
    Json value = *ParseJson(text, "x");
    EXPECT_EQ(value.as_double(), nearest) << text;
    for (int trip = 0; trip < 3; ++trip) {
      value = *ParseJson(SerializeJson(value), "x");
      EXPECT_EQ(value.as_double(), nearest) << text << " trip " << trip;
    }
  }
}

TEST(CheckJsonValue, NamesTheProblemAndWhereItIs) {
  Json value = {{"items", {1, std::numeric_limits<double>::quiet_NaN()}}};
  ExpectInvalid(CheckJsonValue(value, "handler output"),
                "handler output holds a number that is not finite (JSON has "
                "no Infinity or NaN) at $.items[1]");
  ExpectInvalid(CheckJsonValue(Json(std::numeric_limits<double>::infinity()),
                               "run input"),
                "NaN) at $");
  ExpectInvalid(CheckJsonValue(Json{{"s", "ok\xe2\x82"}}, "run input"),
                "string that is not valid UTF-8 at $.s");
  Json bad_key = boost::json::object{{"\xc0\xaf", 1}};
  ExpectInvalid(CheckJsonValue(bad_key, "run input"),
                "object key that is not valid UTF-8 at $[key #0]");
  EXPECT_TRUE(
      CheckJsonValue(Json{{"ok", {1, 2.5, "\xe2\x82\xac", nullptr}}}, "x")
          .ok());
}

TEST(CheckJsonValue, RefusesAnyDepthWithoutExhaustingTheStack) {
  boost::json::monotonic_resource resource;
  boost::json::storage_ptr storage(&resource);
  EXPECT_TRUE(
      CheckJsonValue(NestedValue(kMaxJsonDepth, storage), "run input").ok());
  ExpectInvalid(CheckJsonValue(NestedValue(kMaxJsonDepth + 1, storage), "x"),
                "nests deeper than the limit of 256");
  ExpectInvalid(CheckJsonPayload(NestedValue(100'000, storage), "run input"),
                "run input nests deeper");
}

// CheckJsonPayload skips serializing a payload whose bound clears the limit;
// either way it must refuse exactly the strings, arrays and objects that
// serialize over it (a scalar of another kind is never refused), escapes
// and numbers of every width included.
TEST(CheckJsonPayload, RefusesExactlyWhatSerializesOverTheLimit) {
  const Json values[] = {
      Json("quote \" backslash \\ control \x01 tab \t é"),
      boost::json::array{-9223372036854775807LL - 1, -1.7976931348623157e308,
                         18446744073709551615ULL, nullptr, false},
      *ParseJson(R"({"key \"one\"":[1,true,null,"x"],"k2":{"\u0002":2.5}})",
                 "test"),
      Json(boost::json::object{}),
  };
  for (const Json& value : values) {
    const size_t size = SerializeJson(value).size();
    for (size_t limit = size - 2; limit <= size + 2; ++limit) {
      EXPECT_EQ(CheckJsonPayload(value, "output", limit).ok(), limit >= size)
          << SerializeJson(value) << " limit " << limit;
    }
  }
}

TEST(Utf8, ChecksAndRepairs) {
  EXPECT_TRUE(IsValidUtf8("plain \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\x80"));              // stray continuation
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // cut short
  EXPECT_EQ(ToValidUtf8("a\xff"
                        "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(ToValidUtf8("ok \xe2\x82\xac"), "ok \xe2\x82\xac");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xe2\x82\xc0\xaf\xed\xa0\x80")));
}

}  // namespace
}  // namespace sluice
