// Shared parts of the `sluice` command-line program: its arguments, how a
// command fails, and opening the engine a command works on.
//
// Exit codes of every command: 0 success, 1 an error (printed on stderr),
// 2 a usage error. `sluice coverage` exits 3 when a step of an active
// version has no live worker.
#ifndef SLUICE_TOOLS_CLI_H_
#define SLUICE_TOOLS_CLI_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/backend.h"
#include "sluice/engine.h"

namespace sluice::cli {

inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnserved = 3;

// `sluice COMMAND [--name value]... [POSITIONAL]...`
struct Args {
  std::string command;
  std::map<std::string, std::string> options;
  std::vector<std::string> positional;

  // The value of --name, or `fallback`.
  std::string Option(const std::string& name,
                     const std::string& fallback = "") const;
};

absl::StatusOr<Args> ParseArgs(int argc, char** argv);

// Prints "sluice: <status>" on stderr; returns kExitError.
int Fail(const absl::Status& status);

// Opens the backend named by --backend, or `fallback` if not given.
absl::StatusOr<std::unique_ptr<Backend>> BackendFrom(const Args& args,
                                                     std::string fallback);

// An engine with the backend it runs on (the backend outlives it).
struct Session {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Engine> engine;
};
absl::StatusOr<Session> OpenSession(const Args& args);

// Versions, activation and coverage (version_commands.cc).
int VersionsCommand(const Args& args);
int ActivateCommand(const Args& args);
int CoverageCommand(const Args& args);

}  // namespace sluice::cli

#endif  // SLUICE_TOOLS_CLI_H_
