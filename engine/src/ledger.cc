#include "ledger.h"

#include <algorithm>
#include <tuple>

#include "absl/container/flat_hash_set.h"

namespace sluice {
namespace {

// (step, task, attempt): an entry's place in a run's ledger.
using Place = std::tuple<int, int, int>;

Place PlaceOf(const AttemptRecord& a) {
  return {a.task.step_index, a.task.task_index, a.attempt};
}

}  // namespace

void AddDerivedAttempts(const std::vector<TaskRecord>& tasks,
                        std::vector<AttemptRecord>& attempts) {
  absl::flat_hash_set<Place> stored;
  stored.reserve(attempts.size());
  for (const AttemptRecord& a : attempts) stored.insert(PlaceOf(a));
  const size_t stored_count = attempts.size();
  for (const TaskRecord& t : tasks) {
    if (t.status != TaskStatus::kCompleted || t.attempts < 1 ||
        !t.finished_at.has_value() ||
        stored.contains(
            Place{t.key.step_index, t.key.task_index, t.attempts})) {
      continue;
    }
    attempts.push_back(
        EndedAttempt(t, AttemptOutcome::kCompleted, *t.finished_at));
  }
  if (attempts.size() == stored_count) return;
  std::stable_sort(attempts.begin(), attempts.end(),
                   [](const AttemptRecord& a, const AttemptRecord& b) {
                     return PlaceOf(a) < PlaceOf(b);
                   });
}

}  // namespace sluice
