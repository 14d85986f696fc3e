// FlowShape: the stored, canonical form of a definition, and how two
// definitions differ.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "boost/json.hpp"
#include "flow_shape_sharing.h"
#include "sluice/flow.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

namespace json = boost::json;

absl::Status Corrupt(std::string_view what) {
  return absl::InternalError(
      StrCat("stored flow definition is corrupt: ", what));
}

json::value DurationJson(absl::Duration d) {
  return json::value(absl::ToInt64Microseconds(d));
}

json::object StepOptionsJson(const StepSpec& spec) {
  json::object o;
  if (spec.max_attempts) o["max_attempts"] = *spec.max_attempts;
  if (spec.base_delay) o["base_delay_us"] = DurationJson(*spec.base_delay);
  if (spec.backoff) o["backoff"] = std::string(ToString(*spec.backoff));
  if (spec.timeout) o["timeout_us"] = DurationJson(*spec.timeout);
  if (spec.start_delay) o["start_delay_us"] = DurationJson(*spec.start_delay);
  return o;
}

// A Wait step's settings as stored: the timeout only when set, the output
// only when the policy completes with it.
json::object WaitJson(const WaitSpec& wait) {
  json::object o;
  if (wait.timeout) o["timeout_us"] = DurationJson(*wait.timeout);
  o["on_timeout"] = std::string(ToString(wait.on_timeout));
  if (wait.on_timeout == WaitTimeoutPolicy::kComplete) {
    o["timeout_output"] = wait.timeout_output;
  }
  return o;
}

absl::StatusOr<int64_t> IntField(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_int64()) {
    return Corrupt(StrCat("\"", key, "\" is missing or not an integer"));
  }
  return v->get_int64();
}

absl::StatusOr<std::string> StringField(const json::object& o,
                                        std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_string()) {
    return Corrupt(StrCat("\"", key, "\" is missing or not a string"));
  }
  return std::string(v->get_string());
}

// A backoff kind stored under `key`; absent means unset (flows stored
// before backoff kinds existed have none).
absl::StatusOr<std::optional<BackoffKind>> OptionalBackoff(
    const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_string() && v->get_string() == "fixed") return BackoffKind::kFixed;
  if (v->is_string() && v->get_string() == "exponential") {
    return BackoffKind::kExponential;
  }
  return Corrupt(StrCat("\"", key, "\" is not \"fixed\" or \"exponential\""));
}

absl::StatusOr<Policy> ParsePolicy(const std::string& text) {
  if (text == "fail") return Policy::kFail;
  if (text == "skip") return Policy::kSkip;
  if (text == "skip_cascade") return Policy::kSkipCascade;
  return Corrupt(StrCat("unknown policy \"", text, "\""));
}

std::optional<absl::Duration> OptionalDuration(const json::object& o,
                                               std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_int64()) return std::nullopt;
  return absl::Microseconds(v->get_int64());
}

absl::StatusOr<StepKind> ParseKind(const std::string& text) {
  if (text == "single") return StepKind::kSingle;
  if (text == "map") return StepKind::kMap;
  if (text == "wait") return StepKind::kWait;
  return Corrupt(StrCat("unknown step kind \"", text, "\""));
}

absl::StatusOr<WaitSpec> ParseWait(const json::object& step) {
  const json::value* v = step.if_contains("wait");
  if (v == nullptr || !v->is_object()) return Corrupt("a Wait step's \"wait\"");
  const json::object& o = v->get_object();
  WaitSpec wait;
  wait.timeout = OptionalDuration(o, "timeout_us");
  absl::StatusOr<std::string> policy = StringField(o, "on_timeout");
  if (!policy.ok()) return policy.status();
  if (*policy == "complete") {
    wait.on_timeout = WaitTimeoutPolicy::kComplete;
    if (const json::value* out = o.if_contains("timeout_output")) {
      wait.timeout_output = *out;
    }
  } else if (*policy != "fail") {
    return Corrupt(StrCat("unknown on_timeout \"", *policy, "\""));
  }
  return wait;
}

