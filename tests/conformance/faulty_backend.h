// A backend wrapper whose faults a test switches while workers run: it can
// refuse to store a given task output (as Postgres refuses a value it can't
// store) and it can fail every call with kUnavailable (as a database that is
// down does). Safe for concurrent use.
#ifndef SLUICE_TESTS_CONFORMANCE_FAULTY_BACKEND_H_
#define SLUICE_TESTS_CONFORMANCE_FAULTY_BACKEND_H_

#include <memory>
#include <optional>
#include <string_view>

#include "absl/synchronization/mutex.h"
#include "sluice/forwarding_backend.h"
#include "sluice/json.h"

namespace sluice::testing {

class FaultyBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  // UpdateTasks fails with kInvalidArgument when it would store `output`.
  void RefuseOutput(Json output) {
    absl::MutexLock lock(&mu_);
    refused_output_ = std::move(output);
  }
  // While on, Begin() and every transaction call fail with kUnavailable.
  void SetUnavailable(bool on) {
    absl::MutexLock lock(&mu_);
    unavailable_ = on;
  }
  // Waits until `count` calls have been failed in all; false on timeout.
  bool AwaitFailures(int count, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return failures_ >= count;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }

 protected:
  absl::Status BeforeBegin() override { return CheckAvailable("Begin"); }

  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    class Faulty : public ForwardingTransaction {
     public:
      Faulty(std::unique_ptr<Transaction> t, FaultyBackend* owner)
          : ForwardingTransaction(std::move(t)), owner_(owner) {}

      absl::StatusOr<std::vector<bool>> UpdateTasks(
          std::span<TaskUpdate> updates) override {
        for (const TaskUpdate& u : updates) {
          if (u.task.output && owner_->Refuses(*u.task.output)) {
            return absl::InvalidArgumentError(
                "injected: the backend cannot store this output");
          }
        }
        return ForwardingTransaction::UpdateTasks(updates);
      }

     protected:
      absl::Status BeforeCall(std::string_view method) override {
        return owner_->CheckAvailable(method);
      }

     private:
      FaultyBackend* owner_;
    };
    return std::make_unique<Faulty>(std::move(tx), this);
  }

 private:
  absl::Status CheckAvailable(std::string_view method) {
    absl::MutexLock lock(&mu_);
    if (!unavailable_) return absl::OkStatus();
    ++failures_;
    return absl::UnavailableError(
        absl::StrCat("injected: the backend is down (",
                     absl::string_view(method.data(), method.size()), ")"));
  }
  bool Refuses(const Json& output) {
    absl::MutexLock lock(&mu_);
    if (!refused_output_ || output != *refused_output_) return false;
    ++failures_;
    return true;
  }

  absl::Mutex mu_;
  std::optional<Json> refused_output_ ABSL_GUARDED_BY(mu_);
  bool unavailable_ ABSL_GUARDED_BY(mu_) = false;
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CONFORMANCE_FAULTY_BACKEND_H_
