#include "run_table.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "absl/base/macros.h"
#include "counter.h"
#include "sluice/internal/strings.h"
#include "stored_copy.h"

namespace sluice::memory {
namespace {

absl::Status RunNotFound(const RunId& run_id) {
  return absl::NotFoundError(
      StrCat("run ", run_id.ToString(), " does not exist"));
}

// Whether FindFinishedRuns lists the run.
bool IsFinished(const RunRecord& run) {
  return IsTerminal(run.status) && run.finished_at.has_value();
}

bool AttemptLess(const AttemptRecord& a, const AttemptRecord& b) {
  return std::tie(a.task.step_index, a.task.task_index, a.attempt) <
         std::tie(b.task.step_index, b.task.task_index, b.attempt);
}

std::string DescribeAttempt(const AttemptRecord& attempt) {
  return StrCat("attempt ", attempt.attempt, " of task (run ",
                attempt.task.run_id.ToString(), ", step ",
                attempt.task.step_index, ", task ", attempt.task.task_index,
                ")");
}

}  // namespace

RunRecord CopyOfRun(const RunRecord& run, Fields fields) {
  if (fields == Fields::kAll) return run;
  return RunRecord{.run_id = run.run_id,
                   .flow_slug = run.flow_slug,
                   .status = run.status,
                   .remaining_steps = run.remaining_steps,
                   .error = run.error,
                   .started_at = run.started_at,
                   .finished_at = run.finished_at,
                   .priority = run.priority,
                   .external_key = run.external_key,
                   .metadata = run.metadata,
                   .options = run.options,
                   .cancel_requested = run.cancel_requested};
}

// --- Runs --------------------------------------------------------------------

absl::Status RunTable::InsertRuns(std::span<RunRecord> runs,
                                  std::span<const Json* const> inputs,
                                  UndoLog& undo) {
  by_id_.reserve(by_id_.size() + runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    RunRecord& run = runs[i];
    if (!run.external_key.empty() &&
        FindByKey(run.flow_slug, run.external_key) != nullptr) {
      return absl::AlreadyExistsError(
          StrCat("a run of flow \"", run.flow_slug, "\" with external key \"",
                 run.external_key, "\" already exists"));
    }
    auto [it, inserted] = by_id_.try_emplace(run.run_id, nullptr);
    if (!inserted) {
      return absl::AlreadyExistsError(
          StrCat("run ", run.run_id.ToString(), " already exists"));
    }
    // The store owns its copy of an input the caller lends.
    if (const Json& input = RunInputToStore(run, inputs, i);
        &input != &run.input) {
      run.input = input;
    }
    RunEntry& entry = entries_.AddMade([&] {
      return RunEntry{.run = Stored(std::move(run)),
                      .sequence = next_sequence_++};
    });
    it->second = &entry;
    Index(entry);
    undo.Add(undo::RunInserted{.run_id = entry.run.run_id});
  }
  return absl::OkStatus();
}

std::vector<std::optional<RunRecord>> RunTable::GetRuns(
    std::span<const RunId> run_ids, Fields fields) const {
  std::vector<std::optional<RunRecord>> found;
  found.reserve(run_ids.size());
  for (const RunId& run_id : run_ids) {
    const RunEntry* entry = FindEntry(run_id);
    if (entry == nullptr) {
      found.emplace_back();
    } else {
      found.emplace_back(CopyOfRun(entry->run, fields));
    }
  }
  return found;
}

absl::Status RunTable::UpdateRuns(std::span<RunRecord> runs, UndoLog& undo) {
  for (RunRecord& run : runs) {
    RunEntry* entry = FindEntry(run.run_id);
    if (entry == nullptr) return RunNotFound(run.run_id);
    undo.Add(undo::RunUpdated{.run_id = run.run_id},
             ExchangeMutableFields(*entry, run));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> RunTable::AddRemainingSteps(
    std::span<const RunCounterDelta> deltas, UndoLog& undo) {
  std::vector<int> values;
  values.reserve(deltas.size());
  for (const RunCounterDelta& delta : deltas) {
    RunEntry* entry = FindEntry(delta.run_id);
    if (entry == nullptr) return RunNotFound(delta.run_id);
    int& remaining = entry->run.remaining_steps;
    std::optional<int> sum = CheckedAdd(remaining, delta.remaining_steps);
    if (!sum.has_value()) {
      return CounterOverflow(
          StrCat("remaining_steps of run ", delta.run_id.ToString()), remaining,
          delta.remaining_steps);
    }
    if (*sum != remaining) {
      undo.Add(undo::RunRemainingStepsAdded{.run_id = delta.run_id,
                                            .old_value = remaining});
      remaining = *sum;
    }
    values.push_back(remaining);
  }
  return values;
}

std::vector<std::optional<RunRecord>> RunTable::FindByKey(
    std::string_view flow_slug, std::span<const std::string> external_keys,
    Fields fields) const {
  std::vector<std::optional<RunRecord>> found;
  found.reserve(external_keys.size());
  for (const std::string& key : external_keys) {
    const RunEntry* entry = FindByKey(flow_slug, key);
    if (entry == nullptr) {
      found.emplace_back();
    } else {
      found.emplace_back(CopyOfRun(entry->run, fields));
    }
  }
  return found;
}

std::vector<RunRecord> RunTable::FindFinished(absl::Time finished_before,
                                              int limit) const {
  std::vector<RunRecord> runs;
  if (limit <= 0) return runs;
  for (auto it = finished_.begin();
       it != finished_.end() && it->first.first < finished_before &&
       runs.size() < static_cast<size_t>(limit);
       ++it) {
    runs.push_back(CopyOfRun(it->second->run, Fields::kNoPayloads));
  }
  return runs;
}

// --- Attempts ledger ---------------------------------------------------------

absl::Status RunTable::AppendAttempts(std::span<const AttemptRecord> attempts,
                                      UndoLog& undo) {
  for (const AttemptRecord& attempt : attempts) {
    RunEntry* entry = FindEntry(attempt.task.run_id);
    if (entry == nullptr) {
      return absl::NotFoundError(StrCat(DescribeAttempt(attempt),
                                        " belongs to no run: insert the run "
                                        "first"));
    }
    std::vector<AttemptRecord>& ledger = entry->attempts;
    // Attempts usually come in order: the place is then the end.
    auto at =
        std::lower_bound(ledger.begin(), ledger.end(), attempt, AttemptLess);
    if (at != ledger.end() && !AttemptLess(attempt, *at)) {
      return absl::AlreadyExistsError(
          StrCat(DescribeAttempt(attempt), " is already in the ledger"));
    }
    ledger.insert(at, attempt);
    undo.Add(undo::AttemptAppended{.task = attempt.task,
                                   .attempt = attempt.attempt});
  }
  return absl::OkStatus();
}

std::vector<AttemptRecord> RunTable::ListAttempts(const RunId& run_id) const {
  const RunEntry* entry = FindEntry(run_id);
  if (entry == nullptr) return {};
  return entry->attempts;
}

void RunTable::UndoAppendAttempt(const TaskKey& task, int attempt) {
  std::vector<AttemptRecord>& ledger = FindEntry(task.run_id)->attempts;
  auto at = std::lower_bound(ledger.begin(), ledger.end(),
                             AttemptRecord{.task = task, .attempt = attempt},
                             AttemptLess);
  ledger.erase(at);
}

// --- Deletion ----------------------------------------------------------------

void RunTable::DeleteRun(const RunId& run_id, UndoLog& undo) {
  auto it = by_id_.find(run_id);
  RunEntry& entry = *it->second;
  Unindex(entry);
  by_id_.erase(it);
  undo.AddDetached(undo::RunDeleted{.entry = &entry});
}

void RunTable::UndoInsertRun(const RunId& run_id) {
  auto it = by_id_.find(run_id);
  RunEntry& entry = *it->second;
  // Everything added to the run was rolled back before, and so was every
  // newer run.
  ABSL_ASSERT(entry.steps.empty());
  Unindex(entry);
  next_sequence_ = entry.sequence;
  by_id_.erase(it);
  entries_.Erase(entry);
}

void RunTable::UndoUpdateRun(const RunId& run_id, SavedRunFields saved) {
  RunEntry& entry = *FindEntry(run_id);
  RunRecord& stored = entry.run;
  UnindexFinished(entry);
  stored.status = saved.status;
  stored.output = std::move(saved.output);
  stored.error = std::move(saved.error);
  stored.finished_at = saved.finished_at;
  stored.cancel_requested = saved.cancel_requested;
  IndexFinished(entry);
}

void RunTable::UndoAddRemainingSteps(const RunId& run_id, int old_value) {
  FindEntry(run_id)->run.remaining_steps = old_value;
}

void RunTable::UndoDeleteRun(RunEntry& entry) {
  by_id_.try_emplace(entry.run.run_id, &entry);
  Index(entry);
}

// --- Indexes -----------------------------------------------------------------

void RunTable::Index(RunEntry& entry) {
  const RunRecord& run = entry.run;
  // Hinted at the end: runs mostly arrive in time order, and a wrong hint
  // only costs a normal insert.
  TimeIndex& started = by_flow_[run.flow_slug].started;
  started.try_emplace(started.end(), {run.started_at, run.run_id}, &entry);
  if (!run.external_key.empty()) {
    by_key_[run.flow_slug].try_emplace(run.external_key, &entry);
  }
  IndexFinished(entry);
}

void RunTable::Unindex(const RunEntry& entry) {
  const RunRecord& run = entry.run;
  UnindexFinished(entry);
  auto flow_it = by_flow_.find(run.flow_slug);
  flow_it->second.started.erase({run.started_at, run.run_id});
  if (flow_it->second.started.empty()) by_flow_.erase(flow_it);
  if (!run.external_key.empty()) {
    auto keys_it = by_key_.find(run.flow_slug);
    keys_it->second.erase(run.external_key);
    if (keys_it->second.empty()) by_key_.erase(keys_it);
  }
}

void RunTable::IndexFinished(RunEntry& entry) {
  const RunRecord& run = entry.run;
  if (IsFinished(run)) {
    // At the end, as in Index: runs mostly finish in time order.
    finished_.try_emplace(finished_.end(), {*run.finished_at, entry.sequence},
                          &entry);
    TimeIndex& by_finish =
        by_flow_[run.flow_slug].finished[FinishedSlot(run.status)];
    by_finish.try_emplace(by_finish.end(), {*run.finished_at, run.run_id},
                          &entry);
  }
}

void RunTable::UnindexFinished(const RunEntry& entry) {
  const RunRecord& run = entry.run;
  if (IsFinished(run)) {
    finished_.erase({*run.finished_at, entry.sequence});
    // The flow's entry stays while it lists the run as started.
    by_flow_.find(run.flow_slug)
        ->second.finished[FinishedSlot(run.status)]
        .erase({*run.finished_at, run.run_id});
  }
}

SavedRunFields RunTable::ExchangeMutableFields(RunEntry& entry,
                                               RunRecord& next) {
  RunRecord& stored = entry.run;
  UnindexFinished(entry);
  SavedRunFields saved{.status = stored.status,
                       .output = std::move(stored.output),
                       .error = std::move(stored.error),
                       .finished_at = stored.finished_at,
                       .cancel_requested = stored.cancel_requested};
  stored.status = next.status;
  stored.output = Stored(std::move(next.output));
  stored.error = std::move(next.error);
  stored.finished_at = next.finished_at;
  stored.cancel_requested = next.cancel_requested;
  IndexFinished(entry);
  return saved;
}

// --- Entries -----------------------------------------------------------------

RunEntry* RunTable::FindEntry(const RunId& run_id) {
  auto it = by_id_.find(run_id);
  return it == by_id_.end() ? nullptr : it->second;
}

const RunEntry* RunTable::FindEntry(const RunId& run_id) const {
  auto it = by_id_.find(run_id);
  return it == by_id_.end() ? nullptr : it->second;
}

const RunEntry* RunTable::FindByKey(std::string_view flow_slug,
                                    std::string_view external_key) const {
  if (external_key.empty()) return nullptr;
  auto keys_it = by_key_.find(ToAbsl(flow_slug));
  if (keys_it == by_key_.end()) return nullptr;
  auto it = keys_it->second.find(ToAbsl(external_key));
  return it == keys_it->second.end() ? nullptr : it->second;
}

}  // namespace sluice::memory
