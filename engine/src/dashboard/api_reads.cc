// The dashboard API's reads: /api/config, /api/runs (a filtered page),
// /api/runs/<id> (a run with its graph, tasks and attempts) and /api/flows.
#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "boost/json/array.hpp"
#include "boost/json/object.hpp"
#include "dashboard/api_internal.h"
#include "dashboard/catalog_cache.h"
#include "sluice/internal/strings.h"
#include "sluice/version.h"

namespace sluice::dashboard {
namespace {

constexpr int kDefaultLimit = 50;
constexpr int kMaxLimit = 200;

boost::json::array StringArray(const std::vector<std::string>& items) {
  boost::json::array array;
  for (const std::string& item : items) array.emplace_back(item);
  return array;
}

// The fields a run shows in lists and in its detail.
boost::json::object RunSummary(const RunRecord& run,
                               const FlowCatalog& catalog) {
  const FlowEntry* flow = catalog.Find(run.flow_slug);
  return boost::json::object{{"id", run.run_id.ToString()},
                             {"flow", flow ? flow->alias : run.flow_slug},
                             {"version", run.flow_slug},
                             {"status", ToString(run.status)},
                             {"queue", flow ? flow->queue : std::string()},
                             // Sluice starts a run when it creates it; its
                             // tasks' claims are in the attempts ledger.
                             {"created_at", TimeJson(run.started_at)},
                             {"started_at", TimeJson(run.started_at)},
                             {"finished_at", TimeJson(run.finished_at)}};
}

absl::StatusOr<std::vector<RunStatus>> ParseStatuses(std::string_view text) {
  std::vector<RunStatus> statuses;
  for (absl::string_view piece : absl::StrSplit(ToAbsl(text), ',')) {
    std::string_view name = ToStd(piece);
    absl::StatusOr<RunStatus> status = ParseRunStatus(name);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          StrCat("status \"", name,
                 "\" is unknown; use started, completed, failed or cancelled "
                 "(several separated by commas)"));
    }
    statuses.push_back(*status);
  }
  return statuses;
}

absl::StatusOr<int> ParseLimit(std::string_view text) {
  int limit = 0;
  if (!absl::SimpleAtoi(ToAbsl(text), &limit) || limit < 1 ||
      limit > kMaxLimit) {
    return absl::InvalidArgumentError(StrCat(
        "limit \"", text.substr(0, 32), "\" is out of range 1..", kMaxLimit));
  }
  return limit;
}

// The RunFilter a /api/runs query asks for.
absl::StatusOr<RunFilter> ParseRunFilter(const httplib::Request& request,
                                         const FlowCatalog& catalog) {
  RunFilter filter;
  filter.limit = kDefaultLimit;
  if (std::string flow = request.get_param_value("flow"); !flow.empty()) {
    filter.names = catalog.SlugsOf(flow);
  }
  if (std::string status = request.get_param_value("status"); !status.empty()) {
    absl::StatusOr<std::vector<RunStatus>> statuses = ParseStatuses(status);
    if (!statuses.ok()) return statuses.status();
    filter.statuses = *std::move(statuses);
  }
  for (const char* bound : {"since", "until"}) {
    std::string text = request.get_param_value(bound);
    if (text.empty()) continue;
    absl::StatusOr<absl::Time> t = ParseTime(text, bound);
    if (!t.ok()) return t.status();
    (bound == std::string_view("since") ? filter.from : filter.to) = *t;
  }
  if (filter.from && filter.to && *filter.from >= *filter.to) {
    return absl::InvalidArgumentError("since must be earlier than until");
  }
  std::string order = request.get_param_value("order");
  if (order == "oldest") {
    filter.newest_first = false;
  } else if (!order.empty() && order != "newest") {
    return absl::InvalidArgumentError(
        StrCat("order \"", order.substr(0, 32),
               "\" is unknown; use newest or oldest"));
  }
  if (request.has_param("limit")) {
    absl::StatusOr<int> limit = ParseLimit(request.get_param_value("limit"));
    if (!limit.ok()) return limit.status();
    filter.limit = *limit;
  }
  filter.cursor = request.get_param_value("cursor");
  return filter;
}

