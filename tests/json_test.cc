#include "sluice/json.h"

#include "gtest/gtest.h"

namespace sluice {
namespace {

Json J(std::string_view text) { return *ParseJson(text, "test"); }

TEST(JsonContains, ObjectContainsSubsetOfItsKeys) {
  EXPECT_TRUE(
      JsonContains(J(R"({"a":1,"b":{"c":2,"d":3}})"), J(R"({"b":{"c":2}})")));
  EXPECT_FALSE(JsonContains(J(R"({"a":1})"), J(R"({"a":2})")));
  EXPECT_FALSE(JsonContains(J(R"({"a":1})"), J(R"({"b":1})")));
  EXPECT_TRUE(JsonContains(J(R"({"a":1})"), J("{}")));
}

TEST(JsonContains, ArraysContainEveryPatternElementAnywhere) {
  EXPECT_TRUE(JsonContains(J("[1,2,3]"), J("[3,1]")));
  EXPECT_TRUE(JsonContains(J("[1,2,3]"), J("[1,1]")));
  EXPECT_FALSE(JsonContains(J("[1,2,3]"), J("[4]")));
  EXPECT_TRUE(JsonContains(J(R"([{"a":1,"b":2}])"), J(R"([{"a":1}])")));
  EXPECT_TRUE(JsonContains(J("[1]"), J("[]")));
}

TEST(JsonContains, TopLevelArrayContainsAMatchingScalar) {
  EXPECT_TRUE(JsonContains(J(R"(["foo","bar"])"), J(R"("foo")")));
  EXPECT_FALSE(JsonContains(J(R"({"x":["foo"]})"), J(R"({"x":"foo"})")));
}

TEST(JsonContains, ScalarsCompareByValueAndKind) {
  EXPECT_TRUE(JsonContains(J("1"), J("1.0")));
  EXPECT_FALSE(JsonContains(J("0"), J("false")));
  EXPECT_FALSE(JsonContains(J("null"), J("false")));
  EXPECT_TRUE(JsonContains(J("null"), J("null")));
  EXPECT_FALSE(JsonContains(J(R"("1")"), J("1")));
  EXPECT_TRUE(
      JsonContains(J("18446744073709551615"), J("18446744073709551615")));
  EXPECT_FALSE(JsonContains(J("-1"), J("18446744073709551615")));
}

TEST(JsonContains, ObjectPatternNeverMatchesAnArrayOrScalar) {
  EXPECT_FALSE(JsonContains(J("[1]"), J(R"({"a":1})")));
  EXPECT_FALSE(JsonContains(J(R"("s")"), J("{}")));
}

TEST(ParseJson, RejectsMalformedTextAndOversizedInput) {
  absl::StatusOr<Json> bad = ParseJson("{", "run input");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      std::string(bad.status().message()).find("run input is not valid JSON"),
      std::string::npos);
  absl::StatusOr<Json> big = ParseJson("[1,2,3]", "payload", 3);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(std::string(big.status().message()).find("over the limit of 3"),
            std::string::npos);
}

TEST(ParseJson, KeepsLargeIntegersExactly) {
  Json v = J("[1234567890123456, 9223372036854775807, 18446744073709551615]");
  EXPECT_EQ(v.as_array()[0].as_int64(), 1234567890123456);
  EXPECT_EQ(v.as_array()[1].as_int64(), 9223372036854775807);
  EXPECT_EQ(v.as_array()[2].as_uint64(), 18446744073709551615ULL);
  EXPECT_EQ(SerializeJson(v),
            "[1234567890123456,9223372036854775807,18446744073709551615]");
}

TEST(CheckPayloadSize, CountsTheSerializedSize) {
  EXPECT_TRUE(CheckPayloadSize(J(R"({"a":"xx"})"), "output", 10).ok());
  EXPECT_FALSE(CheckPayloadSize(J(R"({"a":"xxx"})"), "output", 10).ok());
}

TEST(JsonTypeName, NamesEveryKind) {
  EXPECT_EQ(JsonTypeName(J("{}")), "object");
  EXPECT_EQ(JsonTypeName(J("[]")), "array");
  EXPECT_EQ(JsonTypeName(J("\"\"")), "string");
  EXPECT_EQ(JsonTypeName(J("1.5")), "number");
  EXPECT_EQ(JsonTypeName(J("true")), "boolean");
  EXPECT_EQ(JsonTypeName(J("null")), "null");
}

}  // namespace
}  // namespace sluice
