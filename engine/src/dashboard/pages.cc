// The dashboard's pages: one HTML page (a small single-page app that routes
// on location.pathname) and its scripts and stylesheet, all embedded at
// build time (dashboard/assets.h).
#include <string>
#include <string_view>

#include "dashboard/assets.h"
#include "dashboard/dashboard_routes.h"
#include "httplib.h"

namespace sluice::dashboard {
namespace {

// The page's own origin only: nothing is fetched from elsewhere, and no
// inline script runs (every text the pages show is inserted as text).
constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'";

std::string_view ContentType(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  return "application/octet-stream";
}

// Serves `file`. Browsers revalidate every time (no-cache) and get an
// empty 304 when their copy's ETag still matches, so a new build is
// picked up at once while an unchanged file is not sent again.
void Serve(const EmbeddedFile& file, const httplib::Request& request,
           httplib::Response& response) {
  std::string etag = "\"" + std::string(file.digest) + "\"";
  response.set_header("Cache-Control", "no-cache");
  response.set_header("ETag", etag);
  response.set_header("X-Content-Type-Options", "nosniff");
  if (file.name.ends_with(".html")) {
    response.set_header("Content-Security-Policy", kContentSecurityPolicy);
    response.set_header("Referrer-Policy", "no-referrer");
  }
  if (request.get_header_value("If-None-Match") == etag) {
    response.status = 304;
    return;
  }
  response.set_content(file.content.data(), file.content.size(),
                       std::string(ContentType(file.name)).c_str());
}

}  // namespace

void AddPageRoutes(httplib::Server& server, const DashboardOptions&) {
  for (const EmbeddedFile& file : EmbeddedAssets()) {
    auto handler = [&file](const httplib::Request& request,
                           httplib::Response& response) {
      Serve(file, request, response);
    };
    if (file.name == "index.html") {
      // Every page is the same document; its script picks the view from
      // the path. Run ids are matched loosely here and checked by the API.
      for (const char* path :
           {"/", "/runs", "/runs/", R"(/runs/[^/]+)", "/flows", "/flows/"}) {
        server.Get(path, handler);
      }
    } else {
      server.Get("/assets/" + std::string(file.name), handler);
    }
  }
}

}  // namespace sluice::dashboard
