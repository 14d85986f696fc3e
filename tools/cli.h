// Shared parts of the `sluice` command-line program: its exit codes, how a
// command fails, opening the engine a command works on, and JSON output.
//
// Arguments are parsed by CLI11 (sluice_main.cc builds the command tree);
// each command file adds its subcommands with an Add...Commands function.
// docs/cli.md holds every command's --help text (checked by a test).
#ifndef SLUICE_TOOLS_CLI_H_
#define SLUICE_TOOLS_CLI_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sluice/backend.h"
#include "sluice/engine.h"
#include "sluice/json.h"

namespace sluice::cli {

// Exit codes of every command (also in docs/cli.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // the command failed (stderr says why)
inline constexpr int kExitUsage = 2;  // bad arguments (stderr says which)
// A check found a problem: `coverage` (a step has no live worker) and
// `check-schema` (the schema is missing parts or is not current).
inline constexpr int kExitCheckFailed = 3;
inline constexpr int kExitUnserved = kExitCheckFailed;

// The help text's URL line and the exit-code table, shared by all commands.
inline constexpr char kUrlHelp[] =
    "Backend URL: sqlite:PATH, postgres://... (or postgresql://...), memory:";
inline constexpr char kExitCodesHelp[] =
    "Exit codes: 0 ok, 1 error, 2 usage error, 3 a check found a problem "
    "(coverage: an unserved step; check-schema: schema not current).";

// Where a command stores its exit code; the main program returns it.
struct Outcome {
  int exit_code = kExitOk;
};

// Prints "sluice: <status>" on stderr, with every backend URL's password
// hidden; returns kExitError.
int Fail(const absl::Status& status);

// Remembers the command line's arguments: every one that holds a secret
// (RedactUrl changes it) is hidden wherever it appears in a message.
void RememberArguments(const std::vector<std::string>& args);
// `text` with every remembered secret argument replaced by RedactUrl of it.
std::string RedactSecrets(std::string_view text);

// Adds the positional URL every backend command takes.
CLI::Option* AddUrl(CLI::App& command, std::string& url);
// Checks that a RUN argument is a run id (a usage error otherwise).
CLI::Validator RunIdValidator();
// Checks that an argument is a positive age (ParseAge).
CLI::Validator AgeValidator();

// Adds --json.
CLI::Option* AddJsonFlag(CLI::App& command, bool& json);

// Rewrites `--backend URL` and `--backend=URL` (the older form) into the
// positional URL right after the subcommand, so both spellings work.
std::vector<std::string> NormalizeBackendOption(int argc, char** argv);

// An engine with the backend it runs on (the backend outlives it).
struct Session {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Engine> engine;
};
absl::StatusOr<Session> OpenSession(const std::string& url);

// Output helpers.
std::string UtcTime(absl::Time t);                  // "2026-01-02 03:04:05"
Json TimeJson(absl::Time t);                        // RFC 3339 string
Json TimeJson(const std::optional<absl::Time>& t);  // or null
void PrintJson(const Json& value);  // pretty enough: one line, then "\n"
// "3s", "5m", "2h", "4d" (whole units, rounded down).
std::string ShortAge(absl::Duration age);

// Parses "30d", "12h", "90m", "2w", "1h30m": a positive duration.
absl::StatusOr<absl::Duration> ParseAge(std::string_view text);

// The command groups (one file each).
void AddDemoCommand(CLI::App& app, Outcome& outcome);
void AddDashboardCommand(CLI::App& app, Outcome& outcome);
void AddRunCommands(CLI::App& app, Outcome& outcome);  // runs, show, start
void AddRunActionCommands(CLI::App& app,
                          Outcome& outcome);  // cancel, retry, delete
void AddStatusCommand(CLI::App& app, Outcome& outcome);
void AddPruneCommand(CLI::App& app, Outcome& outcome);
void AddSchemaCommands(CLI::App& app, Outcome& outcome);
void AddVersionCommands(CLI::App& app, Outcome& outcome);

}  // namespace sluice::cli

#endif  // SLUICE_TOOLS_CLI_H_
