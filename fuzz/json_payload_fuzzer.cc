// Fuzzes JSON payloads through the API: text is parsed as the CLI parses a
// run input, and anything accepted must start a run on the memory backend
// and read back unchanged. Values built in C++ take the same checks
// (CheckJsonPayload), so a value ParseJson accepts must pass them too.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "fuzz_check.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "sluice/flow.h"
#include "sluice/json.h"

namespace {

using sluice::fuzz::Check;

sluice::Engine& FuzzEngine() {
  static sluice::Engine* engine = [] {
    auto backend = sluice::OpenBackend("memory:");
    Check(backend.ok(), "memory backend opened");
    sluice::Flow flow("fuzz");
    flow.Step("echo",
              [](const sluice::Json& in, sluice::TaskContext&)
                  -> absl::StatusOr<sluice::Json> { return in; });
    auto created = sluice::Engine::Create(**backend, {});
    Check(created.ok(), "engine created");
    Check((*created)->Deploy(flow).ok(), "flow deployed");
    backend->release();  // lives as long as the process
    return created->release();
  }();
  return *engine;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<sluice::Json> value = sluice::ParseJson(text, "run input");
  if (!value.ok()) {
    Check(value.status().code() == absl::StatusCode::kInvalidArgument,
          "parse errors are kInvalidArgument");
    return 0;
  }
  Check(sluice::CheckJsonPayload(*value, "run input").ok(),
        "a parsed value passes the payload check");
  std::string serialized = sluice::SerializeJson(*value);
  absl::StatusOr<sluice::Json> again = sluice::ParseJson(serialized, "again");
  Check(again.ok() && *again == *value, "serialization round-trips");
  sluice::Engine& engine = FuzzEngine();
  absl::StatusOr<sluice::RunId> run = engine.StartRun("fuzz", *value);
  Check(run.ok(), "an accepted payload starts a run");
  absl::StatusOr<sluice::RunView> view = engine.GetRun(*run);
  Check(view.ok() && view->run.input == *value, "the run input reads back");
  Check(engine.DeleteRun(*run).code() == absl::StatusCode::kFailedPrecondition,
        "a started run is not deleted");
  Check(engine.CancelRun(*run).ok() && engine.DeleteRun(*run).ok(),
        "the run is cancelled and deleted");
  return 0;
}
