#include "demo_flow.h"

#include <map>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "boost/json.hpp"

namespace sluice::demo {
namespace {

// One document's word counts, typed: converted through Boost.JSON.
struct WordCount {
  std::string title;
  int64_t words = 0;
  std::string top_word;
};

void tag_invoke(boost::json::value_from_tag, Json& v, const WordCount& c) {
  v = boost::json::object{
      {"title", c.title}, {"words", c.words}, {"top_word", c.top_word}};
}

struct Document {
  std::string title;
  std::string text;
};

Document tag_invoke(boost::json::value_to_tag<Document>, const Json& v) {
  return Document{std::string(v.at("title").as_string()),
                  std::string(v.at("text").as_string())};
}

absl::StatusOr<WordCount> CountWords(const Document& doc, TaskContext&) {
  std::map<std::string, int> counts;
  std::istringstream in(doc.text);
  WordCount result{doc.title, 0, ""};
  int best = 0;
  for (std::string word; in >> word;) {
    std::string clean;
    for (char c : word) {
      if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
        clean += absl::ascii_tolower(static_cast<unsigned char>(c));
      }
    }
    if (clean.empty()) continue;
    ++result.words;
    int n = ++counts[clean];
    if (n > best || (n == best && clean < result.top_word)) {
      best = n;
      result.top_word = clean;
    }
  }
  return result;
}

}  // namespace

Flow WordStatsFlow() {
  Flow flow("word_stats", {.max_attempts = 3,
                           .base_delay = absl::Seconds(1),
                           .timeout = absl::Seconds(30)});
  flow.Step("split_documents",
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              return input.at("run").at("documents");
            })
      .Map("count_words", {.depends_on = {"split_documents"}},
           Typed<Document, WordCount>(CountWords))
      .Step("totals", {.depends_on = {"count_words"}},
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              int64_t words = 0;
              for (const Json& c : input.at("count_words").as_array()) {
                words += c.at("words").as_int64();
              }
              return boost::json::object{
                  {"documents", input.at("count_words").as_array().size()},
                  {"words", words}};
            })
      .Step("shout",
            {.depends_on = {"count_words"},
             .if_pattern = boost::json::object{{"run", {{"shout", true}}}}},
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              std::string titles;
              for (const Json& c : input.at("count_words").as_array()) {
                if (!titles.empty()) titles += ", ";
                titles += absl::AsciiStrToUpper(
                    std::string(c.at("title").as_string()));
              }
              return Json(titles);
            });
  return flow;
}

Json DemoInput() {
  return boost::json::object{
      {"shout", true},
      {"documents",
       boost::json::array{
           boost::json::object{{"title", "sluice"},
                               {"text",
                                "A sluice is a water channel controlled "
                                "at its head by a gate."}},
           boost::json::object{{"title", "queue"},
                               {"text",
                                "A queue holds work; a worker takes "
                                "work from the queue and does the work."}},
           boost::json::object{{"title", "flow"},
                               {"text",
                                "Steps flow into steps, and maps fan "
                                "out over arrays of items."}},
       }}};
}

}  // namespace sluice::demo
