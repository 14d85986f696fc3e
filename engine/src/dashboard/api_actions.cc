// The dashboard's actions: POST /api/runs/<id>/cancel, POST
// /api/runs/<id>/retry and DELETE /api/runs/<id>. Each needs
// `Authorization: Bearer <token>`; a refusal changes nothing.
#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "boost/json/object.hpp"
#include "dashboard/api_internal.h"
#include "sluice/internal/strings.h"

namespace sluice::dashboard {
namespace {

// Equal, taking the same time wherever the first difference is (the time
// depends on the lengths only), so a caller can't find the token a
// character at a time.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

// OK if the request carries the configured token; else the refusal.
bool Authorized(const httplib::Request& request, const std::string& token,
                httplib::Response& response) {
  if (token.empty()) {
    SendError(response, 403,
              "the dashboard is read-only: no token is configured");
    return false;
  }
  if (!request.has_header("Authorization")) {
    SendError(response, 401,
              "this action needs the header Authorization: Bearer <token>");
    response.set_header("WWW-Authenticate", "Bearer");
    return false;
  }
  std::string header = request.get_header_value("Authorization");
  constexpr std::string_view kScheme = "Bearer ";
  if (!absl::StartsWithIgnoreCase(header, ToAbsl(kScheme))) {
    SendError(response, 401,
              "the Authorization header must be \"Bearer <token>\"");
    response.set_header("WWW-Authenticate", "Bearer");
    return false;
  }
  if (!ConstantTimeEquals(std::string_view(header).substr(kScheme.size()),
                          token)) {
    SendError(response, 403, "the token is wrong");
    return false;
  }
  return true;
}

using Action = absl::Status (*)(Engine&, const RunId&);

absl::Status Cancel(Engine& engine, const RunId& id) {
  return engine.CancelRun(id);
}
absl::Status Retry(Engine& engine, const RunId& id) {
  return engine.RetryRun(id);
}
absl::Status Delete(Engine& engine, const RunId& id) {
  return engine.DeleteRun(id);
}

httplib::Server::Handler Handle(Engine& engine, std::string token,
                                Action action) {
  return [&engine, token = std::move(token), action](
             const httplib::Request& request, httplib::Response& response) {
    if (!Authorized(request, token, response)) return;
    absl::StatusOr<RunId> id = ParseRunIdParam(request.matches[1].str());
    if (!id.ok()) return SendStatus(response, id.status());
    absl::Status status = action(engine, *id);
    if (!status.ok()) return SendStatus(response, status);
    SendJson(response, 200, boost::json::object{{"ok", true}});
  };
}

}  // namespace

void AddActionRoutes(httplib::Server& server, Engine& engine,
                     const DashboardOptions& options) {
  server.Post(R"(/api/runs/([^/]+)/cancel)",
              Handle(engine, options.token, &Cancel));
  server.Post(R"(/api/runs/([^/]+)/retry)",
              Handle(engine, options.token, &Retry));
  server.Delete(R"(/api/runs/([^/]+))", Handle(engine, options.token, &Delete));
}

}  // namespace sluice::dashboard
