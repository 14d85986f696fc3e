#include "sluice/redact_url.h"

#include <algorithm>
#include <cctype>
#include <cstddef>

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

// "scheme://user:PASSWORD@host...": hides PASSWORD. The password runs from
// the first ':' to the LAST '@', so unescaped '@', '/' or '?' in it cannot
// cut it short; a ':' after an '@' belongs to a host, not a password.
std::string RedactUserinfo(std::string_view url, size_t authority) {
  const size_t at = url.rfind('@');
  const size_t colon = url.find(':', authority);
  if (at == std::string_view::npos || at < authority ||
      colon == std::string_view::npos || colon > at ||
      url.substr(authority, colon - authority).find('@') !=
          std::string_view::npos) {
    return std::string(url);
  }
  std::string redacted(url.substr(0, colon + 1));
  redacted += kHidden;
  redacted += url.substr(at);
  return redacted;
}

// Hides the value of every "password=" query parameter after `from`.
std::string RedactQueryPasswords(std::string url, size_t from) {
  size_t start = url.find_first_of("?&", from);
  while (start != std::string::npos) {
    const size_t key = start + 1;
    const size_t end = std::min(url.find('&', key), url.size());
    const size_t equals = url.find('=', key);
    if (equals != std::string::npos && equals < end &&
        PercentDecoded(std::string_view(url).substr(key, equals - key)) ==
            kPasswordKey) {
      url.replace(equals + 1, end - equals - 1, kHidden);
    }
    // From the next separator of either kind: an '&' before the '?' (in a
    // malformed host) must not hide the query that follows.
    start = url.find_first_of("?&", key);
  }
  return url;
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
    const size_t authority = scheme_end + 3;
    return RedactQueryPasswords(RedactUserinfo(url, authority), authority);
  }
  if (url.find('=') != std::string_view::npos) return RedactKeywordValues(url);
  return std::string(url);
}

}  // namespace sluice
