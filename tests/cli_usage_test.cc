// The `sluice` program's argument handling, run as a real process: --help
// on every command, usage errors (exit 2 with a message naming the
// problem), both spellings of the backend URL, and that no message ever
// shows a URL's password.
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/cli_runner.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<std::string> kCommands = {
    "status",   "runs",     "show",     "start",   "cancel",
    "retry",    "delete",   "prune",    "migrate", "check-schema",
    "versions", "activate", "coverage", "demo"};

// A scratch SQLite URL, removed with the test.
class ScratchStore {
 public:
  ScratchStore() {
    char dir[] = "/tmp/sluice-cli-usage-XXXXXX";
    EXPECT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  ~ScratchStore() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string url() const { return "sqlite:" + dir_ + "/store.db"; }

 private:
  std::string dir_;
};

TEST(CliUsageTest, Help_ListsEveryCommandAndTheExitCodes) {
  CliResult r = RunCli({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const std::string& command : kCommands) {
    EXPECT_THAT(r.out, HasSubstr("  " + command + " ")) << command;
  }
  EXPECT_THAT(r.out, HasSubstr("Exit codes: 0 ok, 1 error, 2 usage error"));
}

TEST(CliUsageTest, EachCommandsHelp_ExitsZeroAndShowsItsUsage) {
  for (const std::string& command : kCommands) {
    CliResult r = RunCli({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.output;
    EXPECT_THAT(r.out, HasSubstr("Usage: sluice " + command)) << command;
    EXPECT_THAT(r.err, ::testing::IsEmpty()) << command;
  }
}

TEST(CliUsageTest, NoCommand_IsAUsageError) {
  CliResult r = RunCli({});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.err, HasSubstr("subcommand is required"));
  EXPECT_THAT(r.err, HasSubstr("sluice --help"));
}

TEST(CliUsageTest, UnknownCommand_IsAUsageErrorNamingIt) {
  CliResult r = RunCli({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.err, HasSubstr("frobnicate"));
}

TEST(CliUsageTest, MissingUrl_IsAUsageError) {
  CliResult r = RunCli({"status"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.err, HasSubstr("URL is required"));
}

TEST(CliUsageTest, UnknownOptionAndExtraArgument_AreUsageErrors) {
  ScratchStore store;
  CliResult r = RunCli({"runs", store.url(), "--colour"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.err, HasSubstr("--colour"));
  r = RunCli({"status", store.url(), "extra"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.err, HasSubstr("extra"));
  r = RunCli({"runs", store.url(), "--limit", "0"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.err, HasSubstr("--limit"));
}

TEST(CliUsageTest, BackendOption_IsTheSameAsThePositionalUrl) {
  ScratchStore store;
  for (std::vector<std::string> args :
       {std::vector<std::string>{"runs", store.url(), "--json"},
        std::vector<std::string>{"runs", "--backend", store.url(), "--json"},
        std::vector<std::string>{"runs", "--json",
                                 "--backend=" + store.url()}}) {
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    boost::json::value json = ParseCliJson(r);
    ASSERT_TRUE(json.is_object()) << r.out;
    EXPECT_TRUE(json.at("runs").as_array().empty());
  }
}

TEST(CliUsageTest, UnknownUrlScheme_ExitsOneNamingTheForms) {
  CliResult r = RunCli({"status", "mysql://db/app"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.err, HasSubstr("sqlite:"));
}

// Port 1 on loopback refuses at once: the connection fails fast.
constexpr char kSecretUrl[] =
    "postgresql://admin:Sup3rS3cretPw@127.0.0.1:1/app?connect_timeout=2";

TEST(CliUsageTest, UnreachablePostgres_FailsWithoutPrintingThePassword) {
  for (std::string command :
       {"status", "runs", "migrate", "check-schema", "prune"}) {
    std::vector<std::string> args = {command, kSecretUrl};
    if (command == "prune") args = {command, kSecretUrl, "--older-than", "1d"};
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 1) << command << ": " << r.output;
    EXPECT_THAT(r.output, Not(HasSubstr("Sup3rS3cretPw"))) << command;
    EXPECT_THAT(r.err, HasSubstr("sluice: ")) << command;
  }
}

TEST(CliUsageTest, UsageErrorsWithAUrl_NeverPrintThePassword) {
  // The URL where a command belongs, an extra argument after it, and a
  // secret in an option CLI11 then complains about.
  for (std::vector<std::string> args :
       {std::vector<std::string>{kSecretUrl},
        std::vector<std::string>{"status", kSecretUrl, kSecretUrl},
        std::vector<std::string>{"runs", kSecretUrl, "--limit", kSecretUrl},
        std::vector<std::string>{"show", kSecretUrl, kSecretUrl}}) {
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, Not(HasSubstr("Sup3rS3cretPw"))) << r.output;
    EXPECT_THAT(r.err, HasSubstr("sluice: "));
  }
}

}  // namespace
}  // namespace sluice::testing
