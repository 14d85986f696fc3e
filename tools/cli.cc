// Shared parts of the `sluice` command-line program.
#include "cli.h"

#include <cstdio>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "boost/json/serialize.hpp"
#include "sluice/backends.h"
#include "sluice/internal/strings.h"
#include "sluice/redact_url.h"

namespace sluice::cli {
namespace {

// (argument, its redacted form) for each argument that holds a secret.
std::vector<std::pair<std::string, std::string>>& SecretArguments() {
  static auto* secrets = new std::vector<std::pair<std::string, std::string>>;
  return *secrets;
}

}  // namespace

void RememberArguments(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    std::string redacted = RedactUrl(arg);
    if (redacted == arg) continue;
    SecretArguments().emplace_back(arg, redacted);
    // The secret alone (what differs between the two), for messages that
    // quote only part of the argument.
    size_t prefix = 0;
    while (prefix < arg.size() && prefix < redacted.size() &&
           arg[prefix] == redacted[prefix]) {
      ++prefix;
    }
    size_t suffix = 0;
    while (suffix < arg.size() - prefix && suffix < redacted.size() - prefix &&
           arg[arg.size() - 1 - suffix] ==
               redacted[redacted.size() - 1 - suffix]) {
      ++suffix;
    }
    std::string secret = arg.substr(prefix, arg.size() - prefix - suffix);
    if (secret.size() >= 3) SecretArguments().emplace_back(secret, "***");
  }
}

std::string RedactSecrets(std::string_view text) {
  std::string out(text);
  for (const auto& [secret, redacted] : SecretArguments()) {
    out = absl::StrReplaceAll(out, {{secret, redacted}});
  }
  return out;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "sluice: %s\n",
               RedactSecrets(status.ToString()).c_str());
  return kExitError;
}

CLI::Option* AddUrl(CLI::App& command, std::string& url) {
  return command.add_option("URL", url, kUrlHelp)->required();
}

CLI::Validator RunIdValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::StatusOr<RunId> id = RunId::Parse(text);
        return id.ok() ? "" : std::string(id.status().message());
      },
      "RUN_ID");
}

CLI::Validator AgeValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::StatusOr<absl::Duration> age = ParseAge(text);
        return age.ok() ? "" : std::string(age.status().message());
      },
      "AGE");
}

CLI::Option* AddJsonFlag(CLI::App& command, bool& json) {
  return command.add_flag("--json", json, "print JSON instead of text");
}

std::vector<std::string> NormalizeBackendOption(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() < 3 || args[1].starts_with("-")) return args;
  for (size_t i = 2; i < args.size(); ++i) {
    std::string url;
    if (args[i] == "--backend" && i + 1 < args.size()) {
      url = args[i + 1];
      args.erase(args.begin() + i, args.begin() + i + 2);
    } else if (args[i].starts_with("--backend=")) {
      url = args[i].substr(std::string_view("--backend=").size());
      args.erase(args.begin() + i);
    } else if (args[i] == "--") {
      break;  // everything after is positional
    } else {
      continue;
    }
    args.insert(args.begin() + 2, std::move(url));
    break;
  }
  return args;
}

absl::StatusOr<Session> OpenSession(const std::string& url) {
  Session session;
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url);
  if (!backend.ok()) return backend.status();
  session.backend = std::move(*backend);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(*session.backend);
  if (!engine.ok()) return engine.status();
  session.engine = std::move(*engine);
  return session;
}

std::string UtcTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", t, absl::UTCTimeZone());
}

Json TimeJson(absl::Time t) {
  return Json(absl::FormatTime(absl::RFC3339_full, t, absl::UTCTimeZone()));
}

Json TimeJson(const std::optional<absl::Time>& t) {
  return t ? TimeJson(*t) : Json(nullptr);
}

void PrintJson(const Json& value) {
  std::printf("%s\n", boost::json::serialize(value).c_str());
}

std::string ShortAge(absl::Duration age) {
  if (age < absl::ZeroDuration()) age = absl::ZeroDuration();
  int64_t seconds = absl::ToInt64Seconds(age);
  if (seconds < 120) return StrCat(seconds, "s");
  if (seconds < 2 * 3600) return StrCat(seconds / 60, "m");
  if (seconds < 2 * 86400) return StrCat(seconds / 3600, "h");
  return StrCat(seconds / 86400, "d");
}

absl::StatusOr<absl::Duration> ParseAge(std::string_view text) {
  absl::Duration age;
  bool parsed = false;
  if (!text.empty() && (text.back() == 'd' || text.back() == 'w')) {
    int64_t count = 0;
    if (absl::SimpleAtoi(ToAbsl(text.substr(0, text.size() - 1)), &count) &&
        count > 0 && count < 100'000) {
      age = absl::Hours(24) * count * (text.back() == 'w' ? 7 : 1);
      parsed = true;
    }
  } else {
    parsed = absl::ParseDuration(ToAbsl(text), &age);
  }
  if (!parsed || age <= absl::ZeroDuration() ||
      age == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        StrCat("\"", text,
               "\" is not a positive age (e.g. 30d, 2w, 12h, 90m, 1h30m)"));
  }
  return age;
}

}  // namespace sluice::cli
