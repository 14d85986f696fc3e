// `sluice prune`: deletes ended runs older than an age, a batch per
// transaction, with a progress bar on a terminal and a plain line per batch
// otherwise (logs, pipes).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"
#include "sluice/internal/strings.h"

namespace sluice::cli {
namespace {

struct PruneArgs {
  std::string url;
  std::string older_than;
  int batch = 1000;
  bool dry_run = false;
  bool json = false;
};

// "[##########----------]  50% 500/1000 runs", redrawn in place.
void DrawBar(int64_t done, int64_t total) {
  constexpr int kWidth = 30;
  int64_t shown_total = std::max(total, done);
  int percent =
      shown_total == 0 ? 100 : static_cast<int>(done * 100 / shown_total);
  int filled = percent * kWidth / 100;
  std::string bar(filled, '#');
  bar.append(kWidth - filled, '-');
  std::printf("\r[%s] %3d%% %lld/%lld runs", bar.c_str(), percent,
              static_cast<long long>(done),
              static_cast<long long>(shown_total));
  std::fflush(stdout);
}

int Prune(const PruneArgs& args) {
  absl::StatusOr<absl::Duration> age = ParseAge(args.older_than);
  if (!age.ok()) return Fail(age.status());
  absl::StatusOr<Session> session = OpenSession(args.url);
  if (!session.ok()) return Fail(session.status());
  Engine& engine = *session->engine;
  absl::Time cutoff = engine.clock().Now() - *age;
  absl::StatusOr<int64_t> total = engine.CountPrunableRuns(cutoff);
  if (!total.ok()) return Fail(total.status());
  if (args.dry_run) {
    if (args.json) {
      PrintJson(boost::json::object{{"finished_before", TimeJson(cutoff)},
                                    {"would_prune", *total},
                                    {"pruned", 0}});
    } else {
      std::printf("%lld runs finished before %s UTC would be pruned\n",
                  static_cast<long long>(*total), UtcTime(cutoff).c_str());
    }
    return kExitOk;
  }
  const bool bar = !args.json && isatty(STDOUT_FILENO);
  int64_t pruned = 0;
  if (bar) DrawBar(0, *total);
  for (;;) {
    absl::StatusOr<int> deleted = engine.PruneRuns(cutoff, args.batch);
    if (!deleted.ok()) {
      if (bar) std::printf("\n");
      std::fflush(stdout);
      return Fail(deleted.status());
    }
    pruned += *deleted;
    if (bar) {
      DrawBar(pruned, *total);
    } else if (!args.json && *deleted > 0) {
      std::printf("pruned %lld of %lld runs\n", static_cast<long long>(pruned),
                  static_cast<long long>(std::max(*total, pruned)));
      std::fflush(stdout);
    }
    if (*deleted < args.batch) break;
  }
  if (args.json) {
    PrintJson(boost::json::object{{"finished_before", TimeJson(cutoff)},
                                  {"pruned", pruned}});
  } else {
    if (bar) std::printf("\n");
    std::printf("pruned %lld runs that finished before %s UTC\n",
                static_cast<long long>(pruned), UtcTime(cutoff).c_str());
  }
  return kExitOk;
}

}  // namespace

void AddPruneCommand(CLI::App& app, Outcome& outcome) {
  auto args = std::make_shared<PruneArgs>();
  CLI::App* prune = app.add_subcommand(
      "prune",
      "Delete ended runs (completed, failed, cancelled) that finished longer "
      "ago than --older-than, with their tasks, attempts and messages");
  AddUrl(*prune, args->url);
  prune
      ->add_option("--older-than", args->older_than,
                   "AGE: 30d, 2w, 12h, 90m, 1h30m")
      ->required()
      ->check(AgeValidator());
  prune->add_option("--batch", args->batch, "runs deleted per transaction")
      ->check(CLI::Range(1, 10'000))
      ->capture_default_str();
  prune->add_flag("--dry-run", args->dry_run,
                  "count the runs it would delete; delete nothing");
  AddJsonFlag(*prune, args->json);
  prune->callback([&outcome, args] { outcome.exit_code = Prune(*args); });
}

}  // namespace sluice::cli
