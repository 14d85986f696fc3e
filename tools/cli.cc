// Shared parts of the `sluice` command-line program.
#include "cli.h"

#include <cstdio>
#include <utility>

#include "sluice/backends.h"

namespace sluice::cli {

std::string Args::Option(const std::string& name,
                         const std::string& fallback) const {
  auto it = options.find(name);
  return it == options.end() ? fallback : it->second;
}

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args args;
  if (argc < 2) return absl::InvalidArgumentError("no command given");
  args.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) == 0) {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError("option " + a + " needs a value");
      }
      args.options[a.substr(2)] = argv[++i];
    } else {
      args.positional.push_back(a);
    }
  }
  return args;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "sluice: %s\n", status.ToString().c_str());
  return kExitError;
}

absl::StatusOr<std::unique_ptr<Backend>> BackendFrom(const Args& args,
                                                     std::string fallback) {
  std::string url = args.Option("backend", fallback);
  if (url.empty()) {
    return absl::InvalidArgumentError("--backend URL is required");
  }
  return OpenBackend(url);
}

absl::StatusOr<Session> OpenSession(const Args& args) {
  Session session;
  absl::StatusOr<std::unique_ptr<Backend>> backend = BackendFrom(args, "");
  if (!backend.ok()) return backend.status();
  session.backend = std::move(*backend);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(*session.backend);
  if (!engine.ok()) return engine.status();
  session.engine = std::move(*engine);
  return session;
}

}  // namespace sluice::cli
