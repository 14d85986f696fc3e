// `sluice status`: every registered queue with its task counts, how long its
// oldest waiting task has waited, whether it is paused, and its live workers.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "sluice/internal/strings.h"

namespace sluice::cli {
namespace {

struct StatusArgs {
  std::string url;
  std::string liveness = "30s";
  bool json = false;
};

// The oldest waiting task's wait, or nullopt when none waits.
std::optional<absl::Duration> OldestWait(const QueueCounts& counts,
                                         absl::Time now) {
  if (!counts.oldest_waiting_since) return std::nullopt;
  return std::max(now - *counts.oldest_waiting_since, absl::ZeroDuration());
}

Json QueueJson(const QueueStatus& q, absl::Time now) {
  const QueueCounts& c = q.state.counts;
  std::optional<absl::Duration> wait = OldestWait(c, now);
  return boost::json::object{
      {"queue", q.state.queue},
      {"paused", q.state.paused},
      {"waiting", c.waiting},
      {"delayed", c.delayed},
      {"active", c.active},
      {"completed", c.completed},
      {"failed", c.failed},
      {"cancelled", c.cancelled},
      {"skipped", c.skipped},
      {"oldest_waiting_since", TimeJson(c.oldest_waiting_since)},
      {"oldest_waiting_seconds",
       wait ? Json(absl::ToDoubleSeconds(*wait)) : Json(nullptr)},
      {"live_workers", q.live_workers}};
}

int Status(const StatusArgs& args) {
  absl::StatusOr<absl::Duration> liveness = ParseAge(args.liveness);
  if (!liveness.ok()) return Fail(liveness.status());
  absl::StatusOr<Session> session = OpenSession(args.url);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<std::vector<QueueStatus>> queues =
      session->engine->ListQueueStatus(*liveness);
  if (!queues.ok()) return Fail(queues.status());
  absl::Time now = session->engine->clock().Now();
  if (args.json) {
    boost::json::array list;
    for (const QueueStatus& q : *queues) list.push_back(QueueJson(q, now));
    PrintJson(boost::json::object{{"queues", std::move(list)}});
    return kExitOk;
  }
  if (queues->empty()) {
    std::printf("no queues: deploy a flow or job first\n");
    return kExitOk;
  }
  std::printf("%-32s %8s %8s %8s %8s %8s %-7s %s\n", "QUEUE", "WAITING",
              "DELAYED", "ACTIVE", "FAILED", "OLDEST", "PAUSED", "WORKERS");
  for (const QueueStatus& q : *queues) {
    const QueueCounts& c = q.state.counts;
    std::optional<absl::Duration> wait = OldestWait(c, now);
    std::printf(
        "%-32s %8lld %8lld %8lld %8lld %8s %-7s %d\n", q.state.queue.c_str(),
        static_cast<long long>(c.waiting), static_cast<long long>(c.delayed),
        static_cast<long long>(c.active), static_cast<long long>(c.failed),
        wait ? ShortAge(*wait).c_str() : "-", q.state.paused ? "paused" : "no",
        q.live_workers);
  }
  return kExitOk;
}

}  // namespace

void AddStatusCommand(CLI::App& app, Outcome& outcome) {
  auto args = std::make_shared<StatusArgs>();
  CLI::App* status = app.add_subcommand(
      "status",
      "List every queue: tasks waiting, delayed, active and failed, the "
      "oldest waiting task's age, paused, live workers");
  AddUrl(*status, args->url);
  status
      ->add_option("--liveness", args->liveness,
                   "a worker is live if it heartbeated within this long")
      ->check(AgeValidator())
      ->capture_default_str();
  AddJsonFlag(*status, args->json);
  status->callback([&outcome, args] { outcome.exit_code = Status(*args); });
}

}  // namespace sluice::cli
