#include "sluice/redact_url.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <utility>
#include <vector>

namespace sluice {
namespace {

constexpr std::string_view kHidden = "***";
constexpr std::string_view kPasswordKey = "password";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// libpq decodes a URI query parameter's name before looking it up, so
// "pass%77ord" is a password too.
std::string PercentDecoded(std::string_view text) {
  std::string decoded;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
        HexValue(text[i + 2]) >= 0) {
      decoded +=
          static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
      i += 2;
    } else {
      decoded += text[i];
    }
  }
  return decoded;
}

// A range [begin, end) of a URL to hide.
struct Span {
  size_t begin;
  size_t end;
};

// "scheme://user:PASSWORD@host...": PASSWORD's span. The password runs from
// the first ':' to the LAST '@', so unescaped '@', '/' or '?' in it cannot
// cut it short; a ':' after an '@' belongs to a host, not a password.
void AddUserinfoPassword(std::string_view url, size_t authority,
                         std::vector<Span>& spans) {
  const size_t at = url.rfind('@');
  const size_t colon = url.find(':', authority);
  if (at == std::string_view::npos || at < authority ||
      colon == std::string_view::npos || colon > at ||
      url.substr(authority, colon - authority).find('@') !=
          std::string_view::npos) {
    return;
  }
  spans.push_back({colon + 1, at});
}

// The value of every "password=" query parameter after `from`.
void AddQueryPasswords(std::string_view url, size_t from,
                       std::vector<Span>& spans) {
  size_t start = url.find_first_of("?&", from);
  while (start != std::string_view::npos) {
    const size_t key = start + 1;
    const size_t end = std::min(url.find('&', key), url.size());
    const size_t equals = url.find('=', key);
    if (equals != std::string_view::npos && equals < end &&
        PercentDecoded(url.substr(key, equals - key)) == kPasswordKey) {
      spans.push_back({equals + 1, end});
    }
    // From the next separator of either kind: an '&' before the '?' (in a
    // malformed host) must not hide the query that follows.
    start = url.find_first_of("?&", key);
  }
}

// `url` with each run of touching or overlapping spans written as kHidden.
std::string Hide(std::string_view url, std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  std::string hidden;
  size_t copied = 0;
  for (size_t i = 0; i < spans.size();) {
    size_t end = spans[i].end;
    size_t j = i + 1;
    while (j < spans.size() && spans[j].begin <= end) {
      end = std::max(end, spans[j++].end);
    }
    hidden += url.substr(copied, spans[i].begin - copied);
    hidden += kHidden;
    copied = end;
    i = j;
  }
  hidden += url.substr(copied);
  return hidden;
}

// "postgresql", "sqlite+x": what may come before "://" in a URI.
bool IsScheme(std::string_view text) {
  if (text.empty() || !std::isalpha(static_cast<unsigned char>(text[0]))) {
    return false;
  }
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '.' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)); }

// "key=value key='quoted value'": hides password values. Past anything it
// cannot parse, it hides the rest of the string.
std::string RedactKeywordValues(std::string_view text) {
  std::string redacted;
  size_t i = 0;
  auto skip_spaces = [&] {
    while (i < text.size() && IsSpace(text[i])) redacted += text[i++];
  };
  while (true) {
    skip_spaces();
    if (i >= text.size()) return redacted;
    const size_t key_start = i;
    while (i < text.size() && text[i] != '=' && !IsSpace(text[i])) ++i;
    std::string_view key = text.substr(key_start, i - key_start);
    redacted += key;
    skip_spaces();
    if (i >= text.size() || text[i] != '=') {
      if (i < text.size()) redacted += kHidden;
      return redacted;
    }
    redacted += text[i++];
    skip_spaces();
    const size_t value_start = i;
    if (i < text.size() && text[i] == '\'') {
      ++i;
      while (i < text.size() && text[i] != '\'') {
        if (text[i] == '\\') ++i;
        ++i;
      }
      if (i >= text.size()) {  // unterminated quote: the rest is the value
        redacted += kHidden;
        return redacted;
      }
      ++i;
    } else {
      // As in libpq, a backslash escapes the next character, a space too.
      while (i < text.size() && !IsSpace(text[i])) {
        if (text[i] == '\\') ++i;
        ++i;
      }
      i = std::min(i, text.size());
    }
    std::string_view value = text.substr(value_start, i - value_start);
    if (key == kPasswordKey) {
      redacted += kHidden;
    } else if (key == "dbname") {  // may itself be a URI with a password
      const bool quoted = value.size() >= 2 && value.front() == '\'';
      if (quoted) value = value.substr(1, value.size() - 2);
      if (quoted) redacted += '\'';
      redacted += RedactUrl(value);
      if (quoted) redacted += '\'';
    } else {
      redacted += value;
    }
  }
}

}  // namespace

std::string RedactUrl(std::string_view url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end != std::string_view::npos &&
      IsScheme(url.substr(0, scheme_end))) {
    // Both readings are taken on the URL as written and their spans joined:
    // where they overlap (a query password holding the last '@'), hiding
    // one must not leave the rest of the other in view.
    const size_t authority = scheme_end + 3;
    std::vector<Span> spans;
    AddUserinfoPassword(url, authority, spans);
    AddQueryPasswords(url, authority, spans);
    return Hide(url, std::move(spans));
  }
  if (url.find('=') != std::string_view::npos) return RedactKeywordValues(url);
  return std::string(url);
}

}  // namespace sluice
