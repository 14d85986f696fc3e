// Interface v5 (versions): flow updates and deletion, run counts per flow,
// aliases, and dropping a queue.
#include <string>
#include <utility>

#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_rows.h"
#include "sqlite_sql.h"
#include "sqlite_status.h"
#include "sqlite_tables.h"

namespace sluice::sqlite_internal {

// --- Flows -------------------------------------------------------------------

absl::StatusOr<bool> SqliteTables::DeleteFlow(std::string_view flow_slug) {
  SLUICE_ASSIGN_OR_RETURN(Statement remove,
                          Prepare(sql::kDeleteFlow, "DeleteFlow"));
  remove.BindText(1, flow_slug);
  SLUICE_RETURN_IF_ERROR(remove.Run());
  return remove.Changes() > 0;
}

absl::Status SqliteTables::UpdateFlow(const FlowRecord& flow) {
  SLUICE_ASSIGN_OR_RETURN(Statement update,
                          Prepare(sql::kUpdateFlow, "UpdateFlow"));
  update.BindText(1, flow.slug);
  BindJson(update, 2, flow.definition);
  update.BindInt(3, flow.generation);
  SLUICE_RETURN_IF_ERROR(update.Run());
  if (update.Changes() == 0) {
    return absl::NotFoundError(
        StrCat("UpdateFlow: flow \"", flow.slug, "\" does not exist"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RunCounts> SqliteTables::CountRuns(std::string_view flow_slug) {
  SLUICE_ASSIGN_OR_RETURN(Statement count,
                          Prepare(sql::kCountRuns, "CountRuns"));
  count.BindText(1, flow_slug);
  SLUICE_ASSIGN_OR_RETURN(bool row, count.Step());
  if (!row) return absl::InternalError("CountRuns: the count returned no row");
  return RunCounts{.started = count.Int(0),
                   .completed = count.Int(1),
                   .failed = count.Int(2),
                   .cancelled = count.Int(3)};
}

// --- Aliases
// -------------------------------------------------------------------

absl::StatusOr<std::optional<AliasRecord>> SqliteTables::GetAlias(
    std::string_view alias) {
  SLUICE_ASSIGN_OR_RETURN(Statement get, Prepare(sql::kGetAlias, "GetAlias"));
  get.BindText(1, alias);
  SLUICE_ASSIGN_OR_RETURN(bool found, get.Step());
  if (!found) return std::nullopt;
  return ReadAlias(get);
}

absl::Status SqliteTables::ExpectAlias(std::string_view alias,
                                       std::string_view active_slug) {
  SLUICE_ASSIGN_OR_RETURN(std::optional<AliasRecord> found, GetAlias(alias));
  if (found && found->active_slug == active_slug) return absl::OkStatus();
  return absl::NotFoundError(StrCat("ExpectAlias: alias \"", alias,
                                    "\" at version \"", active_slug,
                                    "\" does not exist"));
}

absl::Status SqliteTables::PutAlias(const AliasRecord& alias) {
  SLUICE_ASSIGN_OR_RETURN(Statement put, Prepare(sql::kPutAlias, "PutAlias"));
  put.BindText(1, alias.alias);
  put.BindText(2, alias.active_slug);
  put.BindTime(3, alias.updated_at);
  return put.Run();
}

absl::StatusOr<std::vector<AliasRecord>> SqliteTables::ListAliases() {
  SLUICE_ASSIGN_OR_RETURN(Statement list,
                          Prepare(sql::kListAliases, "ListAliases"));
  std::vector<AliasRecord> aliases;
  while (true) {
    SLUICE_ASSIGN_OR_RETURN(bool row, list.Step());
    if (!row) return aliases;
    aliases.push_back(ReadAlias(list));
  }
}

// --- Queues
// --------------------------------------------------------------------

absl::StatusOr<bool> SqliteTables::DeleteQueue(std::string_view name) {
  // Messages of a name that is not registered can't exist (sending needs the
  // registry row), so the deletes are no-ops then; the registry row's count
  // is the answer.
  for (std::string_view messages :
       {sql::kDeleteQueueMessages, sql::kDeleteQueueArchive}) {
    SLUICE_ASSIGN_OR_RETURN(Statement remove, Prepare(messages, "DeleteQueue"));
    remove.BindText(1, name);
    SLUICE_RETURN_IF_ERROR(remove.Run());
  }
  SLUICE_ASSIGN_OR_RETURN(Statement remove,
                          Prepare(sql::kDeleteQueue, "DeleteQueue"));
  remove.BindText(1, name);
  SLUICE_RETURN_IF_ERROR(remove.Run());
  return remove.Changes() > 0;
}

}  // namespace sluice::sqlite_internal
