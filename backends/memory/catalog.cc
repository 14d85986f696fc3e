#include "catalog.h"

#include <algorithm>
#include <utility>

#include "sluice/internal/strings.h"
#include "stored_copy.h"

namespace sluice::memory {

const FlowRecord* Catalog::FindFlow(std::string_view slug) const {
  auto it = flows_.find(slug);
  return it == flows_.end() ? nullptr : &it->second;
}

absl::Status Catalog::InsertFlow(const FlowRecord& flow, UndoLog& undo) {
  if (!flows_.try_emplace(flow.slug, StoredCopy(flow)).second) {
    return absl::AlreadyExistsError(
        StrCat("flow \"", flow.slug, "\" already exists"));
  }
  undo.Add(undo::FlowInserted{.slug = flow.slug});
  return absl::OkStatus();
}

std::vector<FlowRecord> Catalog::ListFlows() const {
  std::vector<FlowRecord> flows;
  flows.reserve(flows_.size());
  for (const auto& [slug, flow] : flows_) flows.push_back(flow);
  return flows;
}

bool Catalog::DeleteFlow(std::string_view slug, UndoLog& undo) {
  auto it = flows_.find(slug);
  if (it == flows_.end()) return false;
  undo.Add(undo::FlowChanged{}, SavedFlow{.previous = std::move(it->second)});
  flows_.erase(it);
  return true;
}

absl::Status Catalog::UpdateFlow(const FlowRecord& flow, UndoLog& undo) {
  auto it = flows_.find(flow.slug);
  if (it == flows_.end()) {
    return absl::NotFoundError(
        StrCat("flow \"", flow.slug, "\" does not exist"));
  }
  FlowRecord next = StoredCopy(flow);
  // Only the definition and the generation change; the rest is fixed at
  // creation.
  next.created_at = it->second.created_at;
  next.alias = it->second.alias;
  undo.Add(undo::FlowChanged{},
           SavedFlow{.previous = std::exchange(it->second, std::move(next))});
  return absl::OkStatus();
}

const AliasRecord* Catalog::FindAlias(std::string_view alias) const {
  auto it = aliases_.find(alias);
  return it == aliases_.end() ? nullptr : &it->second;
}

void Catalog::PutAlias(const AliasRecord& alias, UndoLog& undo) {
  auto [it, inserted] = aliases_.try_emplace(alias.alias, alias);
  SavedAlias saved{.alias = alias.alias};
  if (!inserted) saved.previous = std::exchange(it->second, alias);
  undo.Add(undo::AliasChanged{}, std::move(saved));
}

std::vector<AliasRecord> Catalog::ListAliases() const {
  std::vector<AliasRecord> aliases;
  aliases.reserve(aliases_.size());
  for (const auto& [name, alias] : aliases_) aliases.push_back(alias);
  return aliases;
}

MessageQueue* Catalog::FindQueue(std::string_view name) {
  auto it = queues_.find(ToAbsl(name));
  return it == queues_.end() ? nullptr : it->second.get();
}

const MessageQueue* Catalog::FindQueue(std::string_view name) const {
  auto it = queues_.find(ToAbsl(name));
  return it == queues_.end() ? nullptr : it->second.get();
}

absl::Status Catalog::CreateQueue(const QueueRecord& queue, UndoLog& undo) {
  auto [it, inserted] = queues_.try_emplace(queue.name);
  if (!inserted) {
    return absl::AlreadyExistsError(
        StrCat("queue \"", queue.name, "\" already exists"));
  }
  it->second = std::make_unique<MessageQueue>(queue);
  undo.Add(undo::QueueCreated{.name = queue.name});
  return absl::OkStatus();
}

std::vector<QueueRecord> Catalog::ListQueues() const {
  std::vector<QueueRecord> queues;
  queues.reserve(queues_.size());
  for (const auto& [name, queue] : queues_) queues.push_back(queue->record());
  std::sort(queues.begin(), queues.end(),
            [](const QueueRecord& a, const QueueRecord& b) {
              return a.name < b.name;
            });
  return queues;
}

bool Catalog::DeleteQueue(std::string_view name, UndoLog& undo) {
  auto it = queues_.find(ToAbsl(name));
  if (it == queues_.end()) return false;
  MessageQueue* queue = it->second.get();
  detached_queues_.emplace(queue, std::move(it->second));
  queues_.erase(it);
  undo.AddDetached(undo::QueueDeleted{.queue = queue});
  return true;
}

void Catalog::FreeDetachedQueue(MessageQueue* queue) {
  detached_queues_.erase(queue);
}

void Catalog::UpsertWorker(const WorkerRecord& worker, UndoLog& undo) {
  auto [it, inserted] = workers_.try_emplace(worker.worker_id, worker);
  SavedWorker saved{.worker_id = worker.worker_id};
  if (!inserted) saved.previous = std::exchange(it->second, worker);
  undo.Add(undo::WorkerUpserted{}, std::move(saved));
}

std::vector<WorkerRecord> Catalog::ListWorkers() const {
  std::vector<WorkerRecord> workers;
  workers.reserve(workers_.size());
  for (const auto& [id, worker] : workers_) workers.push_back(worker);
  return workers;
}

int Catalog::DeleteInactiveWorkers(absl::Time inactive_before, int limit,
                                   UndoLog& undo) {
  std::vector<const WorkerRecord*> inactive;
  for (const auto& [id, worker] : workers_) {
    if (worker.last_heartbeat_at < inactive_before &&
        (!worker.stopped_at || *worker.stopped_at < inactive_before)) {
      inactive.push_back(&worker);
    }
  }
  std::vector<std::string> ids;
  for (const WorkerRecord* worker : inactive) {
    if (static_cast<int>(ids.size()) >= limit) break;
    ids.push_back(worker->worker_id);
  }
  for (std::string& id : ids) {
    auto it = workers_.find(id);
    // The undo of an upsert that replaced a row puts the row back, which is
    // what undoing a deletion needs too.
    undo.Add(undo::WorkerUpserted{},
             SavedWorker{.worker_id = id, .previous = std::move(it->second)});
    workers_.erase(it);
  }
  return static_cast<int>(ids.size());
}

void Catalog::UndoInsertFlow(const std::string& slug) { flows_.erase(slug); }

void Catalog::UndoChangeFlow(SavedFlow saved) {
  std::string slug = saved.previous.slug;
  flows_.insert_or_assign(std::move(slug), std::move(saved.previous));
}

void Catalog::UndoPutAlias(SavedAlias saved) {
  if (saved.previous.has_value()) {
    aliases_.insert_or_assign(saved.alias, std::move(*saved.previous));
  } else {
    aliases_.erase(saved.alias);
  }
}

void Catalog::UndoCreateQueue(const std::string& name) { queues_.erase(name); }

void Catalog::UndoDeleteQueue(MessageQueue* queue) {
  auto it = detached_queues_.find(queue);
  std::string name = queue->record().name;
  queues_.insert_or_assign(std::move(name), std::move(it->second));
  detached_queues_.erase(it);
}

void Catalog::UndoUpsertWorker(SavedWorker saved) {
  if (saved.previous.has_value()) {
    workers_.insert_or_assign(saved.worker_id, std::move(*saved.previous));
  } else {
    workers_.erase(saved.worker_id);
  }
}

}  // namespace sluice::memory
