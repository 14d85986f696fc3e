// ListRuns(RunFilter): filtered, ordered pages of runs with an opaque
// cursor. A cursor holds the last run's (ordering time, id) and a hash of the
// filter it came from, so it pages without gaps or repeats however many runs
// share a time, and a cursor handed to another filter is refused.
#include <algorithm>
#include <cstdint>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine_impl.h"
#include "queue_name.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

constexpr int kMaxLimit = 10'000;

uint64_t Fnv1a(std::string_view text) {
  uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

std::string TimeKey(const std::optional<absl::Time>& t) {
  return t ? StrCat(absl::ToUnixMicros(*t)) : std::string("-");
}

// A hash of everything in the filter but the limit and the cursor.
uint64_t FilterHash(const RunFilter& filter) {
  std::vector<std::string> names = filter.names;
  std::sort(names.begin(), names.end());
  std::vector<int> statuses;
  for (RunStatus s : filter.statuses) statuses.push_back(static_cast<int>(s));
  std::sort(statuses.begin(), statuses.end());
  std::string text =
      StrCat("names=", absl::StrJoin(names, ","), ";queue=", filter.queue,
             ";statuses=", absl::StrJoin(statuses, ","),
             ";metadata=", SerializeJson(filter.metadata),
             ";order=", static_cast<int>(filter.order_by),
             ";newest_first=", filter.newest_first,
             ";from=", TimeKey(filter.from), ";to=", TimeKey(filter.to));
  return Fnv1a(text);
}

absl::Time OrderTime(const RunRecord& run, RunQuery::OrderBy order_by) {
  if (order_by == RunQuery::OrderBy::kFinishedAt && run.finished_at) {
    return *run.finished_at;
  }
  return run.started_at;
}

// The time in nanoseconds: a backend that keeps times finer than
// microseconds (memory) would otherwise see the last run of a page again
// at the start of the next when walking oldest first.
std::string EncodeCursor(uint64_t hash, absl::Time time, const RunId& id) {
  std::string raw = StrCat(absl::Hex(hash, absl::kZeroPad16), ".",
                           absl::ToUnixNanos(time), ".", id.ToString());
  return absl::WebSafeBase64Escape(raw);
}

absl::StatusOr<RunQuery::Position> DecodeCursor(std::string_view cursor,
                                                uint64_t hash) {
  auto invalid = [] {
    return absl::InvalidArgumentError(
        "ListRuns cursor is not one this filter produced; pass the cursor of "
        "the previous page of the same filter, or none for the first page");
  };
  std::string raw;
  if (!absl::WebSafeBase64Unescape(ToAbsl(cursor), &raw)) return invalid();
  std::vector<std::string> parts = absl::StrSplit(raw, '.');
  if (parts.size() != 3) return invalid();
  uint64_t got_hash = 0;
  int64_t nanos = 0;
  if (!absl::SimpleHexAtoi(parts[0], &got_hash) || got_hash != hash ||
      !absl::SimpleAtoi(parts[1], &nanos)) {
    return invalid();
  }
  absl::StatusOr<RunId> id = RunId::Parse(parts[2]);
  if (!id.ok()) return invalid();
  return RunQuery::Position{absl::FromUnixNanos(nanos), *id};
}

absl::Status ValidateFilter(const RunFilter& filter) {
  for (const std::string& name : filter.names) {
    SLUICE_RETURN_IF_ERROR(ValidateSlug(name, "ListRuns: flow or job"));
  }
  if (!filter.queue.empty()) {
    SLUICE_RETURN_IF_ERROR(queue_name::Validate(filter.queue));
  }
  if (!filter.metadata.is_null() && !filter.metadata.is_object()) {
    return absl::InvalidArgumentError(
        StrCat("ListRuns: metadata must be a JSON object or null, not ",
               JsonTypeName(filter.metadata)));
  }
  if (filter.limit < 1 || filter.limit > kMaxLimit) {
    return absl::InvalidArgumentError(StrCat(
        "ListRuns limit ", filter.limit, " is out of range 1..", kMaxLimit));
  }
  if (filter.from && filter.to && *filter.from >= *filter.to) {
    return absl::InvalidArgumentError(
        "ListRuns: `from` must be earlier than `to`");
  }
  return absl::OkStatus();
}

// The flows whose steps use `queue`, among `names` if any are given.
absl::StatusOr<std::vector<std::string>> FlowsOfQueue(
    Transaction& tx, std::string_view queue,
    const std::vector<std::string>& names) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<FlowRecord> flows, tx.ListFlows());
  std::vector<std::string> slugs;
  for (const FlowRecord& record : flows) {
    if (!names.empty() &&
        std::find(names.begin(), names.end(), record.slug) == names.end()) {
      continue;
    }
    SLUICE_ASSIGN_OR_RETURN(FlowShape shape,
                            FlowShape::FromJson(record.definition));
    for (const StepShape& step : shape.steps) {
      if (step.queue_name == queue) {
        slugs.push_back(shape.slug);
        break;
      }
    }
  }
  return slugs;
}

}  // namespace

absl::StatusOr<RunPage> Engine::ListRuns(const RunFilter& filter) {
  SLUICE_RETURN_IF_ERROR(ValidateFilter(filter));
  uint64_t hash = FilterHash(filter);
  RunQuery query;
  query.flow_slugs = filter.names;
  query.statuses = filter.statuses;
  query.metadata = filter.metadata;
  query.order_by = filter.order_by;
  query.newest_first = filter.newest_first;
  query.from = filter.from;
  query.to = filter.to;
  query.limit = filter.limit + 1;  // one more tells whether a page follows
  if (!filter.cursor.empty()) {
    SLUICE_ASSIGN_OR_RETURN(query.after, DecodeCursor(filter.cursor, hash));
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  RunPage page;
  if (!filter.queue.empty()) {
    SLUICE_ASSIGN_OR_RETURN(query.flow_slugs,
                            FlowsOfQueue(*tx, filter.queue, filter.names));
    if (query.flow_slugs.empty()) return page;  // no flow uses the queue
  }
  SLUICE_ASSIGN_OR_RETURN(page.runs, tx->ListRuns(query, Fields::kAll));
  if (page.runs.size() > static_cast<size_t>(filter.limit)) {
    page.runs.resize(filter.limit);
    const RunRecord& last = page.runs.back();
    page.cursor =
        EncodeCursor(hash, OrderTime(last, filter.order_by), last.run_id);
  }
  return page;
}

}  // namespace sluice
