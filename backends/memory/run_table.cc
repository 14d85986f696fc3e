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

}  // namespace

// --- Runs --------------------------------------------------------------------

absl::Status RunTable::InsertRuns(std::span<const RunRecord> runs,
                                  UndoLog& undo) {
  by_id_.reserve(by_id_.size() + runs.size());
  // A batch's runs are usually of one flow: look its index up once.
  ListIndex* flow_index = nullptr;
  std::string_view flow_of_index;
  for (const RunRecord& run : runs) {
    auto [it, inserted] = by_id_.try_emplace(run.run_id, nullptr);
    if (!inserted) {
      return absl::AlreadyExistsError(
          StrCat("run ", run.run_id.ToString(), " already exists"));
    }
    it->second = &entries_.Append(
        RunEntry{.run = StoredCopy(run), .sequence = next_sequence_++});
    if (flow_index == nullptr || flow_of_index != run.flow_slug) {
      flow_index = &by_flow_[run.flow_slug];
      flow_of_index = run.flow_slug;
    }
    flow_index->insert({run.started_at, it->second->sequence, run.run_id});
    undo.Add(undo::RunInserted{.run_id = run.run_id});
  }
  return absl::OkStatus();
}

const RunRecord* RunTable::FindRun(const RunId& run_id) const {
  const RunEntry* entry = FindEntry(run_id);
  return entry == nullptr ? nullptr : &entry->run;
}

absl::Status RunTable::UpdateRun(const RunRecord& run, UndoLog& undo) {
  RunEntry* entry = FindEntry(run.run_id);
  if (entry == nullptr) return RunNotFound(run.run_id);
  RunRecord& stored = entry->run;
  undo.Add(undo::RunUpdated{.run_id = run.run_id},
           SavedRunFields{.status = stored.status,
                          .output = std::move(stored.output),
                          .remaining_steps = stored.remaining_steps,
                          .error = std::move(stored.error),
                          .finished_at = stored.finished_at});
  stored.status = run.status;
  stored.output = StoredCopy(run.output);
  stored.remaining_steps = run.remaining_steps;
  stored.error = run.error;
  stored.finished_at = run.finished_at;
  return absl::OkStatus();
}

absl::StatusOr<int> RunTable::AddRemainingSteps(const RunId& run_id, int delta,
                                                UndoLog& undo) {
  RunEntry* entry = FindEntry(run_id);
  if (entry == nullptr) return RunNotFound(run_id);
  int& remaining = entry->run.remaining_steps;
  std::optional<int> sum = CheckedAdd(remaining, delta);
  if (!sum.has_value()) {
    return CounterOverflow(StrCat("remaining_steps of run ", run_id.ToString()),
                           remaining, delta);
  }
  undo.Add(
      undo::RunRemainingStepsAdded{.run_id = run_id, .old_value = remaining});
  remaining = *sum;
  return remaining;
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
  for (const ListKey& key : newest) runs.push_back(*FindRun(key.run_id));
  return runs;
}

void RunTable::UndoInsertRun(const RunId& run_id) {
  auto it = by_id_.find(run_id);
  RunEntry& entry = *it->second;
  auto flow_it = by_flow_.find(entry.run.flow_slug);
  flow_it->second.erase({entry.run.started_at, entry.sequence, run_id});
  if (flow_it->second.empty()) by_flow_.erase(flow_it);
  // Everything added to the run was rolled back before, and so was every
  // newer run.
  ABSL_ASSERT(entry.steps.empty());
  ABSL_ASSERT(entries_.IsNewest(entry));
  next_sequence_ = entry.sequence;
  by_id_.erase(it);
  entries_.PopNewest();
}

void RunTable::UndoUpdateRun(const RunId& run_id, SavedRunFields saved) {
  RunRecord& stored = FindEntry(run_id)->run;
  stored.status = saved.status;
  stored.output = std::move(saved.output);
  stored.remaining_steps = saved.remaining_steps;
  stored.error = std::move(saved.error);
  stored.finished_at = saved.finished_at;
}

void RunTable::UndoAddRemainingSteps(const RunId& run_id, int old_value) {
  FindEntry(run_id)->run.remaining_steps = old_value;
}

// --- Entries -----------------------------------------------------------------

RunTable::RunEntry* RunTable::FindEntry(const RunId& run_id) {
  auto it = by_id_.find(run_id);
  return it == by_id_.end() ? nullptr : it->second;
}

const RunTable::RunEntry* RunTable::FindEntry(const RunId& run_id) const {
  auto it = by_id_.find(run_id);
  return it == by_id_.end() ? nullptr : it->second;
}

}  // namespace sluice::memory
