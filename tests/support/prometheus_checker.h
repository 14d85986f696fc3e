// A small reader of the Prometheus text format 0.0.4 for tests: parses the
// text back and checks what a scraper relies on, so a test fails on text a
// Prometheus server would reject or misread.
#ifndef SLUICE_TESTS_SUPPORT_PROMETHEUS_CHECKER_H_
#define SLUICE_TESTS_SUPPORT_PROMETHEUS_CHECKER_H_

#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace sluice::testing {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped values
  double value = 0;
};

struct PromText {
  std::map<std::string, std::string> types;  // family -> type
  std::vector<PromSample> samples;
  std::vector<std::string> problems;  // empty: well-formed

  // The value of the sample `name` with exactly these labels.
  std::optional<double> Value(
      const std::string& name,
      const std::map<std::string, std::string>& labels = {}) const {
    for (const PromSample& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::nullopt;
  }
};

namespace prom_internal {

inline bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         c == ':';
}
inline bool IsNameChar(char c) {
  return IsNameStart(c) || (c >= '0' && c <= '9');
}

// Reads a metric or label name at `pos`; empty if none.
inline std::string ReadName(const std::string& line, size_t& pos) {
  size_t start = pos;
  if (pos < line.size() && IsNameStart(line[pos])) {
    ++pos;
    while (pos < line.size() && IsNameChar(line[pos])) ++pos;
  }
  return line.substr(start, pos - start);
}

inline std::optional<double> ParseValue(const std::string& text) {
  if (text == "+Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  if (text == "NaN") return NAN;
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

// Parses `name{l="v",...} value`; an error text if malformed.
inline std::string ParseSample(const std::string& line, PromSample& out) {
  size_t pos = 0;
  out.name = ReadName(line, pos);
  if (out.name.empty()) return "no metric name";
  if (pos < line.size() && line[pos] == '{') {
    ++pos;
    while (pos < line.size() && line[pos] != '}') {
      std::string label = ReadName(line, pos);
      if (label.empty()) return "bad label name";
      if (line.compare(pos, 2, "=\"") != 0) return "label without =\"";
      pos += 2;
      std::string value;
      while (pos < line.size() && line[pos] != '"') {
        if (line[pos] == '\\') {
          if (++pos >= line.size()) return "dangling escape";
          char e = line[pos];
          if (e == 'n') {
            value.push_back('\n');
          } else if (e == '\\' || e == '"') {
            value.push_back(e);
          } else {
            return "bad escape in a label value";
          }
        } else {
          value.push_back(line[pos]);
        }
        ++pos;
      }
      if (pos >= line.size()) return "unterminated label value";
      ++pos;  // the closing quote
      if (out.labels.contains(label)) return "repeated label " + label;
      out.labels[label] = value;
      if (pos < line.size() && line[pos] == ',') ++pos;
    }
    if (pos >= line.size()) return "unterminated label set";
    ++pos;  // '}'
  }
  if (pos >= line.size() || line[pos] != ' ') return "no space before value";
  std::optional<double> value = ParseValue(line.substr(pos + 1));
  if (!value) return "bad value";
  out.value = *value;
  return "";
}

// The family a sample belongs to (a histogram's suffixes removed).
inline std::string FamilyOf(const std::string& name,
                            const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    std::string s = suffix;
    if (name.size() > s.size() &&
        name.compare(name.size() - s.size(), s.size(), s) == 0) {
      std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

inline void CheckHistograms(PromText& text) {
  // Per series (family and labels without le): buckets in order.
  std::map<std::string, std::vector<std::pair<double, double>>> buckets;
  std::map<std::string, double> counts;
  for (const PromSample& s : text.samples) {
    std::string family = FamilyOf(s.name, text.types);
    if (text.types[family] != "histogram") continue;
    std::map<std::string, std::string> labels = s.labels;
    std::string le = labels["le"];
    labels.erase("le");
    std::ostringstream key;
    key << family;
    for (const auto& [k, v] : labels) key << "|" << k << "=" << v;
    if (s.name == family + "_bucket") {
      std::optional<double> bound = ParseValue(le);
      if (!bound) {
        text.problems.push_back(s.name + ": bucket without a numeric le");
        continue;
      }
      buckets[key.str()].emplace_back(*bound, s.value);
    } else if (s.name == family + "_count") {
      counts[key.str()] = s.value;
    }
  }
  for (const auto& [series, list] : buckets) {
    for (size_t i = 1; i < list.size(); ++i) {
      if (list[i].first <= list[i - 1].first) {
        text.problems.push_back(series + ": le bounds not ascending");
      }
      if (list[i].second < list[i - 1].second) {
        text.problems.push_back(series + ": buckets not cumulative");
      }
    }
    if (list.empty() || !std::isinf(list.back().first)) {
      text.problems.push_back(series + ": last bucket is not +Inf");
    } else if (!counts.contains(series)) {
      text.problems.push_back(series + ": no _count");
    } else if (counts[series] != list.back().second) {
      text.problems.push_back(series + ": _count differs from the +Inf bucket");
    }
  }
}

}  // namespace prom_internal

// Parses `text`; PromText::problems lists every rule broken.
inline PromText ParsePrometheusText(const std::string& text) {
  using namespace prom_internal;
  PromText out;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  if (!text.empty() && text.back() != '\n') {
    out.problems.push_back("text does not end with a line feed");
  }
  while (std::getline(in, line)) {
    ++number;
    std::string where = "line " + std::to_string(number) + ": ";
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0 || line.rfind("# HELP ", 0) == 0) {
      size_t pos = 7;
      std::string name = ReadName(line, pos);
      if (name.empty() || pos >= line.size() || line[pos] != ' ') {
        out.problems.push_back(where + "malformed " + line.substr(0, 6));
        continue;
      }
      if (line[2] == 'T') {
        std::string type = line.substr(pos + 1);
        if (type != "counter" && type != "gauge" && type != "histogram" &&
            type != "summary" && type != "untyped") {
          out.problems.push_back(where + "unknown type " + type);
        }
        if (out.types.contains(name)) {
          out.problems.push_back(where + "second TYPE for " + name);
        }
        out.types[name] = type;
      }
      continue;
    }
    if (line[0] == '#') continue;  // a comment
    PromSample sample;
    if (std::string problem = ParseSample(line, sample); !problem.empty()) {
      out.problems.push_back(where + problem + ": " + line);
      continue;
    }
    std::string family = FamilyOf(sample.name, out.types);
    if (!out.types.contains(family)) {
      out.problems.push_back(where + "no TYPE before " + sample.name);
    }
    out.samples.push_back(std::move(sample));
  }
  CheckHistograms(out);
  return out;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_PROMETHEUS_CHECKER_H_
