// The dashboard's two halves, registered by AddDashboardRoutes: the JSON
// API (api.cc) and the pages with their embedded assets (pages.cc).
#ifndef SLUICE_DASHBOARD_DASHBOARD_ROUTES_H_
#define SLUICE_DASHBOARD_DASHBOARD_ROUTES_H_

#include "sluice/dashboard.h"

namespace sluice::dashboard {

void AddApiRoutes(httplib::Server& server, Engine& engine,
                  const DashboardOptions& options);
void AddPageRoutes(httplib::Server& server, const DashboardOptions& options);

}  // namespace sluice::dashboard

#endif  // SLUICE_DASHBOARD_DASHBOARD_ROUTES_H_
