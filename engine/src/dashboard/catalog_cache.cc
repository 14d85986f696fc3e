#include "dashboard/catalog_cache.h"

#include <utility>

namespace sluice::dashboard {
namespace {

bool Names(const FlowCatalog& catalog, std::string_view name) {
  if (catalog.Find(name) != nullptr) return true;
  for (const auto& [slug, entry] : catalog.flows) {
    if (entry.alias == name) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const FlowCatalog>> CatalogCache::Get() {
  return ReadSince(absl::Now() - kMaxAge);
}

absl::StatusOr<std::shared_ptr<const FlowCatalog>> CatalogCache::GetFor(
    std::span<const RunRecord> runs) {
  absl::StatusOr<std::shared_ptr<const FlowCatalog>> catalog = Get();
  if (!catalog.ok()) return catalog;
  for (const RunRecord& run : runs) {
    if ((*catalog)->Find(run.flow_slug) == nullptr &&
        run.started_at >= (*catalog)->read_at - kClockSkew) {
      return Fresh();
    }
  }
  return catalog;
}

absl::StatusOr<std::shared_ptr<const FlowCatalog>> CatalogCache::GetNamed(
    std::string_view name) {
  absl::StatusOr<std::shared_ptr<const FlowCatalog>> catalog = Get();
  if (!catalog.ok() || name.empty() || Names(**catalog, name)) return catalog;
  return ReadSince(absl::Now() - kMissAge);
}

absl::StatusOr<std::shared_ptr<const FlowCatalog>> CatalogCache::Fresh() {
  return ReadSince(absl::Now());
}

absl::StatusOr<std::shared_ptr<const FlowCatalog>> CatalogCache::ReadSince(
    absl::Time not_before) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](bool* reading) { return !*reading; }, &reading_));
  if (latest_ != nullptr && read_at_ >= not_before) return latest_;
  reading_ = true;
  mu_.Unlock();
  const absl::Time start = absl::Now();
  absl::StatusOr<FlowCatalog> read = FlowCatalog::Read(engine_);
  mu_.Lock();
  reading_ = false;
  if (!read.ok()) return read.status();
  latest_ = std::make_shared<const FlowCatalog>(*std::move(read));
  read_at_ = start;
  return latest_;
}

}  // namespace sluice::dashboard
