#include "run_options.h"

#include <cstdint>
#include <string>

#include "boost/json/object.hpp"

namespace sluice {
namespace {

namespace json = boost::json;

const json::object* AsObject(const Json& value) {
  return value.is_object() ? &value.get_object() : nullptr;
}

std::optional<int64_t> IntAt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64() && v->get_uint64() <= INT64_MAX) {
    return static_cast<int64_t>(v->get_uint64());
  }
  return std::nullopt;
}

std::optional<absl::Duration> MillisAt(const json::object& o,
                                       std::string_view key) {
  std::optional<int64_t> ms = IntAt(o, key);
  if (!ms || *ms < 0) return std::nullopt;
  return absl::Milliseconds(*ms);
}

bool BoolAt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_bool() && v->get_bool();
}

// Whole milliseconds, rounded up so a positive duration never becomes 0.
int64_t ToMillis(absl::Duration d) {
  return absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1)));
}

void PutTaskOverrides(const TaskOverrides& t, json::object& o) {
  if (t.max_attempts) o["max_attempts"] = *t.max_attempts;
  if (t.timeout) o["timeout_ms"] = ToMillis(*t.timeout);
  if (t.backoff) {
    json::object b;
    b["kind"] = std::string(ToString(t.backoff->kind));
    b["delay_ms"] = ToMillis(t.backoff->delay);
    o["backoff"] = std::move(b);
  }
  if (t.traceparent) o["traceparent"] = *t.traceparent;
}

TaskOverrides ReadTaskOverrides(const json::object& o) {
  TaskOverrides t;
  if (std::optional<int64_t> a = IntAt(o, "max_attempts");
      a && *a >= 1 && *a <= INT32_MAX) {
    t.max_attempts = static_cast<int>(*a);
  }
  t.timeout = MillisAt(o, "timeout_ms");
  if (const json::value* tp = o.if_contains("traceparent");
      tp != nullptr && tp->is_string()) {
    t.traceparent = std::string(tp->get_string());
  }
  if (const json::value* b = o.if_contains("backoff");
      b != nullptr && b->is_object()) {
    const json::object& bo = b->get_object();
    const json::value* kind = bo.if_contains("kind");
    std::optional<absl::Duration> delay = MillisAt(bo, "delay_ms");
    if (kind != nullptr && kind->is_string() && delay) {
      std::string_view k = kind->get_string();
      if (k == "fixed" || k == "exponential") {
        t.backoff = Backoff{
            k == "fixed" ? BackoffKind::kFixed : BackoffKind::kExponential,
            *delay};
      }
    }
  }
  return t;
}

constexpr std::string_view kKeepStates[] = {"completed", "failed", "cancelled"};

KeepRule& RuleNamed(Keep& keep, std::string_view state) {
  if (state == "completed") return keep.completed;
  if (state == "failed") return keep.failed;
  return keep.cancelled;
}
const KeepRule& RuleNamed(const Keep& keep, std::string_view state) {
  return RuleNamed(const_cast<Keep&>(keep), state);
}

json::value KeepJson(const Keep& keep) {
  json::object o;
  for (std::string_view state : kKeepStates) {
    const KeepRule& rule = RuleNamed(keep, state);
    if (!rule.count && !rule.age) continue;
    json::object r;
    if (rule.count) r["count"] = *rule.count;
    if (rule.age) r["age_ms"] = ToMillis(*rule.age);
    o[state] = std::move(r);
  }
  return o;
}

Keep ReadKeep(const json::object& o) {
  Keep keep;
  for (std::string_view state : kKeepStates) {
    const json::value* v = o.if_contains(state);
    if (v == nullptr || !v->is_object()) continue;
    KeepRule& rule = RuleNamed(keep, state);
    if (std::optional<int64_t> c = IntAt(v->get_object(), "count");
        c && *c >= 0 && *c <= INT32_MAX) {
      rule.count = static_cast<int>(*c);
    }
    rule.age = MillisAt(v->get_object(), "age_ms");
  }
  return keep;
}

}  // namespace

TaskOverrides ParseTaskOverrides(const Json& task_options) {
  const json::object* o = AsObject(task_options);
  return o == nullptr ? TaskOverrides{} : ReadTaskOverrides(*o);
}

Json TaskOverridesToJson(const TaskOverrides& overrides) {
  json::object o;
  PutTaskOverrides(overrides, o);
  if (o.empty()) return nullptr;
  return o;
}

RunOptions ParseRunOptions(const Json& run_options) {
  RunOptions options;
  const json::object* o = AsObject(run_options);
  if (o == nullptr) return options;
  options.task = ReadTaskOverrides(*o);
  if (const json::value* k = o->if_contains("keep");
      k != nullptr && k->is_object()) {
    options.keep = ReadKeep(k->get_object());
  }
  if (const json::value* d = o->if_contains("dedupe");
      d != nullptr && d->is_object()) {
    const json::object& dobj = d->get_object();
    const json::value* key = dobj.if_contains("key");
    if (key != nullptr && key->is_string()) {
      Dedupe dedupe;
      dedupe.key = std::string(key->get_string());
      dedupe.ttl = MillisAt(dobj, "ttl_ms");
      dedupe.extend = BoolAt(dobj, "extend");
      dedupe.replace = BoolAt(dobj, "replace");
      options.dedupe = std::move(dedupe);
    }
  }
  return options;
}

Json RunOptionsToJson(const RunOptions& options) {
  json::object o;
  PutTaskOverrides(options.task, o);
  if (options.keep) o["keep"] = KeepJson(*options.keep);
  if (options.dedupe) {
    json::object d;
    d["key"] = options.dedupe->key;
    if (options.dedupe->ttl) d["ttl_ms"] = ToMillis(*options.dedupe->ttl);
    d["extend"] = options.dedupe->extend;
    d["replace"] = options.dedupe->replace;
    o["dedupe"] = std::move(d);
  }
  if (o.empty()) return nullptr;
  return o;
}

Json TaskOptionsOfRun(const Json& run_options) {
  if (run_options.is_null()) return nullptr;
  return TaskOverridesToJson(ParseTaskOverrides(run_options));
}

std::string TraceparentOf(const Json& options) {
  const json::object* o = AsObject(options);
  if (o == nullptr) return "";
  const json::value* tp = o->if_contains("traceparent");
  return tp != nullptr && tp->is_string() ? std::string(tp->get_string()) : "";
}

const KeepRule& KeepRuleFor(const Keep& keep, RunStatus status) {
  static const KeepRule kNone;
  switch (status) {
    case RunStatus::kCompleted:
      return keep.completed;
    case RunStatus::kFailed:
      return keep.failed;
    case RunStatus::kCancelled:
      return keep.cancelled;
    case RunStatus::kStarted:
      break;
  }
  return kNone;
}

}  // namespace sluice