void ListRuns(Engine& engine, CatalogCache& catalogs,
              const httplib::Request& request, httplib::Response& response) {
  absl::StatusOr<std::shared_ptr<const FlowCatalog>> catalog =
      catalogs.GetNamed(request.get_param_value("flow"));
  if (!catalog.ok()) return SendStatus(response, catalog.status());
  absl::StatusOr<RunFilter> filter = ParseRunFilter(request, **catalog);
  if (!filter.ok()) return SendStatus(response, filter.status());
  absl::StatusOr<RunPage> page = engine.ListRuns(*filter);
  if (!page.ok()) {
    if (page.status().code() == absl::StatusCode::kInvalidArgument &&
        !filter->cursor.empty()) {
      return SendError(response, 400,
                       "cursor is not one this query produced; pass the "
                       "next_cursor of the previous page of the same query");
    }
    return SendStatus(response, page.status());
  }
  catalog = catalogs.GetFor(page->runs);
  if (!catalog.ok()) return SendStatus(response, catalog.status());
  boost::json::array runs;
  for (const RunRecord& run : page->runs) {
    runs.emplace_back(RunSummary(run, **catalog));
  }
  SendJson(response, 200,
           boost::json::object{
               {"runs", std::move(runs)},
               {"next_cursor",
                page->cursor.empty() ? Json(nullptr) : Json(page->cursor)}});
}

std::string StepSlug(const RunView& view, const FlowEntry* flow, int index) {
  if (flow && index >= 0 &&
      index < static_cast<int>(flow->shape.steps.size())) {
    return flow->shape.steps[index].slug;
  }
  for (const StepStateRecord& step : view.steps) {
    if (step.step_index == index) return step.step_slug;
  }
  return StrCat("#", index);
}

boost::json::object GraphJson(const RunView& view, const FlowEntry* flow) {
  boost::json::array steps;
  for (const StepStateRecord& state : view.steps) {
    const StepShape* shape = nullptr;
    if (flow && state.step_index < static_cast<int>(flow->shape.steps.size())) {
      shape = &flow->shape.steps[state.step_index];
    }
    int64_t done = 0;
    int64_t tasks = 0;
    for (const TaskRecord& task : view.tasks) {
      if (task.key.step_index != state.step_index) continue;
      ++tasks;
      if (IsTerminal(task.status)) ++done;
    }
    StepKind kind = shape ? shape->kind : StepKind::kSingle;
    Json total = state.initial_tasks      ? Json(*state.initial_tasks)
                 : kind == StepKind::kMap ? Json(nullptr)
                                          : Json(std::max<int64_t>(tasks, 1));
    steps.emplace_back(boost::json::object{
        {"slug", state.step_slug},
        {"depends_on",
         shape ? StringArray(shape->spec.depends_on) : boost::json::array()},
        {"kind", ToString(kind)},
        {"status", ToString(state.status)},
        {"done", done},
        {"total", std::move(total)}});
  }
  return boost::json::object{{"steps", std::move(steps)}};
}

void GetRun(Engine& engine, CatalogCache& catalogs,
            const DashboardOptions& options, const httplib::Request& request,
            httplib::Response& response) {
  absl::StatusOr<RunId> id = ParseRunIdParam(request.matches[1].str());
  if (!id.ok()) return SendStatus(response, id.status());
  absl::StatusOr<RunView> view = engine.GetRun(*id);
  if (!view.ok()) return SendStatus(response, view.status());
  absl::StatusOr<std::shared_ptr<const FlowCatalog>> catalog =
      catalogs.GetFor(std::span(&view->run, 1));
  if (!catalog.ok()) return SendStatus(response, catalog.status());
  const FlowEntry* flow = (*catalog)->Find(view->run.flow_slug);
  const size_t max = options.max_payload_bytes;

  boost::json::object run = RunSummary(view->run, **catalog);
  run["error"] = view->run.error;
  run["input"] = Payload(view->run.input, max);
  run["output"] = Payload(view->run.output, max);
  boost::json::array tasks;
  for (const TaskRecord& task : view->tasks) {
    tasks.emplace_back(boost::json::object{
        {"step", StepSlug(*view, flow, task.key.step_index)},
        {"index", task.key.task_index},
        {"status", ToString(task.status)},
        {"attempts", task.attempts},
        {"output", Payload(task.output, max)},
        {"error", task.error}});
  }
  boost::json::array attempts;
  for (const AttemptRecord& attempt : view->attempts) {
    attempts.emplace_back(boost::json::object{
        {"step", StepSlug(*view, flow, attempt.task.step_index)},
        {"index", attempt.task.task_index},
        {"attempt", attempt.attempt},
        {"worker", attempt.worker_id},
        {"started_at", TimeJson(attempt.started_at)},
        {"finished_at", TimeJson(attempt.finished_at)},
        {"outcome", ToString(attempt.outcome)},
        {"error", attempt.error}});
  }
  SendJson(response, 200,
           boost::json::object{{"run", std::move(run)},
                               {"graph", GraphJson(*view, flow)},
                               {"tasks", std::move(tasks)},
                               {"attempts", std::move(attempts)}});
}

