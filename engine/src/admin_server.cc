// AdminServer: cpp-httplib serving /metrics and /healthz
// (docs/decisions/0034-metrics-and-admin-listener.md).
#include "sluice/admin_server.h"

#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "httplib.h"
#include "sluice/internal/strings.h"
#include "sluice/metrics.h"

namespace sluice {
namespace {

// Whether the store answers a read: a primary-key lookup of a flow that
// does not exist, the cheapest read every backend has.
absl::Status CheckStore(Engine& engine) {
  absl::StatusOr<std::unique_ptr<Transaction>> tx = engine.backend().Begin();
  if (!tx.ok()) return tx.status();
  return (*tx)->GetFlow("sluice_healthz").status();
}

// The listen backlog the admin listener asks for. Debian's compiled
// libcpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG is
// baked into the .so, so defining the macro here changes nothing): dozens
// of dashboard clients connecting at once overflowed it, and each dropped
// SYN cost its client a retransmission a second later.
constexpr int kListenBacklog = 128;

}  // namespace

class AdminServer::Impl {
 public:
  explicit Impl(Engine& engine) : engine_(engine) {
    // httplib calls this for the listening socket only, before bind; the
    // default options (address and port reuse) are kept.
    server_.set_socket_options([this](socket_t fd) {
      httplib::default_socket_options(fd);
      listen_fd_ = fd;
    });
    server_.Get("/metrics",
                [this](const httplib::Request&, httplib::Response& response) {
                  response.set_content(WritePrometheusText(engine_.Metrics()),
                                       kPrometheusContentType);
                });
    server_.Get("/healthz", [this](const httplib::Request&,
                                   httplib::Response& response) {
      absl::Status store = CheckStore(engine_);
      response.status = store.ok() ? 200 : 503;
      // The status text names the failure; backends never put credentials
      // in their errors.
      response.set_content(
          store.ok() ? "ok\n"
                     : StrCat("store unavailable: ", store.ToString(), "\n"),
          "text/plain; charset=utf-8");
    });
  }

  httplib::Server& server() { return server_; }

  // Listens again with kListenBacklog once bound: on Linux, listen() on a
  // socket that already listens just sets its backlog.
  void WidenBacklog() {
    if (listen_fd_ >= 0) ::listen(listen_fd_, kListenBacklog);
  }

  // Returns once the listener runs (or has already given up), so that a
  // Stop() right after cannot come before it and be missed.
  void Serve() {
    thread_ = std::thread([this] {
      server_.listen_after_bind();
      listener_done_.store(true);
    });
    while (!server_.is_running() && !listener_done_.load()) {
      std::this_thread::yield();
    }
  }

  void Stop() {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  Engine& engine_;
  httplib::Server server_;
  socket_t listen_fd_ = -1;  // set while binding
  std::thread thread_;
  std::atomic<bool> listener_done_{false};
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<AdminServer>> AdminServer::Start(
    Engine& engine, AdminServerOptions options) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        StrCat("admin server port ", options.port,
               " is out of range; give 1..65535, or 0 for a free port"));
  }
  auto impl = std::make_unique<Impl>(engine);
  if (options.add_routes) options.add_routes(impl->server());
  int port = options.port;
  if (port == 0) {
    port = impl->server().bind_to_any_port(options.address);
  } else if (!impl->server().bind_to_port(options.address, port)) {
    port = -1;
  }
  if (port < 0) {
    return absl::UnavailableError(StrCat(
        "admin server: can't listen on ", options.address, ":", options.port,
        " (the port is in use, or the address is not this host's)"));
  }
  impl->WidenBacklog();
  impl->Serve();
  return std::unique_ptr<AdminServer>(
      new AdminServer(std::move(impl), std::move(options.address), port));
}

AdminServer::AdminServer(std::unique_ptr<Impl> impl, std::string address,
                         int port)
    : impl_(std::move(impl)), address_(std::move(address)), port_(port) {}

AdminServer::~AdminServer() { Stop(); }

void AdminServer::Stop() { impl_->Stop(); }

}  // namespace sluice
