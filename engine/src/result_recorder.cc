#include "result_recorder.h"

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine_impl.h"
#include "sluice/errors.h"
#include "sluice/internal/strings.h"
#include "utf8.h"

namespace sluice {
namespace {

// The longest part of a backend's refusal quoted in a task's error.
constexpr size_t kMaxQuotedRefusal = 300;

// The backend's reason, made safe to store: valid UTF-8, no control
// characters (Postgres refuses NUL in text) and short, cut on a character
// boundary.
std::string Quotable(const absl::Status& status) {
  std::string text = ToValidUtf8(ToStd(status.message()));
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  if (text.size() > kMaxQuotedRefusal) {
    size_t cut = kMaxQuotedRefusal;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    text.resize(cut);
    text += "...";
  }
  return text;
}

// The failure stored in place of a result the backend refused.
TaskResult Replacement(const TaskResult& refused, const absl::Status& why) {
  return TaskResult{refused.key, refused.attempt,
                    NonRetryable(StrCat(
                        "the backend refused to store this attempt's result (",
                        absl::StatusCodeToString(why.code()), ": ",
                        Quotable(why), "); the attempt fails instead")),
                    /*completion_write=*/nullptr, refused.claimed};
}

class Recorder {
 public:
  Recorder(Engine& engine, std::string_view worker_id)
      : engine_(engine), worker_id_(worker_id) {}

  RecordedResults Run(std::vector<TaskResult> results) {
    SetAsideSuperseded(results);
    absl::Status batch = Store(results, /*replaced=*/false);
    if (!batch.ok()) {
      if (IsTransientError(batch)) {
        out_.transient_error = batch;
        out_.retry = std::move(results);
      } else {
        Log(LogLevel::kWarning,
            StrCat("recording ", results.size(),
                   " results failed: ", batch.ToString(),
                   results.size() > 1 ? "; recording them one at a time" : ""));
        for (TaskResult& result : results) StoreAlone(std::move(result));
      }
    }
    ApplyReports();
    return std::move(out_);
  }

 private:
  void Log(LogLevel level, std::string_view message) {
    engine_.impl().Log(level, StrCat("worker ", worker_id_, ": ", message));
  }

  // A task whose lease lapsed can be claimed again by the same worker, so a
  // batch can hold two attempts of one task. Only the latest can still own
  // the task, and FinishTasks refuses a task twice in one call (which would
  // send the whole batch down the one-at-a-time path): each older attempt
  // is noted stale here and not stored.
  void SetAsideSuperseded(std::vector<TaskResult>& results) {
    absl::flat_hash_map<TaskKey, int> latest;
    for (const TaskResult& r : results) {
      auto [it, inserted] = latest.try_emplace(r.key, r.attempt);
      if (!inserted) it->second = std::max(it->second, r.attempt);
    }
    if (latest.size() == results.size()) return;
    std::erase_if(results, [&](const TaskResult& r) {
      if (r.attempt == latest[r.key]) return false;
      out_.recorded.push_back(
          {r.key, r.attempt, ResultDisposition::kStale, /*replaced=*/false});
      return true;
    });
  }

  // Stores `results` in one transaction and notes what became of them.
  absl::Status Store(std::span<const TaskResult> results, bool replaced) {
    absl::StatusOr<FinishOutcome> outcome =
        engine_.FinishTasks(results, {.apply_completions = true});
    if (!outcome.ok()) return outcome.status();
    for (size_t i = 0; i < results.size(); ++i) {
      out_.recorded.push_back({results[i].key, results[i].attempt,
                               outcome->dispositions[i], replaced});
    }
    report_ids_.insert(report_ids_.end(), outcome->report_ids.begin(),
                       outcome->report_ids.end());
    return absl::OkStatus();
  }

  void StoreAlone(TaskResult result) {
    absl::Status stored = Store(std::span(&result, 1), /*replaced=*/false);
    if (stored.ok()) return;
    if (IsTransientError(stored)) {
      out_.transient_error = stored;
      out_.retry.push_back(std::move(result));
      return;
    }
    Log(LogLevel::kWarning,
        StrCat("the backend refused the result of ", DescribeTask(result.key),
               " (", stored.ToString(), "); recording a failure instead"));
    TaskResult failure = Replacement(result, stored);
    absl::Status replaced = Store(std::span(&failure, 1), /*replaced=*/true);
    if (replaced.ok()) return;
    if (IsTransientError(replaced)) {
      out_.transient_error = replaced;
      out_.retry.push_back(std::move(failure));
      return;
    }
    Log(LogLevel::kError,
        StrCat("the backend refused even a failure for ",
               DescribeTask(result.key), " (", replaced.ToString(),
               "); its lease will lapse and stall recovery will take it "
               "back"));
    out_.dropped.push_back(std::move(result));
  }

  void ApplyReports() {
    if (report_ids_.empty()) return;
    absl::Status applied = engine_.ApplyReports(report_ids_);
    if (!applied.ok()) {
      Log(LogLevel::kWarning,
          StrCat("applying reports failed (", applied.ToString(),
                 "); the sweeper will apply them"));
    }
  }

  Engine& engine_;
  std::string_view worker_id_;
  RecordedResults out_;
  std::vector<int64_t> report_ids_;
};

}  // namespace

bool IsTransientError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

std::string DescribeTask(const TaskKey& key) {
  return StrCat("task (run ", key.run_id.ToString(), ", step ", key.step_index,
                ", task ", key.task_index, ")");
}

RecordedResults RecordResults(Engine& engine, std::vector<TaskResult> results,
                              std::string_view worker_id) {
  if (results.empty()) return {};
  return Recorder(engine, worker_id).Run(std::move(results));
}

}  // namespace sluice
