// A job and a flow on SQLite, served by one worker: what a host program
// does with an installed Sluice. Exits 0 only if both runs completed with
// the expected output.
//
//   job_and_flow [DATABASE]   (default: a fresh file in the temp directory)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "boost/json.hpp"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "sluice/version.h"

namespace {

using sluice::Json;
using sluice::TaskContext;

// The job: gets its payload, returns a greeting.
absl::StatusOr<Json> Greet(const Json& payload, TaskContext&) {
  return Json{
      {"greeting", "hello, " + std::string(payload.at("name").as_string())}};
}

// The flow: split a sentence into words, upper-case each (a map step), and
// join them again. Every step shares the worker's queue.
sluice::Flow ShoutFlow() {
  sluice::Flow flow("shout", {.queue = "example"});
  flow.Step("split",
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              std::vector<std::string> parts = absl::StrSplit(
                  std::string(input.at("run").at("text").as_string()), ' ',
                  absl::SkipEmpty());
              boost::json::array words;
              for (const std::string& word : parts) {
                words.emplace_back(boost::json::string_view(word));
              }
              return Json(std::move(words));
            })
      .Map("upper", {.depends_on = {"split"}},
           [](const Json& word, TaskContext&) -> absl::StatusOr<Json> {
             return Json(absl::AsciiStrToUpper(std::string(word.as_string())));
           })
      .Step("join", {.depends_on = {"upper"}},
            [](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              std::string joined;
              for (const Json& word : input.at("upper").as_array()) {
                if (!joined.empty()) joined += ' ';
                joined += std::string(word.as_string());
              }
              return Json(joined);
            });
  return flow;
}

// Records which runs ended, for Await.
class Endings {
 public:
  void Record(const sluice::Event& event) {
    if (event.kind != sluice::EventKind::kRunCompleted &&
        event.kind != sluice::EventKind::kRunFailed &&
        event.kind != sluice::EventKind::kRunCancelled) {
      return;
    }
    absl::MutexLock lock(&mu_);
    ended_.push_back(event.run_id);
  }
  // True once every run in `runs` ended, false after `timeout`.
  bool Await(const std::vector<sluice::RunId>& runs, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto all_ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::all_of(
          runs.begin(), runs.end(), [&](const sluice::RunId& id) {
            return std::find(ended_.begin(), ended_.end(), id) != ended_.end();
          });
    };
    return mu_.AwaitWithTimeout(absl::Condition(&all_ended), timeout);
  }

 private:
  absl::Mutex mu_;
  std::vector<sluice::RunId> ended_ ABSL_GUARDED_BY(mu_);
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "job_and_flow: %s\n", status.ToString().c_str());
  return 1;
}

// OK if the run completed with `expected` as its output.
absl::Status Check(sluice::Engine& engine, const sluice::RunId& run,
                   const Json& expected) {
  absl::StatusOr<sluice::RunView> view = engine.GetRun(run);
  if (!view.ok()) return view.status();
  std::string output =
      view->run.output ? boost::json::serialize(*view->run.output) : "none";
  std::printf("run %s: %s %s\n", run.ToString().c_str(),
              std::string(sluice::ToString(view->run.status)).c_str(),
              output.c_str());
  if (view->run.status != sluice::RunStatus::kCompleted ||
      view->run.output != expected) {
    return absl::InternalError("run " + run.ToString() +
                               " should have completed with " +
                               boost::json::serialize(expected));
  }
  return absl::OkStatus();
}

int Run(const std::string& database) {
  std::printf("Sluice %s (library %s), sqlite:%s\n", SLUICE_VERSION,
              std::string(sluice::LibraryVersion()).c_str(), database.c_str());
  absl::StatusOr<std::unique_ptr<sluice::Backend>> backend =
      sluice::OpenBackend("sqlite:" + database);
  if (!backend.ok()) return Fail(backend.status());
  absl::StatusOr<std::unique_ptr<sluice::Engine>> engine =
      sluice::Engine::Create(**backend);
  if (!engine.ok()) return Fail(engine.status());
  Endings endings;
  (*engine)->Subscribe([&](const sluice::Event& e) { endings.Record(e); });

  sluice::Job greet("greet", {.queue = "example"}, Greet);
  sluice::Flow shout = ShoutFlow();
  absl::StatusOr<std::unique_ptr<sluice::Worker>> worker =
      (*engine)->StartWorker(sluice::WorkerSpec().Serve(greet).Serve(shout),
                             {.concurrency = 4});
  if (!worker.ok()) return Fail(worker.status());

  absl::StatusOr<sluice::EnqueueResult> job =
      (*engine)->Enqueue(greet, Json{{"name", "ada"}});
  if (!job.ok()) return Fail(job.status());
  absl::StatusOr<sluice::RunId> flow =
      (*engine)->StartRun("shout", Json{{"text", "durable work done"}});
  if (!flow.ok()) return Fail(flow.status());

  bool ended = endings.Await({job->run_id, *flow}, absl::Seconds(60));
  absl::Status stopped = (*worker)->Stop();
  if (!ended)
    return Fail(
        absl::DeadlineExceededError("the runs did not end within 60 s"));
  if (!stopped.ok()) return Fail(stopped);
  absl::Status job_ok =
      Check(**engine, job->run_id, Json{{"job", {{"greeting", "hello, ada"}}}});
  absl::Status flow_ok =
      Check(**engine, *flow, Json{{"join", "DURABLE WORK DONE"}});
  if (!job_ok.ok()) return Fail(job_ok);
  if (!flow_ok.ok()) return Fail(flow_ok);
  std::printf("ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc > 1) return Run(argv[1]);
  fs::path dir = fs::temp_directory_path() /
                 ("sluice-example-" + sluice::RunId::Random().ToString());
  fs::create_directories(dir);
  int code = Run((dir / "example.db").string());
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  return code;
}
