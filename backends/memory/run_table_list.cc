// RunTable::ListRuns: a merge of per-flow time indexes, walked in either
// direction from a position, filtered as it goes.
#include <algorithm>
#include <functional>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "run_table.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"

namespace sluice::memory {
namespace {

// Whether the run passes the query's status and metadata filters (the time
// bounds and the flows are the walk's business).
bool Matches(const RunRecord& run, const RunQuery& query) {
  if (!query.statuses.empty() &&
      std::find(query.statuses.begin(), query.statuses.end(), run.status) ==
          query.statuses.end()) {
    return false;
  }
  return query.metadata.is_null() || JsonContains(run.metadata, query.metadata);
}

// Walks several sorted ranges as one, in the order `before` gives, calling
// take(entry) until it returns false. `Iterator` is a TimeIndex iterator, or
// a reverse one for a newest-first walk.
template <typename Iterator, typename Before, typename Take>
void Merge(std::vector<std::pair<Iterator, Iterator>> ranges, Before before,
           Take take) {
  // A heap whose top is the range whose head comes first in the walk.
  auto later_head = [&](const auto& a, const auto& b) {
    return before(b.first->first, a.first->first);
  };
  std::make_heap(ranges.begin(), ranges.end(), later_head);
  while (!ranges.empty()) {
    std::pop_heap(ranges.begin(), ranges.end(), later_head);
    auto& [head, end] = ranges.back();
    if (!take(*head->second)) return;
    if (++head == end) {
      ranges.pop_back();
    } else {
      std::push_heap(ranges.begin(), ranges.end(), later_head);
    }
  }
}

}  // namespace

std::vector<RunRecord> RunTable::ListRuns(const RunQuery& query,
                                          Fields fields) const {
  std::vector<RunRecord> runs;
  if (query.limit <= 0) return runs;
  const bool by_finish = query.order_by == RunQuery::OrderBy::kFinishedAt;
  // The indexes to walk: every flow's, or those of the flows asked for.
  std::vector<const TimeIndex*> indexes;
  auto add_index = [&](const TimeIndex& index) {
    if (!index.empty()) indexes.push_back(&index);
  };
  auto add = [&](const FlowIndexes& flow) {
    if (!by_finish) return add_index(flow.started);
    for (RunStatus status :
         {RunStatus::kCompleted, RunStatus::kFailed, RunStatus::kCancelled}) {
      if (query.statuses.empty() ||
          std::find(query.statuses.begin(), query.statuses.end(), status) !=
              query.statuses.end()) {
        add_index(flow.finished[FinishedSlot(status)]);
      }
    }
  };
  if (query.flow_slugs.empty()) {
    for (const auto& [slug, flow] : by_flow_) add(flow);
  } else {
    absl::flat_hash_set<std::string_view> seen;
    for (const std::string& slug : query.flow_slugs) {
      if (!seen.insert(slug).second) continue;
      auto it = by_flow_.find(ToAbsl(slug));
      if (it != by_flow_.end()) add(it->second);
    }
  }

  // Each index's part in [from, to), past `after` in the walk direction, as
  // an ascending [lo, hi). A nil run id is the least, so (t, nil) is the
  // first key at time t.
  using Iterator = TimeIndex::const_iterator;
  std::vector<std::pair<Iterator, Iterator>> ranges;
  for (const TimeIndex* index : indexes) {
    Iterator lo = query.from ? index->lower_bound({*query.from, RunId()})
                             : index->begin();
    Iterator hi =
        query.to ? index->lower_bound({*query.to, RunId()}) : index->end();
    if (query.after) {
      const TimeKey after{query.after->time, query.after->run_id};
      if (query.newest_first) {
        Iterator before_after = index->lower_bound(after);
        if (hi == index->end() ||
            (before_after != index->end() && before_after->first < hi->first)) {
          hi = before_after;
        }
      } else {
        Iterator past_after = index->upper_bound(after);
        if (past_after == index->end() ||
            (lo != index->end() && lo->first < past_after->first)) {
          lo = past_after;
        }
      }
    }
    if (lo != index->end() && (hi == index->end() || lo->first < hi->first)) {
      ranges.emplace_back(lo, hi);
    }
  }

  const size_t limit = static_cast<size_t>(query.limit);
  auto take = [&](const RunEntry& entry) {
    if (Matches(entry.run, query)) runs.push_back(CopyOfRun(entry.run, fields));
    return runs.size() < limit;
  };
  if (query.newest_first) {
    using Reverse = std::reverse_iterator<Iterator>;
    std::vector<std::pair<Reverse, Reverse>> reversed;
    reversed.reserve(ranges.size());
    for (const auto& [lo, hi] : ranges) {
      reversed.emplace_back(Reverse(hi), Reverse(lo));
    }
    Merge(std::move(reversed), std::greater<TimeKey>(), take);
  } else {
    Merge(std::move(ranges), std::less<TimeKey>(), take);
  }
  return runs;
}

RunCounts RunTable::CountRuns(std::string_view flow_slug) const {
  RunCounts counts;
  auto it = by_flow_.find(ToAbsl(flow_slug));
  if (it == by_flow_.end()) return counts;
  for (const auto& [key, entry] : it->second.started) {
    switch (entry->run.status) {
      case RunStatus::kStarted:
        ++counts.started;
        break;
      case RunStatus::kCompleted:
        ++counts.completed;
        break;
      case RunStatus::kFailed:
        ++counts.failed;
        break;
      case RunStatus::kCancelled:
        ++counts.cancelled;
        break;
    }
  }
  return counts;
}

}  // namespace sluice::memory
