#include "sluice/json.h"

#include "gtest/gtest.h"
#include "sluice/records.h"

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

// A task's message body as text is exactly its object serialized, however
// its slugs need escaping.
TEST(TaskMessageBody, TextIsTheSerializedObject) {
  for (std::string slug : {"plain",
                           R"(quote " backslash \ tab)"
                           "\t",
                           "control \x01 é ✓"}) {
    const TaskMessageBody body{.flow_slug = slug,
                               .run_id = RunId(0xabc, 0xdef),
                               .step_slug = slug + "_step",
                               .task_index = 12345};
    EXPECT_EQ(body.ToText(), SerializeJson(body.ToJson())) << slug;
    EXPECT_EQ(J(body.ToText()), body.ToJson()) << slug;
  }
  const OutgoingMessage plain{.body = J(R"({"n":1})")};
  EXPECT_EQ(plain.BodyText(), R"({"n":1})");
  const OutgoingMessage task{.task = TaskMessageBody{.flow_slug = "f"}};
  EXPECT_EQ(task.BodyText(), task.task->ToText());
}

}  // namespace
}  // namespace sluice
