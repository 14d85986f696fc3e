#include "run_table.h"

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

RunRecord CopyOf(const RunRecord& run, Fields fields) {
  if (fields == Fields::kAll) return run;
  return RunRecord{.run_id = run.run_id,
                   .flow_slug = run.flow_slug,
                   .status = run.status,
                   .remaining_steps = run.remaining_steps,
                   .error = run.error,
                   .started_at = run.started_at,
                   .finished_at = run.finished_at};
}

}  // namespace

// --- Runs --------------------------------------------------------------------

absl::Status RunTable::InsertRuns(std::span<RunRecord> runs, UndoLog& undo) {
  by_id_.reserve(by_id_.size() + runs.size());
  for (RunRecord& run : runs) {
    auto [it, inserted] = by_id_.try_emplace(run.run_id, nullptr);
    if (!inserted) {
      return absl::AlreadyExistsError(
          StrCat("run ", run.run_id.ToString(), " already exists"));
    }
    RunEntry& entry = entries_.Add(
        RunEntry{.run = Stored(std::move(run)), .sequence = next_sequence_++});
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
      found.emplace_back(CopyOf(entry->run, fields));
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

std::vector<RunRecord> RunTable::ListRuns(std::string_view flow_slug,
                                          int limit) const {
  if (limit <= 0) return {};
  const size_t max = static_cast<size_t>(limit);
  std::vector<ListKey> newest;
  // Appends the first `limit` keys of `index`.
  auto take_newest = [&](const ListIndex& index) {
    size_t taken = 0;
    for (auto it = index.begin(); it != index.end() && taken < max; ++it) {
      newest.push_back(*it);
      ++taken;
    }
  };
  if (!flow_slug.empty()) {
    auto it = by_flow_.find(ToAbsl(flow_slug));
    if (it != by_flow_.end()) take_newest(it->second);
  } else {
    // Each flow's index is in order, so the newest `limit` overall are among
    // the newest `limit` of each flow: merge those.
    for (const auto& [slug, index] : by_flow_) {
      const size_t merged = newest.size();
      take_newest(index);
      std::inplace_merge(newest.begin(), newest.begin() + merged, newest.end(),
                         NewestFirst());
      newest.resize(std::min(newest.size(), max));
    }
  }
  std::vector<RunRecord> runs;
  runs.reserve(newest.size());
  for (const ListKey& key : newest) runs.push_back(FindEntry(key.run_id)->run);
  return runs;
}

std::vector<RunRecord> RunTable::FindFinished(absl::Time finished_before,
                                              int limit) const {
  std::vector<RunRecord> runs;
  if (limit <= 0) return runs;
  for (auto it = finished_.begin();
       it != finished_.end() && it->first.first < finished_before &&
       runs.size() < static_cast<size_t>(limit);
       ++it) {
    runs.push_back(CopyOf(it->second->run, Fields::kNoPayloads));
  }
  return runs;
}

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
  by_flow_[entry.run.flow_slug].insert(
      {entry.run.started_at, entry.sequence, entry.run.run_id});
  IndexFinished(entry);
}

void RunTable::Unindex(const RunEntry& entry) {
  auto flow_it = by_flow_.find(entry.run.flow_slug);
  flow_it->second.erase({entry.run.started_at, entry.sequence, {}});
  if (flow_it->second.empty()) by_flow_.erase(flow_it);
  UnindexFinished(entry);
}

void RunTable::IndexFinished(RunEntry& entry) {
  if (IsFinished(entry.run)) {
    finished_.try_emplace({*entry.run.finished_at, entry.sequence}, &entry);
  }
}

void RunTable::UnindexFinished(const RunEntry& entry) {
  if (IsFinished(entry.run)) {
    finished_.erase({*entry.run.finished_at, entry.sequence});
  }
}

SavedRunFields RunTable::ExchangeMutableFields(RunEntry& entry,
                                               RunRecord& next) {
  RunRecord& stored = entry.run;
  UnindexFinished(entry);
  SavedRunFields saved{.status = stored.status,
                       .output = std::move(stored.output),
                       .error = std::move(stored.error),
                       .finished_at = stored.finished_at};
  stored.status = next.status;
  stored.output = Stored(std::move(next.output));
  stored.error = std::move(next.error);
  stored.finished_at = next.finished_at;
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

}  // namespace sluice::memory
