// The `sluice` command-line program: operators' commands on a Sluice store
// (docs/cli.md lists every command with its --help text).
//
//   sluice status URL                 queues, their counts and workers
//   sluice runs URL [--flow F] [--status S] [--limit N] [--json]
//   sluice show URL RUN               steps, tasks and attempts of a run
//   sluice cancel|retry|delete URL RUN
//   sluice prune URL --older-than 30d
//   sluice migrate|check-schema URL
//   sluice demo, start, versions, activate, coverage
//   sluice dashboard [URL] [--port P] [--token T]   the web dashboard, demo
//
// Exit codes: cli.h. Arguments are parsed by CLI11.
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli.h"
#include "sluice/version.h"

namespace sluice::cli {
namespace {

constexpr char kDescription[] =
    "Sluice: durable workflows and jobs. Operate a Sluice store: inspect "
    "queues and runs, cancel, retry, delete and prune runs, migrate schemas.";

// Builds the command tree; each subcommand's callback sets `outcome`.
void BuildApp(CLI::App& app, Outcome& outcome) {
  app.require_subcommand(1);
  app.set_version_flag("--version", SLUICE_VERSION,
                       "Print the version of Sluice and exit");
  app.footer(std::string(kUrlHelp) +
             ". Every command that takes URL also accepts --backend URL.\n" +
             kExitCodesHelp);
  AddStatusCommand(app, outcome);
  AddRunCommands(app, outcome);
  AddRunActionCommands(app, outcome);
  AddPruneCommand(app, outcome);
  AddSchemaCommands(app, outcome);
  AddVersionCommands(app, outcome);
  AddDemoCommand(app, outcome);
  AddDashboardCommand(app, outcome);
}

}  // namespace
}  // namespace sluice::cli

int main(int argc, char** argv) {
  using namespace sluice::cli;
  std::vector<std::string> args = NormalizeBackendOption(argc, argv);
  RememberArguments(args);
  CLI::App app(kDescription, "sluice");
  Outcome outcome;
  BuildApp(app, outcome);
  if (args.size() > 1 && !args[1].starts_with("-")) {
    try {
      app.get_subcommand(args[1]);
    } catch (const CLI::OptionNotFound&) {
      std::fprintf(stderr,
                   "sluice: unknown command \"%s\"\nRun `sluice --help` for "
                   "the commands.\n",
                   RedactSecrets(args[1]).c_str());
      return kExitUsage;
    }
  }
  try {
    // CLI11 takes the arguments in reverse order, without the program name.
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr,
                 "sluice: %s\nRun `sluice --help` for the commands, "
                 "`sluice COMMAND --help` for one command.\n",
                 RedactSecrets(e.what()).c_str());
    return kExitUsage;
  }
  return outcome.exit_code;
}
