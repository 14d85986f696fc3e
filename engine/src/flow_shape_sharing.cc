#include "flow_shape_sharing.h"

#include "sluice/internal/strings.h"

namespace sluice {
namespace {

namespace json = boost::json;

absl::Status Corrupt(std::string_view what) {
  return absl::InternalError(
      StrCat("stored flow definition is corrupt: ", what));
}

struct NamedRule {
  std::string_view name;
  KeepRule Keep::*rule;
};
constexpr NamedRule kRules[] = {{"completed", &Keep::completed},
                                {"failed", &Keep::failed},
                                {"cancelled", &Keep::cancelled}};

json::object KeepJson(const Keep& keep) {
  json::object o;
  for (const NamedRule& named : kRules) {
    const KeepRule& rule = keep.*named.rule;
    if (!rule.count && !rule.age) continue;
    json::object r;
    if (rule.count) r["count"] = *rule.count;
    if (rule.age) r["age_us"] = absl::ToInt64Microseconds(*rule.age);
    o[named.name] = std::move(r);
  }
  return o;
}

absl::Status ReadKeep(const json::value& value, Keep& keep) {
  if (!value.is_object()) return Corrupt("keep is not an object");
  for (const NamedRule& named : kRules) {
    const json::value* r = value.get_object().if_contains(named.name);
    if (r == nullptr) continue;
    if (!r->is_object()) return Corrupt(StrCat("keep.", named.name));
    KeepRule& rule = keep.*named.rule;
    if (const json::value* c = r->get_object().if_contains("count")) {
      if (!c->is_int64()) return Corrupt(StrCat("keep.", named.name, ".count"));
      rule.count = static_cast<int>(c->get_int64());
    }
    if (const json::value* a = r->get_object().if_contains("age_us")) {
      if (!a->is_int64()) return Corrupt(StrCat("keep.", named.name, ".age"));
      rule.age = absl::Microseconds(a->get_int64());
    }
  }
  return absl::OkStatus();
}

std::string DescribeRule(const KeepRule& rule) {
  if (!rule.count && !rule.age) return "unset";
  std::string out;
  if (rule.count) StrAppend(&out, "count ", *rule.count);
  if (rule.age) {
    StrAppend(&out, out.empty() ? "" : ", ", "age ",
              absl::FormatDuration(*rule.age));
  }
  return out;
}

}  // namespace

void PutSharingOptions(const FlowShape& shape, json::object& options) {
  if (!shape.options.queue.empty()) options["queue"] = shape.options.queue;
  if (shape.options.priority != 0) options["priority"] = shape.options.priority;
  if (shape.options.keep != Keep{})
    options["keep"] = KeepJson(shape.options.keep);
}

absl::Status ReadSharingOptions(const json::object& root,
                                const json::object& options, FlowShape& shape) {
  if (const json::value* mode = root.if_contains("queue_mode")) {
    if (!mode->is_string()) return Corrupt("queue_mode is not a string");
    if (mode->get_string() == "shared") {
      shape.queue_mode = QueueMode::kShared;
    } else if (mode->get_string() == "step") {
      shape.queue_mode = QueueMode::kStep;
      shape.options.queue_per_step = true;
    } else if (mode->get_string() == "explicit") {
      shape.queue_mode = QueueMode::kExplicit;
    } else if (mode->get_string() != "flow") {
      return Corrupt(StrCat("unknown queue_mode \"",
                            std::string_view(mode->get_string()), "\""));
    }
  }
  if (const json::value* queue = options.if_contains("queue")) {
    if (!queue->is_string()) return Corrupt("options.queue");
    shape.options.queue = std::string(queue->get_string());
  }
  if (const json::value* priority = options.if_contains("priority")) {
    if (!priority->is_int64()) return Corrupt("options.priority");
    shape.options.priority = static_cast<int>(priority->get_int64());
  }
  if (const json::value* keep = options.if_contains("keep")) {
    return ReadKeep(*keep, shape.options.keep);
  }
  return absl::OkStatus();
}

void CompareSharingOptions(const FlowShape& here, const FlowShape& stored,
                           std::vector<std::string>& out) {
  auto differ = [&](std::string_view field, const std::string& a,
                    const std::string& b) {
    if (a == b) return;
    out.push_back(StrCat("flow option ", field, " is ", a, " here but ", b,
                         " in the stored flow"));
  };
  auto quoted = [](const std::string& q) {
    return q.empty() ? std::string("unset") : StrCat("\"", q, "\"");
  };
  differ("queue", quoted(here.options.queue), quoted(stored.options.queue));
  differ("priority", StrCat(here.options.priority),
         StrCat(stored.options.priority));
  for (const NamedRule& named : kRules) {
    differ(StrCat("keep.", named.name),
           DescribeRule(here.options.keep.*named.rule),
           DescribeRule(stored.options.keep.*named.rule));
  }
}

}  // namespace sluice
