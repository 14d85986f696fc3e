// The web dashboard: pages for queues, runs and a run's DAG, and the JSON
// API under /api/ they read, served by the host's own admin listener.
//
//   auto admin = sluice::AdminServer::Start(*engine, {
//       .port = 9464,
//       .add_routes = [&](httplib::Server& s) {
//         sluice::AddDashboardRoutes(s, *engine, {.token = "s3cret"});
//       }});
//   // open http://127.0.0.1:9464/
//
// Reads need no token. Actions (cancel, retry, delete a run) need
// `Authorization: Bearer <token>`; with no token configured the dashboard
// is read-only and refuses every action. Payloads are never logged. See
// docs/dashboard.md and docs/dashboard-api.md.
#ifndef SLUICE_DASHBOARD_H_
#define SLUICE_DASHBOARD_H_

#include <cstddef>
#include <string>

#include "sluice/engine.h"

namespace httplib {
class Server;
}

namespace sluice {

struct DashboardOptions {
  // The bearer token actions need; empty: a read-only dashboard.
  std::string token;
  // Run inputs, outputs and task outputs above this size are shown
  // truncated (a preview and the full size).
  std::size_t max_payload_bytes = 16 * 1024;
};

// Adds the pages (/, /runs, /runs/<id>, /flows, /assets/...) and the JSON
// API (/api/...) to `server`, which must not be serving yet. `engine` must
// outlive the server.
void AddDashboardRoutes(httplib::Server& server, Engine& engine,
                        DashboardOptions options = {});

}  // namespace sluice

#endif  // SLUICE_DASHBOARD_H_