boost::json::array StepsJson(const FlowShape& shape) {
  boost::json::array steps;
  for (const StepShape& step : shape.steps) {
    steps.emplace_back(
        boost::json::object{{"slug", step.slug},
                            {"depends_on", StringArray(step.spec.depends_on)},
                            {"kind", ToString(step.kind)}});
  }
  return steps;
}

void ListFlows(CatalogCache& catalogs, httplib::Response& response) {
  absl::StatusOr<std::shared_ptr<const FlowCatalog>> fresh = catalogs.Fresh();
  if (!fresh.ok()) return SendStatus(response, fresh.status());
  const FlowCatalog* catalog = fresh->get();
  // Each alias's versions, oldest first.
  std::map<std::string, std::vector<const FlowEntry*>> by_alias;
  for (const auto& [slug, entry] : catalog->flows) {
    by_alias[entry.alias].push_back(&entry);
  }
  boost::json::array flows;
  for (auto& [alias, versions] : by_alias) {
    std::sort(versions.begin(), versions.end(),
              [](const FlowEntry* a, const FlowEntry* b) {
                return std::tie(a->created_at, a->slug) <
                       std::tie(b->created_at, b->slug);
              });
    auto active = catalog->active.find(alias);
    std::string active_slug =
        active == catalog->active.end() ? std::string() : active->second;
    const FlowEntry* shown = catalog->Find(active_slug);
    if (shown == nullptr) shown = versions.back();
    boost::json::array list;
    for (const FlowEntry* version : versions) {
      list.emplace_back(
          boost::json::object{{"slug", version->slug},
                              {"active", version->slug == active_slug},
                              {"created_at", TimeJson(version->created_at)}});
    }
    flows.emplace_back(boost::json::object{
        {"alias", alias},
        {"active_version",
         active_slug.empty() ? Json(nullptr) : Json(active_slug)},
        {"versions", std::move(list)},
        {"steps", StepsJson(shown->shape)}});
  }
  SendJson(response, 200, boost::json::object{{"flows", std::move(flows)}});
}

}  // namespace

void AddReadRoutes(httplib::Server& server, Engine& engine,
                   std::shared_ptr<CatalogCache> catalogs,
                   const DashboardOptions& options) {
  const bool read_only = options.token.empty();
  server.Get("/api/config",
             [read_only](const httplib::Request&, httplib::Response& response) {
               SendJson(response, 200,
                        boost::json::object{{"read_only", read_only},
                                            {"version", SLUICE_VERSION}});
             });
  server.Get("/api/runs", [&engine, catalogs](const httplib::Request& request,
                                              httplib::Response& response) {
    ListRuns(engine, *catalogs, request, response);
  });
  server.Get(R"(/api/runs/([^/]+))",
             [&engine, catalogs, options](const httplib::Request& request,
                                          httplib::Response& response) {
               GetRun(engine, *catalogs, options, request, response);
             });
  server.Get("/api/flows",
             [catalogs](const httplib::Request&, httplib::Response& response) {
               ListFlows(*catalogs, response);
             });
}

}  // namespace sluice::dashboard