std::string DescribeDuration(const std::optional<absl::Duration>& d) {
  return d ? absl::FormatDuration(*d) : "unset";
}

std::string DescribePattern(const std::optional<Json>& p) {
  return p ? SerializeJson(*p) : "unset";
}

template <typename T, typename Describe>
void CompareField(std::vector<std::string>& out, std::string_view owner,
                  std::string_view field, const T& here, const T& stored,
                  Describe describe) {
  if (here == stored) return;
  out.push_back(StrCat(owner, field, " is ", describe(here), " here but ",
                       describe(stored), " in the stored flow"));
}

void CompareWait(std::vector<std::string>& out, std::string_view owner,
                 const WaitSpec& here, const WaitSpec& stored) {
  CompareField(out, owner, "wait timeout", here.timeout, stored.timeout,
               DescribeDuration);
  CompareField(out, owner, "wait on_timeout",
               std::string(ToString(here.on_timeout)),
               std::string(ToString(stored.on_timeout)),
               [](const std::string& v) { return v; });
  CompareField(out, owner, "wait timeout_output", here.timeout_output,
               stored.timeout_output,
               [](const Json& v) { return SerializeJson(v); });
}

}  // namespace

Json FlowShape::ToJson() const {
  json::object root;
  root["slug"] = slug;
  root["queue_mode"] = std::string(ToString(queue_mode));
  json::object options_json;
  options_json["max_attempts"] = options.max_attempts;
  options_json["base_delay_us"] = DurationJson(options.base_delay);
  options_json["timeout_us"] = DurationJson(options.timeout);
  // Written only when not the default, so the stored form of flows that
  // don't choose a kind is what it was before kinds existed.
  if (options.backoff != BackoffKind::kExponential) {
    options_json["backoff"] = std::string(ToString(options.backoff));
  }
  PutSharingOptions(*this, options_json);
  root["options"] = std::move(options_json);
  json::array steps_json;
  for (const StepShape& step : steps) {
    json::object s;
    s["slug"] = step.slug;
    s["kind"] = std::string(ToString(step.kind));
    json::array deps;
    for (const std::string& d : step.spec.depends_on) deps.emplace_back(d);
    s["depends_on"] = std::move(deps);
    s["queue"] = step.queue_name;
    s["options"] = StepOptionsJson(step.spec);
    if (step.spec.if_pattern) s["if"] = *step.spec.if_pattern;
    if (step.spec.if_not_pattern) s["if_not"] = *step.spec.if_not_pattern;
    s["when_unmet"] = std::string(ToString(step.spec.when_unmet));
    s["when_exhausted"] = std::string(ToString(step.spec.when_exhausted));
    if (step.kind == StepKind::kWait) s["wait"] = WaitJson(step.wait);
    steps_json.emplace_back(std::move(s));
  }
  root["steps"] = std::move(steps_json);
  return root;
}

