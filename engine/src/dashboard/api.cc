// The dashboard's JSON API (docs/dashboard-api.md,
// docs/decisions/0038-dashboard.md): reads (api_reads.cc), the overview
// (overview_sampler.cc), live events (api_events.cc) and actions
// (api_actions.cc), with a JSON 404 for any other /api/ path.
#include <algorithm>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "dashboard/api_internal.h"
#include "dashboard/catalog_cache.h"
#include "dashboard/dashboard_routes.h"
#include "dashboard/event_hub.h"
#include "dashboard/overview_sampler.h"
#include "sluice/internal/strings.h"

namespace sluice::dashboard {
namespace {

// httplib serves a connection on one thread until it closes, and a
// connection waiting for a thread waits for whole keep-alive sessions of
// others. So the listener gets a thread per client it expects at once: a
// few dozen page and API clients (the benchmark's 64), plus the live
// event streams, which each hold a thread for as long as they are open.
constexpr size_t kServerThreads = 80;

// httplib's task queue, told first when the server stops: httplib shuts
// its task queue down after the listener has closed and then waits for
// every request thread, so the live streams must end first.
class StoppingTaskQueue : public httplib::TaskQueue {
 public:
  StoppingTaskQueue(httplib::TaskQueue* inner, std::function<void()> on_stop)
      : inner_(inner), on_stop_(std::move(on_stop)) {}

  void enqueue(std::function<void()> fn) override {
    inner_->enqueue(std::move(fn));
  }
  void shutdown() override {
    on_stop_();
    inner_->shutdown();
  }
  void on_idle() override { inner_->on_idle(); }

 private:
  std::unique_ptr<httplib::TaskQueue> inner_;
  std::function<void()> on_stop_;
};

void AddNotFound(httplib::Server& server) {
  auto not_found = [](const httplib::Request& request,
                      httplib::Response& response) {
    SendError(response, 404,
              StrCat("no such API endpoint: ", request.method, " ",
                     request.path, " (see docs/dashboard-api.md)"));
  };
  server.Get(R"(/api(/.*)?)", not_found);
  server.Post(R"(/api(/.*)?)", not_found);
  server.Put(R"(/api(/.*)?)", not_found);
  server.Patch(R"(/api(/.*)?)", not_found);
  server.Delete(R"(/api(/.*)?)", not_found);
}

}  // namespace

void AddOverviewRoute(httplib::Server& server,
                      std::shared_ptr<OverviewSampler> sampler) {
  server.Get("/api/overview",
             [sampler](const httplib::Request&, httplib::Response& response) {
               absl::StatusOr<Json> overview = sampler->Overview();
               if (!overview.ok())
                 return SendStatus(response, overview.status());
               SendJson(response, 200, *overview);
             });
}

void AddApiRoutes(httplib::Server& server, Engine& engine,
                  const DashboardOptions& options) {
  auto sampler = std::make_shared<OverviewSampler>(engine);
  auto hub = std::make_shared<EventHub>(engine);
  auto catalogs = std::make_shared<CatalogCache>(engine);
  // httplib's own default (a pool of CPPHTTPLIB_THREAD_POOL_COUNT, 8 on a
  // small machine, set in its constructor) is replaced, not wrapped: with
  // 8 threads, every new connection of 64 clients waited for some other
  // client's keep-alive session to end.
  server.new_task_queue = [sampler, hub]() -> httplib::TaskQueue* {
    httplib::TaskQueue* inner = new httplib::ThreadPool(
        std::max(kServerThreads, size_t{CPPHTTPLIB_THREAD_POOL_COUNT}));
    return new StoppingTaskQueue(inner, [sampler, hub] {
      hub->Stop();
      sampler->Stop();
    });
  };
  // Replies go out at once, not after a delayed ACK (Nagle). httplib
  // serves a connection on one thread until it closes, so connections keep
  // its default short keep-alive (5 requests): more clients than threads
  // then take turns instead of waiting for a whole session.
  server.set_tcp_nodelay(true);
  AddReadRoutes(server, engine, catalogs, options);
  AddOverviewRoute(server, sampler);
  AddEventRoute(server, catalogs, hub);
  AddActionRoutes(server, engine, options);
  AddNotFound(server);  // last: httplib takes the first route that matches
}

}  // namespace sluice::dashboard
