// The flow catalog the dashboard's handlers read, shared between requests.
// A deployed version never changes (its slug names one definition), so a
// catalog read a moment ago is as good as a new one, except for versions
// deployed since. Reading it for every request cost each run list and run
// detail a second store transaction (docs/decisions/0038-dashboard.md).
#ifndef SLUICE_DASHBOARD_CATALOG_CACHE_H_
#define SLUICE_DASHBOARD_CATALOG_CACHE_H_

#include <memory>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dashboard/api_internal.h"
#include "sluice/engine.h"

namespace sluice::dashboard {

class CatalogCache {
 public:
  // A catalog is served for this long; versions deployed since show
  // within it, or at once when a request needs them (below).
  static constexpr absl::Duration kMaxAge = absl::Seconds(1);
  // How far another host's clock may run behind this one's: a run that
  // began up to this long before the catalog was read may still name a
  // version the read missed.
  static constexpr absl::Duration kClockSkew = absl::Seconds(1);
  // A name the catalog lacks reads it again if it is older than this:
  // often enough that a flow just deployed is found, seldom enough that a
  // mistyped filter does not read the store on every request.
  static constexpr absl::Duration kMissAge = absl::Milliseconds(100);

  explicit CatalogCache(Engine& engine) : engine_(engine) {}

  // A catalog read at most kMaxAge ago.
  absl::StatusOr<std::shared_ptr<const FlowCatalog>> Get();
  // As Get, read again first if one of `runs` names a version the catalog
  // lacks and began after it was read (less kClockSkew): that version may
  // have been deployed since. A run of a version no longer stored began
  // before, and costs no read.
  absl::StatusOr<std::shared_ptr<const FlowCatalog>> GetFor(
      std::span<const RunRecord> runs);
  // As Get, read again first (if older than kMissAge) when it has no
  // flow version or alias called `name`.
  absl::StatusOr<std::shared_ptr<const FlowCatalog>> GetNamed(
      std::string_view name);
  // A catalog read after this call began (the flows page).
  absl::StatusOr<std::shared_ptr<const FlowCatalog>> Fresh();

 private:
  // The cached catalog if it was read at or after `not_before`, else a new
  // read. One read at a time: a request that finds one under way waits for
  // it and takes its result if that is recent enough.
  absl::StatusOr<std::shared_ptr<const FlowCatalog>> ReadSince(
      absl::Time not_before);

  Engine& engine_;
  absl::Mutex mu_;
  std::shared_ptr<const FlowCatalog> latest_ ABSL_GUARDED_BY(mu_);
  absl::Time read_at_ ABSL_GUARDED_BY(mu_);  // real time its read began
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sluice::dashboard

#endif  // SLUICE_DASHBOARD_CATALOG_CACHE_H_
