// Shared pieces of the dashboard's JSON API (docs/dashboard-api.md):
// responses, times, truncated payloads and the flow catalog the handlers
// read. Every handler answers JSON; every error is {"error": "..."}.
#ifndef SLUICE_DASHBOARD_API_INTERNAL_H_
#define SLUICE_DASHBOARD_API_INTERNAL_H_

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "sluice/dashboard.h"
#include "sluice/engine.h"
#include "sluice/flow.h"
#include "sluice/json.h"

namespace sluice::dashboard {

// --- Responses ---------------------------------------------------------

void SendJson(httplib::Response& response, int status, const Json& body);
void SendError(httplib::Response& response, int status,
               std::string_view message);
// The HTTP status for an engine error: 400 invalid argument, 404 not
// found, 409 failed precondition, 503 unavailable, 500 otherwise.
int HttpStatusOf(const absl::Status& status);
void SendStatus(httplib::Response& response, const absl::Status& status);

// --- Values ------------------------------------------------------------

// RFC 3339 in UTC ("2026-12-02T11:10:13.123456Z"), or null.
Json TimeJson(absl::Time t);
Json TimeJson(const std::optional<absl::Time>& t);
// Parses an RFC 3339 time; kInvalidArgument naming `what` otherwise.
absl::StatusOr<absl::Time> ParseTime(std::string_view text,
                                     std::string_view what);
// `value` itself, or, when it serializes to over `max_bytes`,
// {"truncated": true, "bytes": N, "preview": "<first ~1 KiB>"}.
Json Payload(const Json& value, size_t max_bytes);
Json Payload(const std::optional<Json>& value, size_t max_bytes);
// Parses the id in a /api/runs/<id> path; kInvalidArgument naming it.
absl::StatusOr<RunId> ParseRunIdParam(std::string_view text);

// --- Flows -------------------------------------------------------------

// A deployed version: its alias, its shape and the queue its runs show.
struct FlowEntry {
  std::string slug;
  std::string alias;
  absl::Time created_at;
  FlowShape shape;    // empty steps if the stored definition is unreadable
  std::string queue;  // the first step's queue
};

// Every deployed flow, by slug, with each alias's active slug, read in one
// transaction. The dashboard reads the store for these because the engine
// has no listing of flows or workers (docs/decisions/0038-dashboard.md).
struct FlowCatalog {
  std::map<std::string, FlowEntry> flows;     // by slug
  std::map<std::string, std::string> active;  // alias -> active slug
  absl::Time read_at;  // the engine clock's, when the read began

  static absl::StatusOr<FlowCatalog> Read(Engine& engine);
  const FlowEntry* Find(std::string_view slug) const;
  // The slugs of alias `name`'s versions, or {name} if it is not an alias.
  std::vector<std::string> SlugsOf(std::string_view name) const;
};

// --- The routes of each part (api_*.cc) --------------------------------

class CatalogCache;
class EventHub;
void AddReadRoutes(httplib::Server& server, Engine& engine,
                   std::shared_ptr<CatalogCache> catalogs,
                   const DashboardOptions& options);
class OverviewSampler;
void AddOverviewRoute(httplib::Server& server,
                      std::shared_ptr<OverviewSampler> sampler);
void AddActionRoutes(httplib::Server& server, Engine& engine,
                     const DashboardOptions& options);
void AddEventRoute(httplib::Server& server,
                   std::shared_ptr<CatalogCache> catalogs,
                   std::shared_ptr<EventHub> hub);

}  // namespace sluice::dashboard

#endif  // SLUICE_DASHBOARD_API_INTERNAL_H_
