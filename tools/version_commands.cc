// `sluice versions`, `sluice activate` and `sluice coverage`: the rollout
// commands (docs/operations.md, "Rolling out a new version").
#include <cstdio>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cli.h"
#include "sluice/internal/strings.h"

namespace sluice::cli {
namespace {

std::string UtcTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", t, absl::UTCTimeZone());
}

}  // namespace

// Lists each version of ALIAS, oldest first; `*` marks the active one.
int VersionsCommand(const Args& args) {
  if (args.positional.size() != 1) {
    return Fail(absl::InvalidArgumentError("versions needs one ALIAS"));
  }
  const std::string& alias = args.positional[0];
  absl::StatusOr<Session> session = OpenSession(args);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<std::vector<VersionInfo>> versions =
      session->engine->ListVersions(alias);
  if (!versions.ok()) return Fail(versions.status());
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
  return 0;
}

// Makes SLUG the active version of ALIAS if CURRENT is active now.
int ActivateCommand(const Args& args) {
  if (args.positional.size() != 2 || !args.options.contains("expect")) {
    return Fail(absl::InvalidArgumentError(
        "activate needs ALIAS SLUG --expect CURRENT (CURRENT: the slug that "
        "is active now; see `sluice versions ALIAS`)"));
  }
  const std::string& alias = args.positional[0];
  const std::string& slug = args.positional[1];
  const std::string expected = args.Option("expect");
  absl::StatusOr<Session> session = OpenSession(args);
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
  return 0;
}

// Prints each queue of the active versions and each (flow, step) on it with
// its live workers; every step nobody serves gets an UNSERVED line. Exits
// kExitUnserved if there is one.
int CoverageCommand(const Args& args) {
  absl::Duration liveness = absl::Seconds(30);
  if (args.options.contains("liveness") &&
      (!absl::ParseDuration(args.Option("liveness"), &liveness) ||
       liveness <= absl::ZeroDuration())) {
    return Fail(absl::InvalidArgumentError(
        StrCat("--liveness \"", args.Option("liveness"),
               "\" is not a positive duration (e.g. 30s, 2m)")));
  }
  absl::StatusOr<Session> session = OpenSession(args);
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<std::vector<QueueCoverage>> coverage =
      session->engine->Coverage(liveness);
  if (!coverage.ok()) return Fail(coverage.status());
  if (coverage->empty()) {
    std::printf("no active versions: nothing to serve\n");
    return 0;
  }
  int steps = 0;
  int unserved = 0;
  for (const QueueCoverage& q : *coverage) {
    std::printf("queue %s  live_workers=%d%s\n", q.queue.c_str(),
                q.live_workers,
                q.live_workers == 0 ? "  UNSERVED (no live worker)" : "");
    for (const StepCoverage& s : q.steps) {
      ++steps;
      bool served = s.live_workers > 0;
      unserved += !served;
      std::printf("  %-8s %s.%s  alias=%s  live_workers=%d\n",
                  served ? "served" : "UNSERVED", s.flow_slug.c_str(),
                  s.step_slug.c_str(), s.alias.c_str(), s.live_workers);
    }
  }
  if (unserved == 0) {
    std::printf("all %d step%s on %zu queue%s served\n", steps,
                steps == 1 ? "" : "s", coverage->size(),
                coverage->size() == 1 ? " is" : "s are");
    return 0;
  }
  std::printf("UNSERVED: %d of %d steps have no live worker\n", unserved,
              steps);
  return kExitUnserved;
}

}  // namespace sluice::cli
