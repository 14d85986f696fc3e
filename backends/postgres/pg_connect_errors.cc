#include "pg_connect_errors.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "pg_status.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {
namespace {

constexpr std::string_view kNotShown =
    " (the URL is not shown: it may hold a password)";

// libpq's message on one line: attempts and hints joined, no trailing
// newline, no "LOCATION:" lines (which verbose errors add).
std::string OneLine(std::string_view message) {
  std::string line;
  size_t start = 0;
  while (start < message.size()) {
    size_t end = std::min(message.find('\n', start), message.size());
    std::string_view part = message.substr(start, end - start);
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part[0]))) {
      part.remove_prefix(1);
    }
    if (!part.empty() && !part.starts_with("LOCATION:")) {
      if (!line.empty()) line += ' ';
      line += part;
    }
    start = end + 1;
  }
  return line;
}

bool IsSqlstate(std::string_view text) {
  return text.size() == 5 && std::all_of(text.begin(), text.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c)) ||
                  std::isupper(static_cast<unsigned char>(c));
         });
}

struct ServerError {
  std::string state;
  std::string message;  // the primary message, one line
};

// The last error the server sent while connecting. With verbose errors
// libpq writes it as "<severity>:  <SQLSTATE>: <message>"; the severity
// may be translated, the layout is not.
std::optional<ServerError> LastServerError(std::string_view text) {
  std::optional<ServerError> found;
  size_t at = text.find(":  ");
  while (at != std::string_view::npos) {
    std::string_view rest = text.substr(at + 3);
    if (rest.size() > 7 && IsSqlstate(rest.substr(0, 5)) &&
        rest.substr(5, 2) == ": ") {
      std::string_view message = rest.substr(7);
      message = message.substr(0, message.find('\n'));
      found = ServerError{std::string(rest.substr(0, 5)), std::string(message)};
    }
    at = text.find(":  ", at + 3);
  }
  return found;
}

// libpq's complaints about the URL's options, made before it tries any
// server (and so never about a network).
bool IsConfigurationError(std::string_view message) {
  return message.starts_with("invalid ") ||
         message.find("could not match ") != std::string_view::npos ||
         message.find("could not parse network address") !=
             std::string_view::npos ||
         message.find("is too long") != std::string_view::npos ||
         message.find("missing \"=\"") != std::string_view::npos ||
         message.find("unterminated quoted string") != std::string_view::npos;
}

bool IsOptionName(std::string_view text) {
  PQconninfoOption* defaults = PQconndefaults();
  if (defaults == nullptr) return false;
  bool found = false;
  for (PQconninfoOption* option = defaults; option->keyword != nullptr;
       ++option) {
    found = found || option->keyword == text;
  }
  PQconninfoFree(defaults);
  return found;
}

std::string_view HintFor(absl::StatusCode code, std::string_view state) {
  switch (code) {
    case absl::StatusCode::kPermissionDenied:
      return "; check the user and password in the URL, and the server's "
             "pg_hba.conf";
    case absl::StatusCode::kNotFound:
      return state == "3D000"
                 ? "; create the database, or fix its name in the URL"
                 : "";
    case absl::StatusCode::kInvalidArgument:
      return "; fix the URL's options";
    case absl::StatusCode::kUnavailable:
      return "; retry later";
    default:
      return "";
  }
}

// The code for what the server said while connecting. Data exceptions
// (class 22) and unknown parameters (class 42) come from settings the URL
// passed in `options`.
absl::StatusCode CodeForConnect(std::string_view state) {
  if (state.starts_with("22") || state.starts_with("42")) {
    return absl::StatusCode::kInvalidArgument;
  }
  return CodeForSqlstate(state);
}

// An '@' libpq would not read as the end of the user name and password:
// a second one before the host, or one after it in the path. libpq would
// take part of the password for a host or database name and could print
// it back in an error.
absl::Status CheckAtSigns(std::string_view url) {
  if (!url.starts_with("postgres://") && !url.starts_with("postgresql://")) {
    return absl::OkStatus();
  }
  const size_t authority = url.find("://") + 3;
  const size_t path = std::min(url.find_first_of("/?", authority), url.size());
  const size_t query = std::min(url.find('?', authority), url.size());
  const auto at_signs =
      std::count(url.begin() + authority, url.begin() + path, '@');
  const bool at_in_path =
      url.substr(path, query - path).find('@') != std::string_view::npos;
  if (at_signs > 1 || (at_signs == 0 && at_in_path)) {
    return absl::InvalidArgumentError(StrCat(
        "the postgres URL has an unescaped '@'", kNotShown,
        "; percent-encode '@', '/' and '?' in its user name, password and "
        "database name as %40, %2F and %3F"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string WithoutQuotedText(std::string_view message) {
  std::string cleaned;
  size_t start = 0;
  while (true) {
    const size_t open = message.find('"', start);
    const size_t close = open == std::string_view::npos
                             ? std::string_view::npos
                             : message.find('"', open + 1);
    if (close == std::string_view::npos) {
      // An unpaired quote: hide whatever follows it.
      cleaned += message.substr(start, open == std::string_view::npos
                                           ? std::string_view::npos
                                           : open - start + 1);
      if (open != std::string_view::npos) cleaned += "...";
      return cleaned;
    }
    std::string_view quoted = message.substr(open + 1, close - open - 1);
    cleaned += message.substr(start, open + 1 - start);
    const bool punctuation =
        quoted.size() == 1 &&
        !std::isalnum(static_cast<unsigned char>(quoted[0]));
    cleaned +=
        punctuation || IsOptionName(quoted) ? quoted : std::string_view("...");
    cleaned += '"';
    start = close + 1;
  }
}

absl::Status CheckConnectionUrl(const std::string& url) {
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(url.c_str(), &error);
  if (parsed == nullptr) {
    if (error == nullptr) {
      return absl::ResourceExhaustedError(
          "libpq ran out of memory parsing the postgres URL");
    }
    std::string reason = WithoutQuotedText(OneLine(error));
    PQfreemem(error);
    return absl::InvalidArgumentError(
        StrCat("the postgres URL is malformed: ", reason, kNotShown));
  }
  PQconninfoFree(parsed);
  return CheckAtSigns(url);
}

absl::Status ConnectFailure(PGconn* connection) {
  const std::string_view text = PQerrorMessage(connection);
  if (std::optional<ServerError> error = LastServerError(text)) {
    const absl::StatusCode code = CodeForConnect(error->state);
    return absl::Status(
        code, StrCat("postgres connect: ", error->message, " (SQLSTATE ",
                     error->state, ")", HintFor(code, error->state)));
  }
  if (PQconnectionNeedsPassword(connection)) {
    return absl::PermissionDeniedError(
        "postgres connect: the server asks for a password and the URL gives "
        "none; add one to the URL or to a password file");
  }
  const std::string message = OneLine(text);
  if (IsConfigurationError(message)) {
    return absl::InvalidArgumentError(
        StrCat("postgres connect: ", WithoutQuotedText(message),
               HintFor(absl::StatusCode::kInvalidArgument, "")));
  }
  return absl::UnavailableError(StrCat(
      "postgres connect: ", message.empty() ? "the connection failed" : message,
      HintFor(absl::StatusCode::kUnavailable, "")));
}

}  // namespace sluice::postgres_internal
