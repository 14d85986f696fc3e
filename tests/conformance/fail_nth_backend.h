// A backend that fails one chosen call, for fault-injection sweeps: run a
// script once per call it makes, failing that call, and check the outcome.
// A transaction that fails every call of one method, and a backend that
// counts the calls of one.
#ifndef SLUICE_TESTS_CONFORMANCE_FAIL_NTH_BACKEND_H_
#define SLUICE_TESTS_CONFORMANCE_FAIL_NTH_BACKEND_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "sluice/forwarding_backend.h"

namespace sluice::testing {

// A transaction that reports each call to `owner->Count(method)` first,
// and fails it with what that returns.
template <typename Owner>
class CountedTransaction : public ForwardingTransaction {
 public:
  CountedTransaction(std::unique_ptr<Transaction> tx, Owner* owner)
      : ForwardingTransaction(std::move(tx)), owner_(owner) {}

 protected:
  absl::Status BeforeCall(std::string_view method) override {
    return owner_->Count(method);
  }

 private:
  Owner* owner_;
};

// Counts the calls of one transaction method.
class CountsMethod : public ForwardingBackend {
 public:
  CountsMethod(Backend& target, std::string method)
      : ForwardingBackend(target), method_(std::move(method)) {}

  int calls() const { return calls_; }
  absl::Status Count(std::string_view method) {
    if (method == method_) ++calls_;
    return absl::OkStatus();
  }

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    return std::make_unique<CountedTransaction<CountsMethod>>(std::move(tx),
                                                              this);
  }

 private:
  const std::string method_;
  int calls_ = 0;
};

// Begin and every transaction call count; the chosen one returns
// kUnavailable ("injected failure at call N (Method)") without reaching the
// real backend.
class FailNthCall : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  // Fails call number `n`, counting from the first call ever made.
  void FailAt(int n) {
    fail_at_ = n;
    failed_ = false;
  }
  // Fails the `n`-th call from now.
  void FailIn(int n) { FailAt(calls_ + n); }
  // No more failures: the calls that check the outcome must not hit one.
  void Disarm() { fail_at_ = -1; }

  int calls() const { return calls_; }
  bool failed() const { return failed_; }
  const std::string& failed_call() const { return failed_call_; }

 protected:
  absl::Status BeforeBegin() override { return Count("Begin"); }
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    return std::make_unique<CountedTransaction<FailNthCall>>(std::move(tx),
                                                             this);
  }

 private:
  friend class CountedTransaction<FailNthCall>;
  absl::Status Count(std::string_view method) {
    if (++calls_ != fail_at_) return absl::OkStatus();
    failed_ = true;
    failed_call_ = std::string(method);
    return absl::UnavailableError(
        absl::StrCat("injected failure at call ", calls_, " (",
                     absl::string_view(method.data(), method.size()), ")"));
  }

  int calls_ = 0;
  int fail_at_ = 0;
  bool failed_ = false;
  std::string failed_call_;
};

// Fails every call of the method `*method` names ("" fails none) with
// kUnavailable ("injected failure of every Method"), without reaching the
// real transaction. It reads `*method` at each call, so its owner (which
// outlives the transaction) can switch it.
class FailEveryCallOf : public ForwardingTransaction {
 public:
  FailEveryCallOf(std::unique_ptr<Transaction> tx, const std::string* method)
      : ForwardingTransaction(std::move(tx)), method_(method) {}

 protected:
  absl::Status BeforeCall(std::string_view method) override {
    if (method_->empty() || method != *method_) return absl::OkStatus();
    return absl::UnavailableError(
        absl::StrCat("injected failure of every ", *method_));
  }

 private:
  const std::string* method_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CONFORMANCE_FAIL_NTH_BACKEND_H_
