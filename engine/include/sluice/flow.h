// Defining flows: DAGs of steps, with map fan-out.
//
//   sluice::Flow flow("resize_album", {.timeout = absl::Seconds(30)});
//   flow.Step("list", ListPhotos)
//       .Map("resize", {.depends_on = {"list"}}, ResizePhoto)
//       .Step("publish", {.depends_on = {"resize"}, .max_attempts = 5},
//             Publish);
//
// A single step's input is an object holding the run input under "run" and
// each completed dependency's output under that dependency's slug. A map step
// runs one task per element of an array (the run input for a root map, else
// its one dependency's output); each task's input is its element and the
// step's output is the array of task outputs in element order.
//
// Builder calls never fail: the first problem is recorded and returned by
// Validate(), which every engine entry point calls before touching a backend.
#ifndef SLUICE_FLOW_H_
#define SLUICE_FLOW_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "boost/json/value_from.hpp"
#include "boost/json/value_to.hpp"
#include "sluice/errors.h"
#include "sluice/json.h"
#include "sluice/task_context.h"

namespace sluice {

enum class StepKind { kSingle, kMap };

// What happens when a step's condition is unmet or its attempts run out.
enum class Policy {
  kFail,         // the step fails, and with it the run
  kSkip,         // the step is skipped; dependents run without its output
  kSkipCascade,  // the step and everything downstream of it are skipped
};

// How a flow's tasks map onto physical queues (docs/decisions/0024). The mode
// follows from the options: FlowOptions::queue_per_step is kStep; a step
// with StepSpec::queue makes kExplicit; else FlowOptions::queue is kShared;
// else kFlow.
enum class QueueMode {
  kFlow,    // every step uses one queue named lower(flow slug), owned by it
  kShared,  // every step uses FlowOptions::queue, which any flow may share
  // Every step has a private queue owned by the flow: lower(flow__step) when
  // that fits 47 characters, else lower(flow__<zero-based step index>).
  kStep,
  // Each step names a shared queue (StepSpec::queue); a step that names
  // none uses FlowOptions::queue, which must then be set. Several flows and
  // jobs may use these queues.
  kExplicit,
};

std::string_view ToString(StepKind kind);
std::string_view ToString(Policy policy);
std::string_view ToString(QueueMode mode);

// How the delay before a retry grows: after the n-th failed attempt of a
// budget, exponential waits floor(base * 2^n); fixed waits base every time.
enum class BackoffKind { kExponential, kFixed };
std::string_view ToString(BackoffKind kind);

// A retry backoff: its kind and base delay (>= 0).
struct Backoff {
  BackoffKind kind = BackoffKind::kExponential;
  absl::Duration delay = absl::Seconds(5);
};

// How long to keep ended runs of one outcome: the newest `count`, and/or
// those that ended within `age`. Unset keeps everything.
struct KeepRule {
  std::optional<int> count;           // >= 0
  std::optional<absl::Duration> age;  // >= 0

  friend bool operator==(const KeepRule&, const KeepRule&) = default;
};
struct Keep {
  KeepRule completed;
  KeepRule failed;
  KeepRule cancelled;

  friend bool operator==(const Keep&, const Keep&) = default;
};

// Flow-wide defaults; a step may override each.
struct FlowOptions {
  int max_attempts = 3;                          // total attempts, >= 1
  absl::Duration base_delay = absl::Seconds(5);  // retry backoff base, >= 0
  absl::Duration timeout = absl::Seconds(60);    // task lease, > 0
  BackoffKind backoff = BackoffKind::kExponential;
  // Empty: the flow's own queue, lower(slug). Otherwise every step uses this
  // shared queue (a queue name: [a-z0-9_], at most 47 characters), which
  // jobs and other flows may use too, so one worker can serve them all. With
  // steps that name their own queue (StepSpec::queue), the queue of the
  // steps that don't.
  std::string queue;
  // A private queue per step (QueueMode::kStep), so that each step can have
  // its own workers. Not together with `queue` or StepSpec::queue.
  bool queue_per_step = false;
  // The default priority of the flow's runs, in [kMinPriority, kMaxPriority].
  int priority = 0;
  // Retention of the flow's ended runs (applied by workers' sweeps).
  Keep keep;
};

struct StepSpec {
  std::vector<std::string> depends_on;  // in order; each defined earlier
  std::optional<int> max_attempts;
  std::optional<absl::Duration> base_delay;
  std::optional<BackoffKind> backoff;
  std::optional<absl::Duration> timeout;
  std::optional<absl::Duration> start_delay;  // delay before tasks are visible
  std::optional<Json> if_pattern;             // run only if input contains this
  std::optional<Json> if_not_pattern;  // run only if input doesn't contain it
  Policy when_unmet = Policy::kSkip;
  Policy when_exhausted = Policy::kFail;
  // A shared queue for this step's tasks (QueueMode::kExplicit); empty: the
  // flow's FlowOptions::queue. Stored as the step's queue_name.
  std::string queue;
};

// A step as stored: everything but the handler.
struct StepShape {
  std::string slug;
  StepKind kind = StepKind::kSingle;
  StepSpec spec;
  std::string queue_name;  // physical queue for this step's tasks
};

// A flow as stored and compared at deployment: the complete ordered
// definition, without handlers.
struct FlowShape {
  std::string slug;
  FlowOptions options;
  QueueMode queue_mode = QueueMode::kFlow;
  std::vector<StepShape> steps;  // topological (definition) order

