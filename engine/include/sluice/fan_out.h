// Fan-out children: a handler returns a FanOut instead of an output, and its
// task parks (TaskStatus::kWaiting, no lease, no busy worker) until every
// child has ended. Then the task completes with the children's results in
// child order,
//   [{"status": "completed", "output": ...} |
//    {"status": "failed" | "cancelled", "error": "..."}, ...]
// and its run goes on. With fail_fast, the first failed child fails the
// task (its step's when_exhausted policy applies) and cancels the others.
//
//   sluice::Job resize("resize", Resize);
//   sluice::Job batch("batch", [](const Json& files, TaskContext&)
//       -> absl::StatusOr<StepResult> {
//     sluice::FanOut out;
//     for (const auto& f : files.as_array()) {
//       out.children.push_back({.name = "resize", .payload = f});
//     }
//     return out;
//   });
//
// Each child is a run of a deployed job or flow (by name or alias) with a
// deterministic id derived from (parent task, child index), so a retried
// parent never spawns twice. Children nest up to EngineOptions'
// max_fan_out_depth (default 8). See docs/decisions/0028-fan-out-children.md.
#ifndef SLUICE_FAN_OUT_H_
#define SLUICE_FAN_OUT_H_

#include <string>
#include <vector>

#include "sluice/flow.h"
#include "sluice/ids.h"
#include "sluice/job.h"
#include "sluice/json.h"
#include "sluice/records.h"

namespace sluice {

struct ChildSpec {
  std::string name;  // a deployed job or flow (alias)
  Json payload;      // the job's payload or the flow's run input
  // Priority, delay, attempts, timeout, backoff, metadata and keep apply as
  // for Enqueue; id and dedupe are ignored (the child's id is derived).
  EnqueueOptions options;
  std::string store;  // empty: the parent's; else an EngineOptions::stores key
};

struct FanOut {
  std::vector<ChildSpec> children;
  // The first failed child fails the parent and cancels the rest; otherwise
  // (collect) the parent waits for all and gets every outcome.
  bool fail_fast = false;
};

// The run id of child `child_index` of task `parent`: a hash, the same in
// every process and build.
RunId ChildRunId(const TaskKey& parent, int child_index);

}  // namespace sluice

#endif  // SLUICE_FAN_OUT_H_
