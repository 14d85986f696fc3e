// sluice-dashboard-bench: the dashboard's JSON API under load. Fills a
// store with runs (100,000 by default: a tenth run through a worker, one in
// ten of those failed; the rest waiting), serves the dashboard, then sends
// 1,000 API requests (overview, runs list pages with filters and cursors,
// run details) from `--concurrency` clients at once, after a warm-up round
// of two requests per client, and prints
//
//   RESULT workload=dashboard_api backend=<name> requests=<n>
//          concurrency=<c> p50_ms=<x> p99_ms=<y> max_ms=<z> ...
//          warmup_p99_ms=<w> errors=<e>
//
// A benchmark, not a test: run it on an idle machine (docs/benchmarks.md).
//   sluice-dashboard-bench [--backend URL] [--runs N] [--requests N]
//                          [--concurrency C]
// The default backend is a fresh SQLite file under /tmp. A Postgres URL
// must name an empty database; the benchmark migrates it.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "boost/json/object.hpp"
#include "httplib.h"
#include "postgres_support.h"
#include "sluice/admin_server.h"
#include "sluice/backends.h"
#include "sluice/dashboard.h"
#include "sluice/engine.h"
#include "sluice/errors.h"
#include "sluice/job.h"
#include "sluice/postgres.h"

namespace sluice::bench {
namespace {

struct Options {
  std::string backend = "sqlite:/tmp/sluice-dashboard-bench.db";
  int runs = 100'000;
  int requests = 1000;
  int concurrency = 64;
};

bool ParseArgs(int argc, char** argv, Options& options) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    std::string value = argv[i + 1];
    if (flag == "--backend") {
      options.backend = value;
    } else if (!(flag == "--runs" && absl::SimpleAtoi(value, &options.runs)) &&
               !(flag == "--requests" &&
                 absl::SimpleAtoi(value, &options.requests)) &&
               !(flag == "--concurrency" &&
                 absl::SimpleAtoi(value, &options.concurrency))) {
      return false;
    }
  }
  return argc % 2 == 1 && options.runs >= 10 && options.requests > 0 &&
         options.concurrency > 0;
}

void Check(const absl::Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "sluice-dashboard-bench: %s: %s\n", what,
               status.ToString().c_str());
  std::exit(1);
}

absl::Status Enqueue(Engine& engine, const std::string& job, int count) {
  constexpr int kBatch = 1000;
  for (int first = 0; first < count; first += kBatch) {
    std::vector<Engine::EnqueueItem> items;
    for (int i = first; i < std::min(count, first + kBatch); ++i) {
      items.push_back({boost::json::object{{"i", i}}, {}});
    }
    absl::StatusOr<std::vector<EnqueueResult>> done =
        engine.EnqueueMany(job, items);
    if (!done.ok()) return done.status();
  }
  return absl::OkStatus();
}

