// `sluice versions`, `sluice activate` and `sluice coverage`: the rollout
// commands (docs/operations.md, "Rolling out a new version").
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli.h"
#include "sluice/internal/strings.h"

namespace sluice::cli {
namespace {

Json RunCountsJson(const RunCounts& runs) {
  return boost::json::object{{"started", runs.started},
                             {"completed", runs.completed},
                             {"failed", runs.failed},
                             {"cancelled", runs.cancelled}};
}

// Lists each version of ALIAS, oldest first; `*` marks the active one.
int Versions(const std::string& url, const std::string& alias, bool json) {
  absl::StatusOr<Session> session = OpenSession(url);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<std::vector<VersionInfo>> versions =
      session->engine->ListVersions(alias);
  if (!versions.ok()) return Fail(versions.status());
  if (json) {
    boost::json::array list;
    for (const VersionInfo& v : *versions) {
      list.push_back(boost::json::object{{"slug", v.slug},
                                         {"active", v.active},
                                         {"created_at", TimeJson(v.created_at)},
                                         {"runs", RunCountsJson(v.runs)}});
    }
    PrintJson(
        boost::json::object{{"alias", alias}, {"versions", std::move(list)}});
    return kExitOk;
  }
  std::printf("alias %s: %zu version%s\n", alias.c_str(), versions->size(),
              versions->size() == 1 ? "" : "s");
  std::printf("  %-6s %-32s %-19s %8s %9s %6s %9s\n", "ACTIVE", "SLUG",
              "CREATED (UTC)", "STARTED", "COMPLETED", "FAILED", "CANCELLED");
  for (const VersionInfo& v : *versions) {
    std::printf("  %-6s %-32s %-19s %8lld %9lld %6lld %9lld\n",
                v.active ? "*" : "", v.slug.c_str(),
                UtcTime(v.created_at).c_str(),
                static_cast<long long>(v.runs.started),
                static_cast<long long>(v.runs.completed),
                static_cast<long long>(v.runs.failed),
                static_cast<long long>(v.runs.cancelled));
  }
  return kExitOk;
}

// Makes SLUG the active version of ALIAS if CURRENT is active now.
int Activate(const std::string& url, const std::string& alias,
             const std::string& slug, const std::string& expected) {
  absl::StatusOr<Session> session = OpenSession(url);
  if (!session.ok()) return Fail(session.status());
  absl::Status activated = session->engine->Activate(alias, slug, expected);
  if (!activated.ok()) {
    Fail(activated);
    if (activated.code() == absl::StatusCode::kFailedPrecondition) {
      std::fprintf(stderr,
                   "sluice: `sluice versions %s` shows the versions and the "
                   "active one (the value for --expect)\n",
                   alias.c_str());
    }
    return kExitError;
  }
  std::printf("alias %s: %s is active (was %s)\n", alias.c_str(), slug.c_str(),
              expected.c_str());
  return kExitOk;
}

Json CoverageJson(const std::vector<QueueCoverage>& coverage) {
  boost::json::array queues;
  for (const QueueCoverage& q : coverage) {
    boost::json::array steps;
    for (const StepCoverage& s : q.steps) {
      steps.push_back(boost::json::object{{"alias", s.alias},
                                          {"flow", s.flow_slug},
                                          {"step", s.step_slug},
                                          {"live_workers", s.live_workers}});
    }
    queues.push_back(boost::json::object{{"queue", q.queue},
                                         {"live_workers", q.live_workers},
                                         {"steps", std::move(steps)}});
  }
  return queues;
}

// Prints each queue of the active versions and each (flow, step) on it with
// its live workers; every step nobody serves gets an UNSERVED line. Exits
// kExitUnserved if there is one.
int Coverage(const std::string& url, const std::string& liveness_text,
             bool json) {
  absl::StatusOr<absl::Duration> liveness = ParseAge(liveness_text);
  if (!liveness.ok()) return Fail(liveness.status());
  absl::StatusOr<Session> session = OpenSession(url);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<std::vector<QueueCoverage>> coverage =
      session->engine->Coverage(*liveness);
  if (!coverage.ok()) return Fail(coverage.status());
  int steps = 0;
  int unserved = 0;
  for (const QueueCoverage& q : *coverage) {
    steps += static_cast<int>(q.steps.size());
    unserved += static_cast<int>(q.Unserved().size());
  }
  int exit_code = unserved == 0 ? kExitOk : kExitUnserved;
  if (json) {
    PrintJson(boost::json::object{{"queues", CoverageJson(*coverage)},
                                  {"steps", steps},
                                  {"unserved", unserved}});
    return exit_code;
  }
  if (coverage->empty()) {
    std::printf("no active versions: nothing to serve\n");
    return kExitOk;
  }
  for (const QueueCoverage& q : *coverage) {
    std::printf("queue %s  live_workers=%d%s\n", q.queue.c_str(),
                q.live_workers,
                q.live_workers == 0 ? "  UNSERVED (no live worker)" : "");
    for (const StepCoverage& s : q.steps) {
      std::printf("  %-8s %s.%s  alias=%s  live_workers=%d\n",
                  s.live_workers > 0 ? "served" : "UNSERVED",
                  s.flow_slug.c_str(), s.step_slug.c_str(), s.alias.c_str(),
                  s.live_workers);
    }
  }
  if (unserved == 0) {
    std::printf("all %d step%s on %zu queue%s served\n", steps,
                steps == 1 ? "" : "s", coverage->size(),
                coverage->size() == 1 ? " is" : "s are");
  } else {
    std::printf("UNSERVED: %d of %d steps have no live worker\n", unserved,
                steps);
  }
  return exit_code;
}

}  // namespace

void AddVersionCommands(CLI::App& app, Outcome& outcome) {
  struct VersionArgs {
    std::string url, alias, slug, expect;
    std::string liveness = "30s";
    bool json = false;
  };
  auto args = std::make_shared<VersionArgs>();

  CLI::App* versions = app.add_subcommand(
      "versions",
      "List the versions of an alias, oldest first, with their runs; * marks "
      "the active one");
  AddUrl(*versions, args->url);
  versions->add_option("ALIAS", args->alias, "the alias")->required();
  AddJsonFlag(*versions, args->json);
  versions->callback([&outcome, args] {
    outcome.exit_code = Versions(args->url, args->alias, args->json);
  });

  CLI::App* activate = app.add_subcommand(
      "activate",
      "Make SLUG the active version of ALIAS if CURRENT is active now "
      "(compare-and-swap)");
  AddUrl(*activate, args->url);
  activate->add_option("ALIAS", args->alias, "the alias")->required();
  activate->add_option("SLUG", args->slug, "the version to activate")
      ->required();
  activate
      ->add_option("--expect", args->expect,
                   "CURRENT: the slug that is active now (see `sluice "
                   "versions ALIAS`)")
      ->required();
  activate->callback([&outcome, args] {
    outcome.exit_code =
        Activate(args->url, args->alias, args->slug, args->expect);
  });

  CLI::App* coverage = app.add_subcommand(
      "coverage",
      "List each queue of the active versions with the live workers of each "
      "step (exit 3 if a step has none)");
  AddUrl(*coverage, args->url);
  coverage
      ->add_option("--liveness", args->liveness,
                   "a worker is live if it heartbeated within this long")
      ->check(AgeValidator())
      ->capture_default_str();
  AddJsonFlag(*coverage, args->json);
  coverage->callback([&outcome, args] {
    outcome.exit_code = Coverage(args->url, args->liveness, args->json);
  });
}

}  // namespace sluice::cli
