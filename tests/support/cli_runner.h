// Runs the `sluice` program (the path in the SLUICE_CLI macro) as a child
// process and collects what it printed and its exit code.
#ifndef SLUICE_TESTS_SUPPORT_CLI_RUNNER_H_
#define SLUICE_TESTS_SUPPORT_CLI_RUNNER_H_

#include <fcntl.h>
#include <pty.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "boost/json/parse.hpp"
#include "boost/json/value.hpp"
#include "gtest/gtest.h"

namespace sluice::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;     // stdout
  std::string err;     // stderr
  std::string output;  // stdout, then stderr
};

namespace cli_internal {

inline std::string ReadFileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void ExecCli(std::vector<std::string>& args) {
  std::string program = SLUICE_CLI;
  std::vector<char*> argv = {program.data()};
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(program.c_str(), argv.data());
  _exit(127);
}

inline int WaitExitCode(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace cli_internal

// Runs sluice with `args`, its stdout and stderr in scratch files (so
// neither can fill a pipe), and waits for it.
inline CliResult RunCli(std::vector<std::string> args) {
  char dir[] = "/tmp/sluice-cli-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  const std::string out_path = std::string(dir) + "/out";
  const std::string err_path = std::string(dir) + "/err";
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    cli_internal::ExecCli(args);
  }
  CliResult result;
  result.exit_code = cli_internal::WaitExitCode(pid);
  result.out = cli_internal::ReadFileText(out_path);
  result.err = cli_internal::ReadFileText(err_path);
  result.output = result.out + result.err;
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  rmdir(dir);
  return result;
}

// Runs sluice with its stdout and stderr on a pseudo-terminal, as an
// operator's shell would; `output` holds what the terminal received.
inline CliResult RunCliOnTerminal(std::vector<std::string> args) {
  int terminal = -1;
  pid_t pid = forkpty(&terminal, nullptr, nullptr, nullptr);
  EXPECT_GE(pid, 0);
  if (pid == 0) cli_internal::ExecCli(args);
  CliResult result;
  char buffer[4096];
  // read() fails with EIO once the child closed its side: the end.
  for (ssize_t n; (n = read(terminal, buffer, sizeof(buffer))) > 0;) {
    result.output.append(buffer, n);
  }
  close(terminal);
  result.exit_code = cli_internal::WaitExitCode(pid);
  result.out = result.output;
  return result;
}

// The line of `text` that contains `part`, or "".
inline std::string LineWith(const std::string& text, const std::string& part) {
  size_t at = text.find(part);
  if (at == std::string::npos) return "";
  size_t begin = text.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  size_t end = text.find('\n', at);
  return text.substr(begin, end == std::string::npos ? end : end - begin);
}

// Parses a command's --json output (one JSON document); fails the test and
// returns null if it does not parse.
inline boost::json::value ParseCliJson(const CliResult& result) {
  boost::system::error_code error;
  boost::json::value value = boost::json::parse(result.out, error);
  EXPECT_FALSE(error) << "not JSON: " << result.out << result.err;
  return value;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_CLI_RUNNER_H_