// Runs `count` runs of bench_done through a worker: one in ten fails.
void RunSome(Engine& engine, const Job& job) {
  absl::StatusOr<std::unique_ptr<Worker>> worker = engine.StartWorker(
      WorkerSpec().Serve(job), {.concurrency = 8, .batch_size = 100});
  Check(worker.status(), "start worker");
  RunFilter started{
      .names = {"bench_done"}, .statuses = {RunStatus::kStarted}, .limit = 1};
  for (;;) {
    absl::StatusOr<RunPage> page = engine.ListRuns(started);
    Check(page.status(), "list started runs");
    if (page->runs.empty()) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  Check((*worker)->Stop(), "stop worker");
}

// The request paths: a fifth overviews, half list pages (filters, both
// orders, cursors), the rest run details, shuffled.
std::vector<std::string> Requests(Engine& engine, int count,
                                  unsigned seed = 42) {
  std::vector<std::string> lists = {
      "/api/runs",
      "/api/runs?limit=50&flow=bench_wait",
      "/api/runs?limit=50&status=failed",
      "/api/runs?limit=50&status=completed&order=oldest",
      "/api/runs?limit=20&flow=bench_done&status=failed,completed",
      "/api/runs?limit=100&order=oldest",
      "/api/"
      "runs?limit=50&status=started&flow=bench_wait&since=2000-01-01T00:00:00Z",
  };
  // Second pages of some, with their cursors.
  RunFilter all{.limit = 50};
  absl::StatusOr<RunPage> first = engine.ListRuns(all);
  Check(first.status(), "first page");
  lists.push_back("/api/runs?limit=50&cursor=" + first->cursor);
  RunFilter some{.limit = 500};
  absl::StatusOr<RunPage> sample = engine.ListRuns(some);
  Check(sample.status(), "sample runs");
  RunFilter failed{
      .names = {"bench_done"}, .statuses = {RunStatus::kFailed}, .limit = 50};
  absl::StatusOr<RunPage> failures = engine.ListRuns(failed);
  Check(failures.status(), "sample failed runs");
  std::vector<std::string> ids;
  for (const RunRecord& run : sample->runs)
    ids.push_back(run.run_id.ToString());
  for (const RunRecord& run : failures->runs) {
    ids.push_back(run.run_id.ToString());
  }
  std::mt19937 random(seed);
  std::vector<std::string> paths;
  for (int i = 0; i < count; ++i) {
    int kind = i % 10;
    if (kind < 2) {
      paths.push_back("/api/overview");
    } else if (kind < 7) {
      paths.push_back(lists[random() % lists.size()]);
    } else {
      paths.push_back("/api/runs/" + ids[random() % ids.size()]);
    }
  }
  std::shuffle(paths.begin(), paths.end(), random);
  return paths;
}

// One round of requests from `concurrency` clients at once, each on its
// own keep-alive connection.
struct Round {
  std::vector<double> latencies;  // per path, in milliseconds
  double seconds = 0;
  int errors = 0;
};

Round SendRound(const AdminServer& server,
                const std::vector<std::string>& paths, int concurrency) {
  std::vector<double> latencies(paths.size());
  std::atomic<size_t> next{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c) {
    clients.emplace_back([&] {
      httplib::Client client(server.address(), server.port());
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      client.set_read_timeout(60, 0);
      for (size_t i = next++; i < paths.size(); i = next++) {
        absl::Time start = absl::Now();
        httplib::Result result = client.Get(paths[i].c_str());
        latencies[i] = absl::ToDoubleMilliseconds(absl::Now() - start);
        if (!result || result->status != 200) {
          if (errors++ < 5) {
            std::fprintf(stderr, "%s: %s\n", paths[i].c_str(),
                         result ? result->body.c_str()
                                : httplib::to_string(result.error()).c_str());
          }
        }
      }
    });
  }
  absl::Time start = absl::Now();
  for (std::thread& client : clients) client.join();
  double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return {std::move(latencies), seconds, errors.load()};
}

double Percentile(const std::vector<double>& sorted, double p) {
  size_t index = static_cast<size_t>(p * static_cast<double>(sorted.size()));
  return sorted[std::min(index, sorted.size() - 1)];
}

int Main(const Options& options) {
  if (absl::StartsWith(options.backend, "sqlite:")) {
    std::filesystem::remove(options.backend.substr(7));
    std::filesystem::remove(options.backend.substr(7) + "-wal");
    std::filesystem::remove(options.backend.substr(7) + "-shm");
  }
  if (absl::StartsWith(options.backend, "postgres")) {
    Check(MigratePostgres(options.backend), "migrate");
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend(options.backend);
  Check(backend.status(), "open backend");
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**backend);
  Check(engine.status(), "create engine");
  Job done("bench_done", {.queue = "bench_done"},
           [](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
             if (payload.at("i").as_int64() % 10 == 0) {
               return NonRetryable("refused for the benchmark");
             }
             return payload;
           });
  Job wait("bench_wait", {.queue = "bench_wait"},
           [](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
             return payload;
           });
  Check((*engine)->Deploy(done).status(), "deploy");
  Check((*engine)->Deploy(wait).status(), "deploy");

  absl::Time fill_start = absl::Now();
  const int ran = options.runs / 10;
  Check(Enqueue(**engine, "bench_done", ran), "enqueue");
  Check(Enqueue(**engine, "bench_wait", options.runs - ran), "enqueue");
  RunSome(**engine, done);
  if (absl::StartsWith(options.backend, "postgres")) {
    // A store of this size has the statistics autovacuum gathers within a
    // minute of filling; without them the planner takes a status index
    // for the flow-and-statuses page and sorts 10,000 runs.
    Check(AnalyzePostgres(options.backend), "analyze");
  }
  std::fprintf(stderr, "filled %d runs in %.1f s\n", options.runs,
               absl::ToDoubleSeconds(absl::Now() - fill_start));

  absl::StatusOr<std::unique_ptr<AdminServer>> server =
      AdminServer::Start(**engine, {.add_routes = [&](httplib::Server& s) {
        AddDashboardRoutes(s, **engine);
      }});
  Check(server.status(), "start server");
  std::vector<std::string> paths = Requests(**engine, options.requests);
  // The first overview reads every queue's counts from the store; later
  // ones are served from its snapshot until it is due again.
  double cold_overview_ms = 0;
  {
    httplib::Client client((*server)->address(), (*server)->port());
    client.set_read_timeout(60, 0);
    absl::Time start = absl::Now();
    httplib::Result result = client.Get("/api/overview");
    cold_overview_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    if (!result || result->status != 200)
      Check(absl::UnknownError("overview"), "first overview");
  }

  // A first round of two requests per client, timed apart: fresh
  // connections, server threads and, on Postgres, fresh server processes
  // (whose first statements parse against empty catalog caches).
  Round warmup = SendRound(
      **server, Requests(**engine, 2 * options.concurrency, /*seed=*/7),
      options.concurrency);
  std::sort(warmup.latencies.begin(), warmup.latencies.end());
  Round round = SendRound(**server, paths, options.concurrency);
  std::vector<double>& latencies = round.latencies;
  const double seconds = round.seconds;
  const int errors = warmup.errors + round.errors;
  // Per kind, to stderr: where the time goes.
  for (const char* kind : {"/api/overview", "/api/runs?", "/api/runs/"}) {
    std::vector<double> of_kind;
    for (size_t i = 0; i < paths.size(); ++i) {
      bool is_list =
          absl::StartsWith(paths[i], "/api/runs?") || paths[i] == "/api/runs";
      bool match = std::string_view(kind) == "/api/runs?"
                       ? is_list
                       : absl::StartsWith(paths[i], kind) && !is_list;
      if (match) of_kind.push_back(latencies[i]);
    }
    if (of_kind.empty()) continue;
    std::sort(of_kind.begin(), of_kind.end());
    std::fprintf(stderr, "%-14s n=%zu p50_ms=%.1f p99_ms=%.1f\n", kind,
                 of_kind.size(), Percentile(of_kind, 0.5),
                 Percentile(of_kind, 0.99));
  }
  std::sort(latencies.begin(), latencies.end());
  std::string name = options.backend.substr(0, options.backend.find(':'));
  if (name == "postgresql") name = "postgres";
  std::printf(
      "RESULT workload=dashboard_api backend=%s requests=%zu concurrency=%d "
      "runs=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f requests_per_s=%.0f "
      "cold_overview_ms=%.0f warmup_p99_ms=%.1f errors=%d\n",
      name.c_str(), paths.size(), options.concurrency, options.runs,
      Percentile(latencies, 0.50), Percentile(latencies, 0.99),
      latencies.back(), static_cast<double>(paths.size()) / seconds,
      cold_overview_ms, Percentile(warmup.latencies, 0.99), errors);
  return errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace sluice::bench

int main(int argc, char** argv) {
  sluice::bench::Options options;
  if (!sluice::bench::ParseArgs(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: sluice-dashboard-bench [--backend URL] [--runs N>=10] "
                 "[--requests N] [--concurrency C]\n");
    return 2;
  }
  return sluice::bench::Main(options);
}
