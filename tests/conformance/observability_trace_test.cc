// Tracing on every backend: a W3C traceparent given at StartRun/Enqueue (or
// by the tracer hook) is stored with the run, carried by every task and
// handed to every handler; a bad one is refused and changes nothing; a
// worker reports claim, handler and finish spans to the tracer.
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "sluice/job.h"
#include "sluice/tracing.h"
#include "worker_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kTrace[] =
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
constexpr char kOtherTrace[] =
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";

// Records spans and supplies a fixed current traceparent.
class RecordingTracer : public Tracer {
 public:
  explicit RecordingTracer(std::string current = "")
      : current_(std::move(current)) {}
  std::string CurrentTraceparent() override { return current_; }
  void SpanStarted(const Span& span) override {
    absl::MutexLock lock(&mu_);
    started_.push_back(span);
  }
  void SpanEnded(const Span& span, absl::Time, const absl::Status&) override {
    absl::MutexLock lock(&mu_);
    ended_.push_back(span);
  }
  // Waits until a span of `kind` with at least `tasks` tasks (handler: with
  // this traceparent) has ended; false on timeout.
  bool AwaitEnded(SpanKind kind, std::string_view traceparent = "") {
    absl::MutexLock lock(&mu_);
    auto found = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const Span& s : ended_) {
        if (s.kind != kind) continue;
        if (kind == SpanKind::kHandler && s.traceparent == traceparent) {
          return true;
        }
        if (kind != SpanKind::kHandler && s.tasks > 0) return true;
      }
      return false;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&found), kWorkerTestDeadline);
  }
  std::vector<Span> started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }

 private:
  const std::string current_;
  absl::Mutex mu_;
  std::vector<Span> started_ ABSL_GUARDED_BY(mu_);
  std::vector<Span> ended_ ABSL_GUARDED_BY(mu_);
};

class ObservabilityTrace : public WorkerConformance {
 protected:
  // A two-step flow whose handlers record the traceparent they see.
  Flow TwoSteps(std::string slug) {
    Flow flow(std::move(slug));
    auto record = [this](const Json& in,
                         TaskContext& ctx) -> absl::StatusOr<Json> {
      absl::MutexLock lock(&seen_mu_);
      seen_.push_back(ctx.traceparent());
      return in;
    };
    flow.Step("first", record);
    flow.Step("second", {.depends_on = {"first"}}, record);
    return flow;
  }
  std::vector<std::string> Seen() {
    absl::MutexLock lock(&seen_mu_);
    return seen_;
  }
  void UseTracer(std::shared_ptr<Tracer> tracer) {
    EngineOptions options = DefaultOptions();
    options.tracer = std::move(tracer);
    UseEngine(backend(), std::move(options));
    WatchRunEnds();
  }

  absl::Mutex seen_mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(seen_mu_);
};

TEST_P(ObservabilityTrace,
       StartRunTraceparent_IsStored_AndReachesEveryHandler) {
  Flow flow = TwoSteps("traced");
  Deploy(flow);
  absl::StatusOr<EnqueueResult> run =
      engine().StartRun("traced", J("{}"), {.traceparent = kTrace});
  ASSERT_TRUE(run.ok()) << run.status();
  RunView view = View(run->run_id);
  ASSERT_TRUE(view.run.options.is_object());
  EXPECT_EQ(view.run.options.as_object().at("traceparent"), kTrace);
  EXPECT_EQ(Drive(flow), 2);
  EXPECT_THAT(Seen(), ::testing::ElementsAre(kTrace, kTrace));
  for (const TaskRecord& t : View(run->run_id).tasks) {
    EXPECT_EQ(t.options.as_object().at("traceparent"), kTrace);
  }
}

TEST_P(ObservabilityTrace, EnqueuedJob_HandsItsTraceparentToTheClaim) {
  Job job("traced_job", Echo());
  ASSERT_TRUE(engine().Deploy(job).ok());
  ASSERT_TRUE(engine().Enqueue(job, J("1"), {.traceparent = kTrace}).ok());
  ASSERT_TRUE(engine().Enqueue(job, J("2")).ok());
  std::vector<ClaimedTask> claimed = Claim(job.flow());
  ASSERT_EQ(claimed.size(), 2u);
  EXPECT_EQ(claimed[0].traceparent, kTrace);
  EXPECT_EQ(claimed[1].traceparent, "");  // none given, no tracer
}