  // The canonical JSON form that backends store.
  Json ToJson() const;
  static absl::StatusOr<FlowShape> FromJson(const Json& json);
  // Every difference from `stored`, as readable sentences; empty if equal.
  std::vector<std::string> DifferencesFrom(const FlowShape& stored) const;
  // Index of the step named `slug`, or -1.
  int StepIndex(std::string_view slug) const;
};

struct FanOut;  // sluice/fan_out.h

// What a handler returns on success: its output, or a FanOut (the task
// parks until its children end; see sluice/fan_out.h). Converts implicitly
// from anything a Json converts from, so a handler that returns JSON needs
// no change.
class StepResult {
 public:
  template <typename T>
  requires(std::is_convertible_v<T&&, Json> &&
           !std::is_same_v<std::remove_cvref_t<T>, StepResult>)
      StepResult(T&& output)  // NOLINT(google-explicit-constructor)
      : output_(std::forward<T>(output)) {}
  StepResult(FanOut fan_out);  // NOLINT(google-explicit-constructor)

  bool is_fan_out() const { return fan_out_ != nullptr; }
  // REQUIRES: !is_fan_out().
  const Json& output() const { return output_; }
  Json& output() { return output_; }
  // REQUIRES: is_fan_out().
  const FanOut& fan_out() const { return *fan_out_; }

 private:
  Json output_;
  std::shared_ptr<const FanOut> fan_out_;
};

// A raw handler: JSON in, JSON (or a FanOut) out. Return an error to fail
// the attempt; see errors.h for a chosen retry delay or a failure that must
// not retry.
using Handler = std::function<absl::StatusOr<StepResult>(const Json& input,
                                                         TaskContext& ctx)>;

// Wraps a typed handler: `In` and `Out` convert through Boost.JSON's
// `value_to` / `value_from`. An input that does not convert fails the attempt
// without retry.
template <typename In, typename Out, typename F>
Handler Typed(F function) {
  return
      [function = std::move(function)](
          const Json& input, TaskContext& ctx) -> absl::StatusOr<StepResult> {
        auto decoded = boost::json::try_value_to<In>(input);
        if (decoded.has_error()) {
          return NonRetryable(
              "handler input does not convert to the handler's type: " +
              decoded.error().message());
        }
        absl::StatusOr<Out> out = function(decoded.value(), ctx);
        if (!out.ok()) return out.status();
        return boost::json::value_from(*out);
      };
}

class Flow {
 public:
  explicit Flow(std::string slug, FlowOptions options = {});

  Flow& Step(std::string slug, Handler handler);
  Flow& Step(std::string slug, StepSpec spec, Handler handler = nullptr);
  Flow& Map(std::string slug, Handler handler);
  Flow& Map(std::string slug, StepSpec spec, Handler handler = nullptr);
  // The alias this version belongs to (default: the slug itself). Fixed at
  // the slug's first deployment; not part of the shape, so it is neither
  // stored in the definition nor compared by DifferencesFrom.
  Flow& Alias(std::string alias);

  // OK, or kInvalidArgument naming the first problem: a bad slug, a duplicate
  // step, an unknown or self dependency, a map step with more than one
  // dependency, a queue name over 47 characters (in step mode: a step whose
  // index-form name is too long), a step with no queue in explicit mode, an
  // invalid option or pattern.
  absl::Status Validate() const;
  // Validate(), plus: every step has a handler.
  absl::Status ValidateForWorker() const;

  const std::string& slug() const { return shape_.slug; }
  // The alias, or the slug when none was named.
  const std::string& alias() const {
    return alias_.empty() ? shape_.slug : alias_;
  }
  const FlowShape& shape() const { return shape_; }
  const Handler& handler(int step_index) const { return handlers_[step_index]; }

 private:
  Flow& Add(std::string slug, StepKind kind, StepSpec spec, Handler handler);
  // The queue of the step `slug` about to be added with `spec` (see
  // QueueMode), or why it has none.
  absl::StatusOr<std::string> StepQueue(std::string_view slug,
                                        const StepSpec& spec) const;
  absl::Status ValidateQueues() const;

  FlowShape shape_;
  std::string alias_;
  std::vector<Handler> handlers_;
  absl::Status first_error_;
};

// Slug rules shared by flows and steps: [a-zA-Z_][a-zA-Z0-9_]*, at most 128
// characters, and not the reserved word "run". `what` names it in the error.
absl::Status ValidateSlug(std::string_view slug, std::string_view what);

}  // namespace sluice

#endif  // SLUICE_FLOW_H_
