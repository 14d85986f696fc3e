#include "sim_flows.h"

#include <optional>
#include <string_view>

#include "boost/json/array.hpp"
#include "boost/json/object.hpp"
#include "sluice/errors.h"

namespace sluice::simulation {
namespace {

// `input[key]` as an integer, if it is one.
std::optional<int64_t> IntAt(const Json& input, std::string_view key) {
  const boost::json::object* object = input.if_object();
  if (object == nullptr) return std::nullopt;
  const Json* value = object->if_contains(key);
  if (value == nullptr || !value->is_int64()) return std::nullopt;
  return value->as_int64();
}

// `input.run[key]` as an integer, if it is one.
std::optional<int64_t> RunIntAt(const Json& input, std::string_view key) {
  const boost::json::object* object = input.if_object();
  if (object == nullptr) return std::nullopt;
  const Json* run = object->if_contains("run");
  return run == nullptr ? std::nullopt : IntAt(*run, key);
}

absl::Status Unexpected() { return NonRetryable(kUnexpectedInput); }

// A handler that maps one integer (read by `read`) to another.
Handler IntHandler(std::function<std::optional<int64_t>(const Json&)> read,
                   std::function<int64_t(int64_t)> compute) {
  return [read = std::move(read), compute = std::move(compute)](
             const Json& input, TaskContext&) -> absl::StatusOr<Json> {
    std::optional<int64_t> value = read(input);
    if (!value) return Unexpected();
    return Json(compute(*value));
  };
}

auto Key(std::string key) {
  return [key = std::move(key)](const Json& in) { return IntAt(in, key); };
}
auto RunKey(std::string key) {
  return [key = std::move(key)](const Json& in) { return RunIntAt(in, key); };
}
std::optional<int64_t> Element(const Json& in) {
  if (!in.is_int64()) return std::nullopt;
  return in.as_int64();
}

boost::json::object One(std::string_view key, Json value) {
  boost::json::object out;
  out[key] = std::move(value);
  return out;
}

SimFlow Chain() {
  Flow flow("chain", {.max_attempts = 3,
                      .base_delay = absl::Seconds(1),
                      .timeout = absl::Seconds(10)});
  flow.Step("parse", IntHandler(RunKey("n"), [](int64_t n) { return n + 1; }))
      .Step("scale", {.depends_on = {"parse"}},
            IntHandler(Key("parse"), [](int64_t v) { return v * 2; }))
      .Step("shift", {.depends_on = {"scale"}},
            IntHandler(Key("scale"), [](int64_t v) { return v - 3; }));
  return SimFlow{
      std::move(flow),
      [](SimRandom& random) { return Json(One("n", random.Between(-50, 50))); },
      [](const Json& input) {
        int64_t n = input.at("n").as_int64();
        return Json(One("shift", (n + 1) * 2 - 3));
      }};
}

SimFlow Diamond() {
  Flow flow("diamond", {.max_attempts = 3,
                        .base_delay = absl::Milliseconds(500),
                        .timeout = absl::Seconds(5)});
  flow.Step("root", IntHandler(RunKey("n"), [](int64_t n) { return n * 3; }))
      .Step("left", {.depends_on = {"root"}, .timeout = absl::Seconds(20)},
            IntHandler(Key("root"), [](int64_t v) { return v + 1; }))
      .Step("right",
            {.depends_on = {"root"},
             .if_pattern = Json(One("run", One("flag", true)))},
            IntHandler(Key("root"), [](int64_t v) { return v * v; }))
      .Step("join", {.depends_on = {"left", "right"}},
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              std::optional<int64_t> left = IntAt(input, "left");
              if (!left) return Unexpected();
              boost::json::array out{*left, nullptr};
              if (input.as_object().contains("right")) {
                std::optional<int64_t> right = IntAt(input, "right");
                if (!right) return Unexpected();
                out[1] = *right;
              }
              return Json(std::move(out));
            });
  return SimFlow{std::move(flow),
                 [](SimRandom& random) {
                   boost::json::object input;
                   input["n"] = random.Between(-20, 20);
                   input["flag"] = random.Chance(0.5);
                   return Json(std::move(input));
                 },
                 [](const Json& input) {
                   int64_t n = input.at("n").as_int64();
                   boost::json::array join{3 * n + 1, nullptr};
                   if (input.at("flag").as_bool()) join[1] = 9 * n * n;
                   return Json(One("join", std::move(join)));
                 }};
}

SimFlow Fanout() {
  Flow flow("fanout", {.max_attempts = 4,
                       .base_delay = absl::Seconds(1),
                       .timeout = absl::Seconds(8)});
  flow.Step("expand",
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              std::optional<int64_t> n = RunIntAt(input, "n");
              if (!n) return Unexpected();
              boost::json::array items;
              for (int64_t i = 0; i < *n % 4; ++i) items.push_back(*n + i);
              return Json(std::move(items));
            })
      .Map("square", {.depends_on = {"expand"}, .timeout = absl::Seconds(3)},
           IntHandler(Element, [](int64_t v) { return v * v; }))
      .Step("sum", {.depends_on = {"square"}},
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              const boost::json::object* object = input.if_object();
              const Json* squares =
                  object == nullptr ? nullptr : object->if_contains("square");
              if (squares == nullptr || !squares->is_array()) {
                return Unexpected();
              }
              int64_t total = 0;
              for (const Json& v : squares->as_array()) {
                if (!v.is_int64()) return Unexpected();
                total += v.as_int64();
              }
              return Json(total);
            });
  return SimFlow{
      std::move(flow),
      [](SimRandom& random) { return Json(One("n", random.Between(0, 20))); },
      [](const Json& input) {
        int64_t n = input.at("n").as_int64();
        int64_t total = 0;
        for (int64_t i = 0; i < n % 4; ++i) total += (n + i) * (n + i);
        return Json(One("sum", total));
      }};
}

SimFlow Batch() {
  Flow flow("batch", {.max_attempts = 2,
                      .base_delay = absl::Seconds(2),
                      .timeout = absl::Seconds(6)});
  flow.Map("double", IntHandler(Element, [](int64_t v) { return 2 * v; }));
  return SimFlow{std::move(flow),
                 [](SimRandom& random) {
                   boost::json::array items;
                   int64_t count = random.Between(0, 4);
                   for (int64_t i = 0; i < count; ++i) {
                     items.push_back(random.Between(-9, 9));
                   }
                   return Json(std::move(items));
                 },
                 [](const Json& input) {
                   boost::json::array doubled;
                   for (const Json& v : input.as_array()) {
                     doubled.push_back(2 * v.as_int64());
                   }
                   return Json(One("double", std::move(doubled)));
                 }};
}

// One step of one task, as every job is: its step state is stored only
// when the run's row does not say it (decision 0069).
SimFlow Single() {
  Flow flow("single", {.max_attempts = 3,
                       .base_delay = absl::Seconds(1),
                       .timeout = absl::Seconds(5)});
  flow.Step("square", IntHandler(RunKey("n"), [](int64_t n) { return n * n; }));
  return SimFlow{
      std::move(flow),
      [](SimRandom& random) { return Json(One("n", random.Between(-20, 20))); },
      [](const Json& input) {
        int64_t n = input.at("n").as_int64();
        return Json(One("square", n * n));
      }};
}

}  // namespace

std::vector<SimFlow> MakeSimFlows() {
  std::vector<SimFlow> flows;
  flows.push_back(Chain());
  flows.push_back(Diamond());
  flows.push_back(Fanout());
  flows.push_back(Batch());
  flows.push_back(Single());
  return flows;
}

}  // namespace sluice::simulation
