// Versions and aliases (see DESIGN.md "Aliases" and
// docs/decisions/0023-versions.md).
//
// Every call that changes an alias or its membership takes the alias lock,
// then the slug lock: Deploy (deploy.cc), Activate, DeleteVersion. Starting
// a run reads the alias row once, without a lock, in the transaction that
// creates the run, so the run pins whichever version was active then.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine_impl.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

absl::Status UnknownAlias(std::string_view alias) {
  return absl::NotFoundError(
      StrCat("alias \"", alias,
             "\" does not exist; deploy a flow with that alias (or slug) "
             "first"));
}

// The flows that are versions of `alias`, oldest first.
absl::StatusOr<std::vector<FlowRecord>> MembersOf(Transaction& tx,
                                                  std::string_view alias) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<FlowRecord> flows, tx.ListFlows());
  std::vector<FlowRecord> members;
  for (FlowRecord& flow : flows) {
    if (AliasOf(flow) == alias) members.push_back(std::move(flow));
  }
  std::sort(members.begin(), members.end(),
            [](const FlowRecord& a, const FlowRecord& b) {
              if (a.created_at != b.created_at) {
                return a.created_at < b.created_at;
              }
              return a.slug < b.slug;
            });
  return members;
}

}  // namespace

absl::StatusOr<std::string> Engine::Impl::ResolveAlias(Transaction& tx,
                                                       std::string_view name,
                                                       std::string_view kind) {
  SLUICE_ASSIGN_OR_RETURN(std::optional<AliasRecord> alias, tx.GetAlias(name));
  if (alias) {
    absl::MutexLock lock(&flows_mu_);
    known_aliases_.insert_or_assign(alias->alias, alias->active_slug);
    return std::move(alias->active_slug);
  }
  // Never fall back to a slug of that name: say what it is instead.
  SLUICE_ASSIGN_OR_RETURN(std::optional<FlowRecord> flow, tx.GetFlow(name));
  // A flow that is its own alias but has no alias row (stored by a writer
  // that did not add one) is still that alias's one member.
  if (flow && AliasOf(*flow) == name) return std::string(name);
  if (flow) {
    return absl::NotFoundError(
        StrCat("\"", name, "\" is not an alias: it is a version of alias \"",
               AliasOf(*flow),
               "\"; start the alias, or pin this version "
               "with StartRunBySlug"));
  }
  return absl::NotFoundError(
      StrCat(kind, " \"", name, "\" is not deployed; deploy it (",
             kind == "job" ? "Engine::Deploy(job)" : "Engine::Deploy",
             ", or start a worker for it) first"));
}

std::optional<std::string> Engine::Impl::KnownAlias(std::string_view alias) {
  absl::MutexLock lock(&flows_mu_);
  auto it = known_aliases_.find(ToAbsl(alias));
  if (it == known_aliases_.end()) return std::nullopt;
  return it->second;
}

void Engine::Impl::ForgetAlias(std::string_view alias) {
  absl::MutexLock lock(&flows_mu_);
  known_aliases_.erase(ToAbsl(alias));
}

absl::StatusOr<std::string> Engine::Impl::PinAlias(
    Transaction& tx, std::string_view alias, std::string_view kind,
    std::optional<std::string_view> known) {
  if (!known) return ResolveAlias(tx, alias, kind);
  SLUICE_RETURN_IF_ERROR(tx.ExpectAlias(alias, *known));
  return std::string(*known);
}

