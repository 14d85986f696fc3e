// An optional admin HTTP listener: /metrics (Prometheus text) and /healthz.
// It lives in its own library, sluice_admin, so a host that does not want
// an HTTP server does not link one (it uses cpp-httplib).
//
//   auto admin = sluice::AdminServer::Start(*engine, {.port = 9464});
//   // curl http://127.0.0.1:9464/metrics
//
// It binds to loopback by default: the metrics name flows, steps and
// queues, so exposing them further is the host's decision. More routes (a
// dashboard) are added through AdminServerOptions::add_routes.
//
// Thread-safety: safe for concurrent use; requests are served on the
// listener's own threads.
#ifndef SLUICE_ADMIN_SERVER_H_
#define SLUICE_ADMIN_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "sluice/engine.h"

namespace httplib {
class Server;
}

namespace sluice {

struct AdminServerOptions {
  std::string address = "127.0.0.1";
  int port = 0;  // 0: a free port, reported by AdminServer::port()
  // Registers more routes on the server before it starts listening
  // (httplib's Server must not be changed while it serves). /metrics and
  // /healthz are registered first; a route added here for the same path
  // does not replace them.
  std::function<void(httplib::Server&)> add_routes;
};

class AdminServer {
 public:
  // Binds and starts serving `engine`, which must outlive the server.
  // kInvalidArgument for a port out of 0..65535; kUnavailable if the
  // address can't be bound (not an address of this host, or a port in use
  // without SO_REUSEADDR sharing; httplib sets that option, so a second
  // listener on a port may succeed).
  static absl::StatusOr<std::unique_ptr<AdminServer>> Start(
      Engine& engine, AdminServerOptions options = {});
  ~AdminServer();  // stops, as Stop() does

  // Stops listening and waits for requests in progress. Idempotent.
  void Stop();

  const std::string& address() const { return address_; }
  int port() const { return port_; }  // the bound port

  class Impl;

 private:
  AdminServer(std::unique_ptr<Impl> impl, std::string address, int port);

  std::unique_ptr<Impl> impl_;
  std::string address_;
  int port_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_ADMIN_SERVER_H_
