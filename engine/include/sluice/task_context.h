// What a handler learns about the task it runs.
#ifndef SLUICE_TASK_CONTEXT_H_
#define SLUICE_TASK_CONTEXT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "sluice/ids.h"
#include "sluice/native_connection.h"

namespace sluice {

enum class LogLevel { kInfo, kWarning, kError };

// Receives log lines. Never given message bodies or credentials.
using LogSink = std::function<void(LogLevel, std::string_view)>;

// Set once when the task should stop: its deadline passed, its run ended, or
// the worker is shutting down. Safe for concurrent use.
class CancelToken {
 public:
  bool cancelled() const { return flag_->load(std::memory_order_acquire); }
  void Cancel() const { flag_->store(true, std::memory_order_release); }

 private:
  std::shared_ptr<std::atomic<bool>> flag_ =
      std::make_shared<std::atomic<bool>>(false);
};

class TaskContext {
 public:
  struct Info {
    RunId run_id;
    std::string flow_slug;
    std::string step_slug;
    int task_index = 0;
    int attempt = 1;  // 1 for the first attempt
    int max_attempts = 1;
    absl::Time deadline;  // claim time plus the step's effective timeout
    // The run's W3C traceparent (EnqueueOptions::traceparent); "" if none.
    std::string traceparent;
  };

  TaskContext(Info info, CancelToken cancel, LogSink log = nullptr)
      : info_(std::move(info)),
        cancel_(std::move(cancel)),
        log_(std::move(log)) {}

  const RunId& run_id() const { return info_.run_id; }
  const std::string& flow_slug() const { return info_.flow_slug; }
  const std::string& step_slug() const { return info_.step_slug; }
  int task_index() const { return info_.task_index; }
  int attempt() const { return info_.attempt; }
  int max_attempts() const { return info_.max_attempts; }
  absl::Time deadline() const { return info_.deadline; }
  // The run's W3C traceparent, to continue its trace; "" if none.
  const std::string& traceparent() const { return info_.traceparent; }
  const CancelToken& cancel_token() const { return cancel_; }
  bool cancelled() const { return cancel_.cancelled(); }

  // Logs `message`, prefixed with the flow, step, task and attempt.
  void Log(LogLevel level, std::string_view message) const;

  // Registers the handler's own write, run inside the transaction that
  // records this attempt's completion, on the backend's connection (see
  // sluice/native_connection.h): the write and the completion commit
  // together or not at all. It runs only if the handler returns an output
  // that completes the task and the attempt still owns the task; a fenced
  // (stale) attempt, a failure, or a failed completion transaction leaves
  // no trace of it. If the write itself fails, its transaction is rolled
  // back and the attempt fails with the write's status (retried as any
  // failure). A later call replaces an earlier one. The worker may run the
  // write more than once (a completion retried after a transient error),
  // each time in a new transaction of which at most one commits.
  void WriteOnCompletion(NativeWrite write) const {
    completion_write_ = std::move(write);
  }
  // The registered write, taken (the worker hands it to FinishTasks).
  NativeWrite TakeCompletionWrite() const {
    return std::move(completion_write_);
  }

 private:
  Info info_;
  CancelToken cancel_;
  LogSink log_;
  // Set by the handler through a const context; read once it returned.
  mutable NativeWrite completion_write_;
};

}  // namespace sluice

#endif  // SLUICE_TASK_CONTEXT_H_
