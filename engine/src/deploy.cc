// Deploy: startup compilation under the alias and slug locks (see DESIGN.md
// "Startup compilation" and "Aliases", docs/decisions/0023-versions.md).
//
// Lock order: the alias, then the slug, as Activate and DeleteVersion.
// A new slug joins its alias for good; the first member of an alias
// activates it. A stored slug is verified, or, with development_recompile,
// recompiled: its runs are deleted and its generation bumped, which fences
// off the workers that deployed the older generation.
#include <memory>
#include <string>
#include <vector>

#include "compiled_flow.h"
#include "engine_impl.h"
#include "queue_registry.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

absl::Status CheckMembership(const Flow& flow, const FlowRecord& stored) {
  std::string stored_alias = AliasOf(stored);
  if (stored_alias == flow.alias()) return absl::OkStatus();
  return absl::FailedPreconditionError(StrCat(
      "flow \"", flow.slug(), "\" is a version of alias \"", stored_alias,
      "\" and can't move to alias \"", flow.alias(),
      "\" (a version's alias is fixed); deploy it under a new slug to add a "
      "version to \"",
      flow.alias(), "\""));
}

// Alias names and version slugs share one namespace where they could be
// confused: StartRun(name) always resolves an alias, so an alias named like
// another alias's version, or a version named like another alias, would
// start something its name does not say.
absl::Status CheckNames(Transaction& tx, const Flow& flow, bool alias_exists) {
  if (!alias_exists && flow.alias() != flow.slug()) {
    SLUICE_ASSIGN_OR_RETURN(std::optional<FlowRecord> same_name,
                            tx.GetFlow(flow.alias()));
    if (same_name && AliasOf(*same_name) != flow.alias()) {
      return absl::FailedPreconditionError(
          StrCat("flow \"", flow.slug(), "\": alias \"", flow.alias(),
                 "\" is the slug of a version of alias \"", AliasOf(*same_name),
                 "\"; choose another alias name"));
    }
  }
  if (flow.alias() != flow.slug()) {
    SLUICE_ASSIGN_OR_RETURN(std::optional<AliasRecord> same_name,
                            tx.GetAlias(flow.slug()));
    if (same_name) {
      return absl::FailedPreconditionError(
          StrCat("flow \"", flow.slug(), "\": \"", flow.slug(),
                 "\" is already an alias (its active version is \"",
                 same_name->active_slug,
                 "\"); choose another slug for this version of alias \"",
                 flow.alias(), "\""));
    }
  }
  return absl::OkStatus();
}

std::string MismatchError(const Flow& flow,
                          const std::vector<std::string>& differences) {
  std::string message =
      StrCat("flow \"", flow.slug(),
             "\" differs from the deployed flow of that slug; deploy the "
             "changed flow under a new slug. Differences:");
  for (const std::string& d : differences) StrAppend(&message, "\n- ", d);
  return message;
}

// Deletes every run of `slug` (development recompilation). Returns how many.
absl::StatusOr<int64_t> DeleteAllRuns(Transaction& tx, std::string_view slug) {
  constexpr int kBatch = 1000;
  int64_t deleted = 0;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(
        std::vector<RunRecord> runs,
        tx.ListRuns(RunQuery::OfFlow(slug, kBatch), Fields::kNoPayloads));
    if (runs.empty()) return deleted;
    SLUICE_RETURN_IF_ERROR(DeleteRunsAndKeys(tx, runs));
    deleted += static_cast<int64_t>(runs.size());
  }
}

}  // namespace

absl::StatusOr<Engine::Impl::Deployed> Engine::Impl::DeployFlow(
    const Flow& flow) {
  SLUICE_RETURN_IF_ERROR(flow.Validate());
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledFlow> compiled,
                          CompiledFlow::Compile(flow.shape()));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, Begin());
  SLUICE_RETURN_IF_ERROR(tx->LockAlias(flow.alias()));
  SLUICE_RETURN_IF_ERROR(tx->LockFlowSlug(flow.slug()));
  ForgetAlias(flow.alias());  // it may move; StartRun reads it again
  SLUICE_ASSIGN_OR_RETURN(std::optional<FlowRecord> stored,
                          tx->GetFlow(flow.slug()));
  SLUICE_ASSIGN_OR_RETURN(std::optional<AliasRecord> alias,
                          tx->GetAlias(flow.alias()));
  absl::Time now = Now();
  if (!stored) {
    SLUICE_RETURN_IF_ERROR(CheckNames(*tx, flow, alias.has_value()));
    SLUICE_RETURN_IF_ERROR(RegisterQueues(*tx, *compiled, now));
    SLUICE_RETURN_IF_ERROR(tx->InsertFlow(
        FlowRecord{flow.slug(), flow.shape().ToJson(), now, flow.alias(), 1}));
    // The first member activates an empty alias; later ones wait for
    // Activate.
    if (!alias) {
      SLUICE_RETURN_IF_ERROR(
          tx->PutAlias(AliasRecord{flow.alias(), flow.slug(), now}));
    }
    SLUICE_RETURN_IF_ERROR(Commit(*tx, {}));
    RememberFlow(compiled, 1);
    return Deployed{DeployOutcome::kCompiled, 1};
  }
  SLUICE_RETURN_IF_ERROR(CheckMembership(flow, *stored));
  SLUICE_ASSIGN_OR_RETURN(FlowShape stored_shape,
                          FlowShape::FromJson(stored->definition));
  std::vector<std::string> differences =
      flow.shape().DifferencesFrom(stored_shape);
  if (differences.empty()) {
    if (!alias) {
      // A member without an alias row (written before aliases, by a store
      // that did not add one): the alias starts with this version.
      SLUICE_RETURN_IF_ERROR(
          tx->PutAlias(AliasRecord{flow.alias(), flow.slug(), now}));
      SLUICE_RETURN_IF_ERROR(Commit(*tx, {}));
    }
    RememberFlow(compiled, stored->generation);
    return Deployed{DeployOutcome::kVerified, stored->generation};
  }
  if (!options_.development_recompile) {
    return absl::FailedPreconditionError(MismatchError(flow, differences));
  }
  // Development only: replace the shape. The old runs can't continue under
  // a different shape, so they go; the bumped generation fences the
  // workers that still run the old handlers.
  SLUICE_ASSIGN_OR_RETURN(int64_t deleted, DeleteAllRuns(*tx, flow.slug()));
  SLUICE_RETURN_IF_ERROR(RegisterQueues(*tx, *compiled, now));
  FlowRecord replaced = *stored;
  replaced.definition = flow.shape().ToJson();
  replaced.generation = stored->generation + 1;
  replaced.alias = flow.alias();
  SLUICE_RETURN_IF_ERROR(tx->UpdateFlow(replaced));
  if (!alias) {
    SLUICE_RETURN_IF_ERROR(
        tx->PutAlias(AliasRecord{flow.alias(), flow.slug(), now}));
  }
  SLUICE_RETURN_IF_ERROR(Commit(*tx, {}));
  RememberFlow(compiled, replaced.generation);
  Log(LogLevel::kWarning,
      StrCat("flow \"", flow.slug(),
             "\" recompiled with a changed shape (development_recompile): "
             "deleted ",
             deleted, " runs; generation ", replaced.generation,
             " now, and workers that deployed an older generation are "
             "refused claims"));
  return Deployed{DeployOutcome::kRecompiled, replaced.generation};
}

}  // namespace sluice