TEST_P(ObservabilityTrace, RetriedRun_KeepsItsTraceparent) {
  Flow flow("traced_retry", {.max_attempts = 1});
  flow.Step("work", Echo());
  Deploy(flow);
  absl::StatusOr<EnqueueResult> run =
      engine().StartRun("traced_retry", J("{}"), {.traceparent = kTrace});
  ASSERT_TRUE(run.ok());
  std::vector<ClaimedTask> first = Claim(flow);
  ASSERT_EQ(first.size(), 1u);
  Fail(first[0], absl::InternalError("no"));
  ASSERT_TRUE(engine().RetryRun(run->run_id).ok());
  std::vector<ClaimedTask> again = Claim(flow);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].traceparent, kTrace);
}

TEST_P(ObservabilityTrace, BadTraceparent_IsRefused_AndNothingIsCreated) {
  Job job("traced_bad", Echo());
  ASSERT_TRUE(engine().Deploy(job).ok());
  struct Case {
    std::string value;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
       "not a lowercase hex digit"},
      {"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
       "trace id is all zeros"},
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
       "parent span id is all zeros"},
      {"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
       "version is not 00"},
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "characters"},
      {"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
       "no '-' at position 3"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<EnqueueResult> result =
        engine().Enqueue(job, J("1"), {.traceparent = c.value});
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << c.value;
    EXPECT_THAT(result.status().message(), HasSubstr(c.problem)) << c.value;
    EXPECT_THAT(result.status().message(), HasSubstr("traced_bad"));
  }
  absl::StatusOr<QueueState> counts = engine().Counts("default");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->counts.waiting, 0);
}

TEST_P(ObservabilityTrace, TracerHook_SuppliesTheCurrentTraceparent) {
  UseTracer(std::make_shared<RecordingTracer>(kOtherTrace));
  Flow flow = TwoSteps("hooked");
  Deploy(flow);
  absl::StatusOr<RunId> plain = engine().StartRun("hooked", J("{}"));
  ASSERT_TRUE(plain.ok()) << plain.status();
  absl::StatusOr<EnqueueResult> given =
      engine().StartRun("hooked", J("{}"), {.traceparent = kTrace});
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(Drive(flow), 4);
  // The hook's for the run without one; the explicit one wins.
  std::vector<std::string> seen = Seen();
  EXPECT_EQ(std::count(seen.begin(), seen.end(), kOtherTrace), 2);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), kTrace), 2);
}

TEST_P(ObservabilityTrace, TracerHookGivingABadValue_FailsTheStart) {
  UseTracer(std::make_shared<RecordingTracer>("not-a-traceparent"));
  Flow flow = TwoSteps("hooked_bad");
  Deploy(flow);
  absl::StatusOr<RunId> run = engine().StartRun("hooked_bad", J("{}"));
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(run.status().message(), HasSubstr("CurrentTraceparent"));
  absl::StatusOr<RunPage> page = engine().ListRuns(RunFilter{});
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->runs.empty());
}

TEST_P(ObservabilityTrace, Worker_ReportsClaimHandlerAndFinishSpans) {
  auto tracer = std::make_shared<RecordingTracer>();
  UseTracer(tracer);
  Flow flow = TwoSteps("spanned");
  Deploy(flow);
  absl::StatusOr<EnqueueResult> run =
      engine().StartRun("spanned", J("{}"), {.traceparent = kTrace});
  ASSERT_TRUE(run.ok());
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine().StartWorker(flow, Fast());
  ASSERT_TRUE(worker.ok()) << worker.status();
  ASSERT_TRUE(AwaitRunsEnd({run->run_id}));
  EXPECT_TRUE(tracer->AwaitEnded(SpanKind::kHandler, kTrace));
  EXPECT_TRUE(tracer->AwaitEnded(SpanKind::kClaim));
  EXPECT_TRUE(tracer->AwaitEnded(SpanKind::kFinish));
  ASSERT_TRUE((*worker)->Stop().ok());
  for (const Span& s : tracer->started()) {
    EXPECT_EQ(s.queue, "spanned");
    EXPECT_EQ(s.worker_id, (*worker)->id());
    EXPECT_GT(s.id, 0u);
    if (s.kind == SpanKind::kHandler) {
      EXPECT_EQ(s.run_id, run->run_id);
      EXPECT_EQ(s.flow, "spanned");
    }
  }
}

SLUICE_CONFORMANCE_SUITE(ObservabilityTrace);

}  // namespace
}  // namespace sluice::testing
