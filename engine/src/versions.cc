// Versions and aliases (see DESIGN.md "Aliases").
#include "absl/status/status.h"
#include "sluice/engine.h"

namespace sluice {

absl::Status Engine::Activate(std::string_view alias, std::string_view slug,
                              std::string_view expected_current) {
  (void)alias;
  (void)slug;
  (void)expected_current;
  return absl::UnimplementedError("Activate");
}

absl::StatusOr<std::vector<VersionInfo>> Engine::ListVersions(
    std::string_view alias) {
  (void)alias;
  return absl::UnimplementedError("ListVersions");
}

absl::Status Engine::DeleteVersion(std::string_view slug) {
  (void)slug;
  return absl::UnimplementedError("DeleteVersion");
}

absl::StatusOr<EnqueueResult> Engine::StartRunBySlug(
    std::string_view slug, const Json& input, const EnqueueOptions& options) {
  (void)slug;
  (void)input;
  (void)options;
  return absl::UnimplementedError("StartRunBySlug");
}

}  // namespace sluice