absl::StatusOr<FlowShape> FlowShape::FromJson(const Json& value) {
  if (!value.is_object()) return Corrupt("not an object");
  const json::object& root = value.get_object();
  FlowShape shape;
  absl::StatusOr<std::string> slug = StringField(root, "slug");
  if (!slug.ok()) return slug.status();
  shape.slug = *slug;
  const json::value* options = root.if_contains("options");
  if (options == nullptr || !options->is_object()) return Corrupt("options");
  const json::object& o = options->get_object();
  absl::StatusOr<int64_t> attempts = IntField(o, "max_attempts");
  absl::StatusOr<int64_t> base = IntField(o, "base_delay_us");
  absl::StatusOr<int64_t> timeout = IntField(o, "timeout_us");
  if (!attempts.ok()) return attempts.status();
  if (!base.ok()) return base.status();
  if (!timeout.ok()) return timeout.status();
  shape.options.max_attempts = static_cast<int>(*attempts);
  shape.options.base_delay = absl::Microseconds(*base);
  shape.options.timeout = absl::Microseconds(*timeout);
  absl::StatusOr<std::optional<BackoffKind>> backoff =
      OptionalBackoff(o, "backoff");
  if (!backoff.ok()) return backoff.status();
  shape.options.backoff = backoff->value_or(BackoffKind::kExponential);
  if (absl::Status s = ReadSharingOptions(root, o, shape); !s.ok()) return s;

  const json::value* steps = root.if_contains("steps");
  if (steps == nullptr || !steps->is_array()) return Corrupt("steps");
  for (const json::value& sv : steps->get_array()) {
    if (!sv.is_object()) return Corrupt("a step is not an object");
    const json::object& s = sv.get_object();
    StepShape step;
    absl::StatusOr<std::string> step_slug = StringField(s, "slug");
    absl::StatusOr<std::string> kind = StringField(s, "kind");
    absl::StatusOr<std::string> queue = StringField(s, "queue");
    absl::StatusOr<std::string> unmet = StringField(s, "when_unmet");
    absl::StatusOr<std::string> exhausted = StringField(s, "when_exhausted");
    for (const auto* f : {&step_slug, &kind, &queue, &unmet, &exhausted}) {
      if (!f->ok()) return f->status();
    }
    step.slug = *step_slug;
    absl::StatusOr<StepKind> step_kind = ParseKind(*kind);
    if (!step_kind.ok()) return step_kind.status();
    step.kind = *step_kind;
    if (step.kind == StepKind::kWait) {
      absl::StatusOr<WaitSpec> wait = ParseWait(s);
      if (!wait.ok()) return wait.status();
      step.wait = *std::move(wait);
    }
    step.queue_name = *queue;
    absl::StatusOr<Policy> unmet_policy = ParsePolicy(*unmet);
    absl::StatusOr<Policy> exhausted_policy = ParsePolicy(*exhausted);
    if (!unmet_policy.ok()) return unmet_policy.status();
    if (!exhausted_policy.ok()) return exhausted_policy.status();
    step.spec.when_unmet = *unmet_policy;
    step.spec.when_exhausted = *exhausted_policy;
    const json::value* deps = s.if_contains("depends_on");
    if (deps == nullptr || !deps->is_array()) return Corrupt("depends_on");
    for (const json::value& d : deps->get_array()) {
      if (!d.is_string()) return Corrupt("a dependency is not a string");
      step.spec.depends_on.emplace_back(d.get_string());
    }
    const json::value* so = s.if_contains("options");
    if (so == nullptr || !so->is_object()) return Corrupt("step options");
    const json::object& sopt = so->get_object();
    if (const json::value* a = sopt.if_contains("max_attempts");
        a != nullptr && a->is_int64()) {
      step.spec.max_attempts = static_cast<int>(a->get_int64());
    }
    step.spec.base_delay = OptionalDuration(sopt, "base_delay_us");
    absl::StatusOr<std::optional<BackoffKind>> step_backoff =
        OptionalBackoff(sopt, "backoff");
    if (!step_backoff.ok()) return step_backoff.status();
    step.spec.backoff = *step_backoff;
    step.spec.timeout = OptionalDuration(sopt, "timeout_us");
    step.spec.start_delay = OptionalDuration(sopt, "start_delay_us");
    if (const json::value* p = s.if_contains("if")) step.spec.if_pattern = *p;
    if (const json::value* p = s.if_contains("if_not")) {
      step.spec.if_not_pattern = *p;
    }
    shape.steps.push_back(std::move(step));
  }
  return shape;
}

int FlowShape::StepIndex(std::string_view step_slug) const {
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].slug == step_slug) return static_cast<int>(i);
  }
  return -1;
}

