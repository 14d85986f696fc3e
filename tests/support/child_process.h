// Helpers for tests that run sluice_test_worker (support/test_worker_main.cc)
// as real child processes.
#ifndef SLUICE_TESTS_SUPPORT_CHILD_PROCESS_H_
#define SLUICE_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace sluice::testing {

struct Child {
  pid_t pid = -1;
  int out = -1;  // the read end of the child's stdout
};

// Starts `program` with `args`, its stdout piped to the returned Child.
inline Child Spawn(const std::string& program, std::vector<std::string> args) {
  int out[2];
  EXPECT_EQ(pipe(out), 0);
  Child child;
  child.pid = fork();
  if (child.pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    std::vector<char*> argv;
    std::string path = program;
    argv.push_back(path.data());
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(path.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  child.out = out[0];
  return child;
}

// Reads one line from `fd`, waiting at most until `deadline`. False on
// timeout or end of file.
inline bool ReadLine(int fd, absl::Time deadline, std::string* line) {
  line->clear();
  while (true) {
    int wait_ms = static_cast<int>(std::max<int64_t>(
        0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) return false;
    char c;
    if (read(fd, &c, 1) != 1) return false;
    if (c == '\n') return true;
    line->push_back(c);
  }
}

// Waits until `done` holds, checking every few milliseconds; false on
// timeout. The state lives in other processes, so there is no signal to
// wait on.
inline bool AwaitCondition(const std::function<bool()>& done,
                           absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return done();
}

// Sends `signal` and reaps the child; returns its wait status.
inline int KillAndReap(Child& child, int signal) {
  kill(child.pid, signal);
  int status = 0;
  EXPECT_EQ(waitpid(child.pid, &status, 0), child.pid);
  close(child.out);
  child.pid = -1;
  return status;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_CHILD_PROCESS_H_
