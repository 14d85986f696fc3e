#include "sluice/dashboard.h"

#include "dashboard/dashboard_routes.h"

namespace sluice {

void AddDashboardRoutes(httplib::Server& server, Engine& engine,
                        DashboardOptions options) {
  dashboard::AddApiRoutes(server, engine, options);
  dashboard::AddPageRoutes(server, options);
}

}  // namespace sluice