std::vector<std::string> FlowShape::DifferencesFrom(
    const FlowShape& stored) const {
  std::vector<std::string> out;
  auto plain = [](const auto& v) { return StrCat(v); };
  auto duration = [](absl::Duration d) { return absl::FormatDuration(d); };
  CompareField(out, "flow option ", "max_attempts", options.max_attempts,
               stored.options.max_attempts, plain);
  CompareField(out, "flow option ", "base_delay", options.base_delay,
               stored.options.base_delay, duration);
  CompareField(out, "flow option ", "timeout", options.timeout,
               stored.options.timeout, duration);
  auto kind = [](BackoffKind k) { return std::string(ToString(k)); };
  CompareField(out, "flow option ", "backoff", options.backoff,
               stored.options.backoff, kind);
  CompareField(out, "flow ", "queue mode", std::string(ToString(queue_mode)),
               std::string(ToString(stored.queue_mode)), plain);
  CompareSharingOptions(*this, stored, out);
  if (steps.size() != stored.steps.size()) {
    out.push_back(StrCat("the flow has ", steps.size(), " steps here but ",
                         stored.steps.size(), " in the stored flow"));
  }
  size_t common = std::min(steps.size(), stored.steps.size());
  for (size_t i = 0; i < common; ++i) {
    const StepShape& a = steps[i];
    const StepShape& b = stored.steps[i];
    std::string owner = StrCat("step ", i, " (\"", a.slug, "\"): ");
    if (a.slug != b.slug) {
      out.push_back(StrCat("step ", i, " is \"", a.slug, "\" here but \"",
                           b.slug, "\" in the stored flow"));
    }
    CompareField(out, owner, "kind", std::string(ToString(a.kind)),
                 std::string(ToString(b.kind)), plain);
    auto deps = [](const std::vector<std::string>& d) {
      return StrCat("[", absl::StrJoin(d, ", "), "]");
    };
    CompareField(out, owner, "depends_on", a.spec.depends_on, b.spec.depends_on,
                 deps);
    CompareField(out, owner, "queue", a.queue_name, b.queue_name, plain);
    auto attempts = [](const std::optional<int>& v) {
      return v ? StrCat(*v) : std::string("unset");
    };
    CompareField(out, owner, "max_attempts", a.spec.max_attempts,
                 b.spec.max_attempts, attempts);
    CompareField(out, owner, "base_delay", a.spec.base_delay, b.spec.base_delay,
                 DescribeDuration);
    CompareField(out, owner, "backoff", a.spec.backoff, b.spec.backoff,
                 [](const std::optional<BackoffKind>& k) {
                   return k ? std::string(ToString(*k)) : "unset";
                 });
    CompareField(out, owner, "timeout", a.spec.timeout, b.spec.timeout,
                 DescribeDuration);
    CompareField(out, owner, "start_delay", a.spec.start_delay,
                 b.spec.start_delay, DescribeDuration);
    CompareField(out, owner, "if", a.spec.if_pattern, b.spec.if_pattern,
                 DescribePattern);
    CompareField(out, owner, "if_not", a.spec.if_not_pattern,
                 b.spec.if_not_pattern, DescribePattern);
    auto policy = [](Policy p) { return std::string(ToString(p)); };
    CompareField(out, owner, "when_unmet", a.spec.when_unmet, b.spec.when_unmet,
                 policy);
    CompareField(out, owner, "when_exhausted", a.spec.when_exhausted,
                 b.spec.when_exhausted, policy);
    if (a.kind == StepKind::kWait && b.kind == StepKind::kWait) {
      CompareWait(out, owner, a.wait, b.wait);
    }
  }
  for (size_t i = common; i < steps.size(); ++i) {
    out.push_back(StrCat("step ", i, " (\"", steps[i].slug, "\") is new here"));
  }
  for (size_t i = common; i < stored.steps.size(); ++i) {
    out.push_back(StrCat("step ", i, " (\"", stored.steps[i].slug,
                         "\") is missing here"));
  }
  return out;
}

}  // namespace sluice
