// The dashboard's pages over HTTP: every page path serves the one HTML
// document, the embedded scripts and stylesheet come with their content
// types and cache headers, and nothing else is served under /assets/.
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "httplib.h"
#include "sluice/admin_server.h"
#include "sluice/backends.h"
#include "sluice/dashboard.h"
#include "sluice/engine.h"

namespace sluice {
namespace {

class DashboardPagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend("memory:");
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(*backend_);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    absl::StatusOr<std::unique_ptr<AdminServer>> server =
        AdminServer::Start(*engine_, {.add_routes = [this](httplib::Server& s) {
          AddDashboardRoutes(s, *engine_);
        }});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }

  httplib::Result Get(const std::string& path,
                      const httplib::Headers& headers = {}) {
    httplib::Result result = client_->Get(path, headers);
    EXPECT_TRUE(result) << path << ": no answer";
    return result;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<AdminServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(DashboardPagesTest, EveryPagePath_ServesTheAppDocument) {
  httplib::Result root = Get("/");
  ASSERT_TRUE(root);
  ASSERT_EQ(root->status, 200);
  EXPECT_EQ(root->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(root->body.find("<script type=\"module\" src=\"/assets/app.js\">"),
            std::string::npos);
  // The page may load nothing from elsewhere.
  EXPECT_NE(root->get_header_value("Content-Security-Policy")
                .find("default-src 'self'"),
            std::string::npos);
  for (const char* path :
       {"/runs", "/runs/", "/runs/01a2368d-9b61-7129-994a-ece019fa0cb4",
        "/runs/not-a-run", "/flows"}) {
    httplib::Result page = Get(path);
    ASSERT_TRUE(page);
    EXPECT_EQ(page->status, 200) << path;
    EXPECT_EQ(page->body, root->body) << path;
  }
}

TEST_F(DashboardPagesTest, Assets_HaveTheirContentTypesAndCacheHeaders) {
  for (const auto& [path, type] :
       std::initializer_list<std::pair<const char*, const char*>>{
           {"/assets/app.js", "text/javascript; charset=utf-8"},
           {"/assets/dag.js", "text/javascript; charset=utf-8"},
           {"/assets/app.css", "text/css; charset=utf-8"}}) {
    httplib::Result asset = Get(path);
    ASSERT_TRUE(asset);
    ASSERT_EQ(asset->status, 200) << path;
    EXPECT_EQ(asset->get_header_value("Content-Type"), type) << path;
    EXPECT_EQ(asset->get_header_value("Cache-Control"), "no-cache") << path;
    EXPECT_EQ(asset->get_header_value("X-Content-Type-Options"), "nosniff");
    EXPECT_FALSE(asset->body.empty()) << path;
    std::string etag = asset->get_header_value("ETag");
    ASSERT_EQ(etag.size(), 18u) << path << ": " << etag;
    // A browser holding this version gets an empty 304.
    httplib::Result again = Get(path, {{"If-None-Match", etag}});
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 304) << path;
    EXPECT_TRUE(again->body.empty()) << path;
  }
  EXPECT_NE(Get("/assets/app.js")->get_header_value("ETag"),
            Get("/assets/app.css")->get_header_value("ETag"));
}

TEST_F(DashboardPagesTest, UnknownPathsAndAssets_AreNotFound) {
  for (const char* path : {"/assets/missing.js", "/assets/", "/assets/../x",
                           "/runs/a/b", "/nope", "/index.html"}) {
    httplib::Result result = Get(path);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 404) << path;
  }
}

}  // namespace
}  // namespace sluice
