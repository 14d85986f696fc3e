// HostTransaction: the engine's enqueue calls inside a host's transaction.
// They run EnqueueItems (enqueue.cc), the one implementation of enqueuing,
// on the borrowed backend; only where it commits and what follows differ.
#include "sluice/host_transaction.h"

#include <utility>

#include "engine_impl.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {

struct HostTransaction::Pending {
  HostScope scope;
};

HostTransaction::HostTransaction(Engine& engine, Backend& borrowed)
    : engine_(&engine),
      borrowed_(&borrowed),
      pending_(std::make_unique<Pending>()) {
  pending_->scope.backend = borrowed_;
}

HostTransaction::HostTransaction(HostTransaction&&) noexcept = default;
HostTransaction& HostTransaction::operator=(HostTransaction&&) noexcept =
    default;
HostTransaction::~HostTransaction() = default;

HostTransaction Engine::WithHostTransaction(Backend& borrowed) {
  return HostTransaction(*this, borrowed);
}

absl::Status HostTransaction::CheckBackend() const {
  const Backend& own = engine_->backend();
  if (borrowed_->name() != own.name() ||
      borrowed_->interface_version() != own.interface_version()) {
    return absl::InvalidArgumentError(
        StrCat("host transaction: the borrowed backend is \"",
               borrowed_->name(), "\" but the engine's is \"", own.name(),
               "\"; borrow the host's connection to the engine's database"));
  }
  return absl::OkStatus();
}

absl::StatusOr<EnqueueResult> HostTransaction::Enqueue(
    const Job& job, const Json& payload, const EnqueueOptions& options) {
  SLUICE_RETURN_IF_ERROR(CheckBackend());
  Engine::EnqueueItem item{payload, options};
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<EnqueueResult> results,
      engine_->impl().EnqueueItems(
          job.flow().slug(), Engine::Impl::Target::kSlug,
          /*as_job=*/true, std::span(&item, 1), &pending_->scope));
  return results.front();
}

absl::StatusOr<EnqueueResult> HostTransaction::Enqueue(
    std::string_view job_name, const Json& payload,
    const EnqueueOptions& options) {
  Engine::EnqueueItem item{payload, options};
  SLUICE_ASSIGN_OR_RETURN(std::vector<EnqueueResult> results,
                          EnqueueMany(job_name, std::span(&item, 1)));
  return results.front();
}

absl::StatusOr<std::vector<EnqueueResult>> HostTransaction::EnqueueMany(
    std::string_view job_name, std::span<const Engine::EnqueueItem> items) {
  SLUICE_RETURN_IF_ERROR(CheckBackend());
  return engine_->impl().EnqueueItems(job_name, Engine::Impl::Target::kAlias,
                                      /*as_job=*/true, items, &pending_->scope);
}

absl::StatusOr<EnqueueResult> HostTransaction::StartRun(
    std::string_view flow_slug, const Json& input,
    const EnqueueOptions& options) {
  SLUICE_RETURN_IF_ERROR(CheckBackend());
  Engine::EnqueueItem item{input, options};
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<EnqueueResult> results,
      engine_->impl().EnqueueItems(flow_slug, Engine::Impl::Target::kAlias,
                                   /*as_job=*/false, std::span(&item, 1),
                                   &pending_->scope));
  return results.front();
}

void HostTransaction::Committed() {
  engine_->impl().PublishCommitted(
      std::exchange(pending_->scope.deferred, TransactionEffects{}));
}

void HostTransaction::RolledBack() {
  pending_->scope.deferred = TransactionEffects{};
}

}  // namespace sluice
