// Checking EnqueueOptions, and turning them into what a new run stores.
#ifndef SLUICE_ENGINE_ENQUEUE_OPTIONS_H_
#define SLUICE_ENGINE_ENQUEUE_OPTIONS_H_

#include <string_view>

#include "absl/status/status.h"
#include "compiled_flow.h"
#include "run_progress.h"
#include "sluice/job.h"

namespace sluice {

// OK, or kInvalidArgument starting with `owner` ("job \"x\" item 3") and
// naming the first problem. Needs no backend.
absl::Status ValidateEnqueueOptions(std::string_view owner,
                                    const EnqueueOptions& options,
                                    size_t max_payload_bytes);

// OK, or kInvalidArgument: an id or dedupe key must be 1..kMaxKeyBytes bytes
// of UTF-8 without NUL. `what` names it ("id", "dedupe key").
absl::Status ValidateKey(std::string_view owner, std::string_view what,
                         std::string_view key);

// The settings of a new run made with `options` at `now` (priority falls
// back to the flow's default).
// `current_traceparent`: the tracer's, used when options has none.
RunProgress::NewRunSettings SettingsFor(const CompiledFlow& flow,
                                        const EnqueueOptions& options,
                                        absl::Time now,
                                        std::string_view current_traceparent);

}  // namespace sluice

#endif  // SLUICE_ENGINE_ENQUEUE_OPTIONS_H_
