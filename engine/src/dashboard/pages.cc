// The dashboard's pages and assets. Not built yet: no routes are
// registered.
#include "dashboard/dashboard_routes.h"

namespace sluice::dashboard {

void AddPageRoutes(httplib::Server&, const DashboardOptions&) {}

}  // namespace sluice::dashboard