absl::Status Engine::Activate(std::string_view alias, std::string_view slug,
                              std::string_view expected_current) {
  SLUICE_RETURN_IF_ERROR(ValidateSlug(alias, "alias"));
  SLUICE_RETURN_IF_ERROR(ValidateSlug(slug, "flow"));
  SLUICE_RETURN_IF_ERROR(ValidateSlug(expected_current, "expected flow"));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  // The alias lock makes this a compare-and-swap: concurrent activations
  // of one alias run one after another, each seeing the one before.
  SLUICE_RETURN_IF_ERROR(tx->LockAlias(alias));
  SLUICE_ASSIGN_OR_RETURN(std::optional<AliasRecord> current,
                          tx->GetAlias(alias));
  if (!current) return UnknownAlias(alias);
  SLUICE_ASSIGN_OR_RETURN(std::optional<FlowRecord> flow, tx->GetFlow(slug));
  if (!flow || AliasOf(*flow) != alias) {
    return absl::FailedPreconditionError(StrCat(
        "alias \"", alias, "\": flow \"", slug, "\" is not one of its versions",
        flow ? StrCat(" (it is a version of alias \"", AliasOf(*flow), "\")")
             : std::string(" (it is not deployed)"),
        "; deploy it with this alias first; nothing changed"));
  }
  if (current->active_slug != expected_current) {
    return absl::FailedPreconditionError(StrCat(
        "alias \"", alias, "\": the active version is \"", current->active_slug,
        "\", not the expected \"", expected_current,
        "\"; nothing changed (read the versions again and retry)"));
  }
  if (current->active_slug == slug) return absl::OkStatus();
  SLUICE_RETURN_IF_ERROR(tx->PutAlias(
      AliasRecord{std::string(alias), std::string(slug), impl_->Now()}));
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
  impl_->ForgetAlias(alias);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<VersionInfo>> Engine::ListVersions(
    std::string_view alias) {
  SLUICE_RETURN_IF_ERROR(ValidateSlug(alias, "alias"));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(std::optional<AliasRecord> current,
                          tx->GetAlias(alias));
  if (!current) return UnknownAlias(alias);
  SLUICE_ASSIGN_OR_RETURN(std::vector<FlowRecord> members,
                          MembersOf(*tx, alias));
  std::vector<VersionInfo> versions;
  versions.reserve(members.size());
  for (const FlowRecord& member : members) {
    VersionInfo info;
    info.slug = member.slug;
    info.active = member.slug == current->active_slug;
    info.created_at = member.created_at;
    SLUICE_ASSIGN_OR_RETURN(info.runs, tx->CountRuns(member.slug));
    versions.push_back(std::move(info));
  }
  return versions;
}

absl::Status Engine::DeleteVersion(std::string_view slug) {
  SLUICE_RETURN_IF_ERROR(ValidateSlug(slug, "flow"));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  // The alias is needed to lock it first; membership never changes, so an
  // unlocked read names the right one.
  SLUICE_ASSIGN_OR_RETURN(std::optional<FlowRecord> flow, tx->GetFlow(slug));
  if (!flow) {
    return absl::NotFoundError(StrCat("flow \"", slug, "\" is not deployed"));
  }
  std::string alias = AliasOf(*flow);
  SLUICE_RETURN_IF_ERROR(tx->LockAlias(alias));
  SLUICE_RETURN_IF_ERROR(tx->LockFlowSlug(slug));
  SLUICE_ASSIGN_OR_RETURN(flow, tx->GetFlow(slug));
  if (!flow) {
    return absl::NotFoundError(StrCat("flow \"", slug, "\" is not deployed"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::optional<AliasRecord> current,
                          tx->GetAlias(alias));
  if (current && current->active_slug == slug) {
    return absl::FailedPreconditionError(
        StrCat("flow \"", slug, "\" is the active version of alias \"", alias,
               "\"; activate another version (Engine::Activate) before "
               "deleting it; nothing changed"));
  }
  SLUICE_ASSIGN_OR_RETURN(RunCounts runs, tx->CountRuns(slug));
  if (runs.total() > 0) {
    return absl::FailedPreconditionError(
        StrCat("flow \"", slug, "\" has ", runs.total(), " runs (",
               runs.started, " started, ", runs.completed, " completed, ",
               runs.failed, " failed, ", runs.cancelled,
               " cancelled); a version with runs is kept: delete its runs "
               "(DeleteRun, PruneRuns) first; nothing changed"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<QueueRecord> queues, tx->ListQueues());
  for (const QueueRecord& queue : queues) {
    // Only the version's private queues: shared ones serve other flows.
    if (queue.owner_flow != slug) continue;
    SLUICE_RETURN_IF_ERROR(tx->DeleteQueue(queue.name).status());
  }
  SLUICE_RETURN_IF_ERROR(tx->DeleteFlow(slug).status());
  // The active version can't be deleted, so an alias with a row always
  // keeps a member; an alias row is never left without one.
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
  impl_->ForgetFlow(slug);
  return absl::OkStatus();
}

absl::StatusOr<EnqueueResult> Engine::StartRunBySlug(
    std::string_view slug, const Json& input, const EnqueueOptions& options) {
  EnqueueItem item{input, options};
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<EnqueueResult> results,
      impl_->EnqueueItems(slug, Impl::Target::kSlug, /*as_job=*/false,
                          std::span(&item, 1)));
  return results.front();
}

}  // namespace sluice
