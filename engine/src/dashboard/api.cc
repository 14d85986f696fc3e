// The dashboard's JSON API (docs/dashboard-api.md). Not built yet: no
// routes are registered.
#include "dashboard/dashboard_routes.h"

namespace sluice::dashboard {

void AddApiRoutes(httplib::Server&, Engine&, const DashboardOptions&) {}

}  // namespace sluice::dashboard
