// Every kind of engine call at once from many threads, on every backend:
// starts, claims, results, failures, abandoned tasks, stall recovery,
// deletes and pruning, checked for deadlocks and for anything left behind.
// The Postgres instances need SLUICE_TEST_POSTGRES_URL (scripts/test.sh
// starts a throwaway cluster and sets it) and skip without it.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "sluice/errors.h"
#include "sluice/internal/strings.h"
#include "support/call_threads.h"
#include "support/child_process.h"
#include "support/postgres_sql.h"
#include "support/postgres_test_database.h"

namespace sluice::testing {
namespace {

std::unique_ptr<Backend> OpenOrFail(const std::string& url) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(*backend) : nullptr;
}

// "churn": split (fails its first attempt in some runs) fans out three
// elements to each (one element of some runs is abandoned by its first
// claimer); check fails for good in doomed runs, so the run fails and its
// other tasks are cancelled; total sums each once check passed.
bool Doomed(int i) { return i % 5 == 2; }
bool Flaky(int i) { return i % 4 == 1; }
bool Abandons(int i) { return i % 7 == 3; }
constexpr int kCheckStep = 2;
constexpr int kTotalStep = 3;

Flow ChurnFlow() {
  Flow flow("churn", {.max_attempts = 3,
                      .base_delay = absl::ZeroDuration(),
                      .timeout = absl::Seconds(1)});
  flow.Step("split",
            [](const Json& in, TaskContext& ctx) -> absl::StatusOr<Json> {
              int64_t i = in.at("run").at("i").as_int64();
              if (Flaky(static_cast<int>(i)) && ctx.attempt() == 1) {
                return absl::UnavailableError("flaky split");
              }
              boost::json::array elements;
              for (int x = 0; x < 3; ++x) {
                elements.push_back(boost::json::object{
                    {"x", x},
                    {"abandon", Abandons(static_cast<int>(i)) && x == 0}});
              }
              return elements;
            })
      .Map("each", {.depends_on = {"split"}},
           [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
             return in.at("x").as_int64() * 2;
           })
      .Step("check",
            [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
              if (Doomed(static_cast<int>(in.at("run").at("i").as_int64()))) {
                return NonRetryable("doomed run");
              }
              return true;
            })
      .Step("total", {.depends_on = {"each", "check"}},
            [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
              int64_t sum = 0;
              for (const Json& v : in.at("each").as_array())
                sum += v.as_int64();
              return sum;
            });
  return flow;
}

class ConcurrentCallsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string url = Kind() + ":";
    if (Kind() == "postgres") {
      if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
      absl::StatusOr<std::unique_ptr<TestDatabase>> database =
          TestDatabase::Create();
      ASSERT_TRUE(database.ok()) << database.status();
      database_ = std::move(*database);
      url = database_->url();
    } else if (Kind() == "sqlite") {
      char dir[] = "/tmp/sluice-concurrent-XXXXXX";
      ASSERT_NE(mkdtemp(dir), nullptr);
      dir_ = dir;
      url = "sqlite:" + dir_ + "/churn.db";
    }
    backend_ = OpenOrFail(url);
    ASSERT_NE(backend_, nullptr);
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(
        *backend_, {.claim_grace = absl::Milliseconds(100),
                    .recovery_grace = absl::Milliseconds(200),
                    .report_stale_after = absl::Milliseconds(200)});
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }

  // The backend: the parameter up to "_with_events".
  std::string Kind() const {
    return GetParam().substr(0, GetParam().find("_with_events"));
  }
  // Whether a host subscribes to the engine's events.
  bool WithEvents() const {
    return GetParam().find("_with_events") != std::string::npos;
  }

  void TearDown() override {
    engine_.reset();
    backend_.reset();
    database_.reset();
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  std::unique_ptr<TestDatabase> database_;
  std::string dir_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Engine> engine_;
};

// What the threads did, for the checks afterwards.
struct ChurnLedger {
  absl::Mutex mu;
  absl::flat_hash_map<RunId, int> index ABSL_GUARDED_BY(mu);
  std::vector<RunId> started ABSL_GUARDED_BY(mu);
  // Messages of runs deleted by DeleteRun, looked up when deleted.
  std::vector<std::pair<std::string, int64_t>> deleted_messages
      ABSL_GUARDED_BY(mu);
  std::vector<RunId> deleted ABSL_GUARDED_BY(mu);
  std::atomic<int> abandoned{0};
  std::atomic<int> late_results{0};
  std::atomic<int> retries{0};
  std::atomic<int> recovered{0};
  std::atomic<int> pruned{0};

  std::optional<int> IndexOf(const RunId& id) {
    absl::MutexLock lock(&mu);
    auto it = index.find(id);
    if (it == index.end()) return std::nullopt;
    return it->second;
  }
};

TEST_P(ConcurrentCallsTest, EveryCallAtOnce_NoDeadlockAndNothingLeftBehind) {
  Flow flow = ChurnFlow();
  ASSERT_TRUE(engine_->Deploy(flow).ok());
  constexpr absl::Duration kChurn = absl::Seconds(5);
  constexpr int kMaxRuns = 1000;
  constexpr int kLiveRuns = 40;
  // Started even when kChurn passes first (a slow machine, ThreadSanitizer),
  // so that the checks below always have runs to look at.
  constexpr int kMinRuns = 24;
  ChurnLedger ledger;
  std::atomic<bool> starting_done{false};
  std::atomic<bool> stop{false};
  CallThreads threads;

  // Ended runs, as the claimers see them finishing (for pacing only).
  std::atomic<int> finishing{0};
  // A host listening to events, as hosts may: every run ends exactly once.
  std::atomic<int> ended_events{0};
  const int subscription = WithEvents()
                               ? engine_->Subscribe([&](const Event& e) {
                                   if (e.kind == EventKind::kRunCompleted ||
                                       e.kind == EventKind::kRunFailed ||
                                       e.kind == EventKind::kRunCancelled) {
                                     ++ended_events;
                                   }
                                 })
                               : 0;
  threads.Start("starter", [&](CallThreads::Slot& slot) {
    const absl::Time end = absl::Now() + kChurn;
    for (int next = 0;
         next < kMaxRuns && (absl::Now() < end || next < kMinRuns);) {
      // Keeps about kLiveRuns runs going.
      if (next - finishing >= kLiveRuns) {
        absl::SleepFor(absl::Milliseconds(5));
        continue;
      }
      std::vector<Json> inputs;
      for (int i = next; i < next + 4; ++i) {
        inputs.push_back(boost::json::object{{"i", i}});
      }
      absl::StatusOr<std::vector<RunId>> ids = slot.Call(
          "StartRuns", [&] { return engine_->StartRuns("churn", inputs); });
      if (ids.ok()) {
        absl::MutexLock lock(&ledger.mu);
        for (int k = 0; k < 4; ++k) {
          ledger.index[(*ids)[k]] = next + k;
          ledger.started.push_back((*ids)[k]);
        }
      }
      next += 4;
      absl::SleepFor(absl::Milliseconds(10));
    }
    starting_done = true;
  });

  // Two claimers. Each abandons the first attempt of an "abandon" element
  // (it never finishes it until long after its lease), so stall recovery
  // must take it back; the late result arrives afterwards.
  for (int c = 0; c < 2; ++c) {
    threads.Start(StrCat("claimer_", c), [&, c](CallThreads::Slot& slot) {
      ClaimRequest request{"churn", StrCat("claimer_", c), {}, 8};
      request.served.AddFlow(flow.shape());
      struct Abandoned {
        TaskKey key;
        int attempt;
        absl::Time at;
        Json output;
      };
      std::vector<Abandoned> abandoned;
      while (!stop) {
        absl::StatusOr<std::vector<ClaimedTask>> claimed =
            slot.Call("Claim", [&] { return engine_->Claim(request); });
        std::vector<TaskResult> results;
        if (claimed.ok()) {
          for (ClaimedTask& t : *claimed) {
            TaskContext ctx(
                {t.key.run_id, t.flow_slug, t.step_slug, t.key.task_index,
                 t.attempt, t.max_attempts, t.deadline},
                CancelToken());
            absl::StatusOr<StepResult> outcome =
                flow.handler(t.key.step_index)(t.input, ctx);
            if (t.step_slug == "each" && t.attempt == 1 &&
                t.input.at("abandon").as_bool()) {
              ++ledger.abandoned;
              abandoned.push_back(
                  {t.key, t.attempt, absl::Now(), outcome->output()});
              continue;
            }
            results.push_back({t.key, t.attempt, std::move(outcome)});
          }
        }
        // Late results go in a call of their own: the same task may be in
        // this batch again, on its next attempt, and one call may name a
        // task only once.
        std::vector<TaskResult> late;
        for (auto it = abandoned.begin(); it != abandoned.end();) {
          if (absl::Now() - it->at < absl::Milliseconds(1500)) {
            ++it;
            continue;
          }
          late.push_back({it->key, it->attempt, it->output});
          it = abandoned.erase(it);
        }
        for (std::vector<TaskResult>* batch : {&results, &late}) {
          if (batch->empty()) continue;
          absl::StatusOr<FinishOutcome> finished = slot.Call(
              "FinishTasks", [&] { return engine_->FinishTasks(*batch); });
          if (!finished.ok()) continue;
          if (batch == &late) {
            ledger.late_results += static_cast<int>(batch->size());
          }
          for (size_t i = 0; i < batch->size(); ++i) {
            ResultDisposition d = finished->dispositions[i];
            if (d == ResultDisposition::kRetrying) ++ledger.retries;
            const int step = (*batch)[i].key.step_index;
            if ((step == kTotalStep && d == ResultDisposition::kCompleted) ||
                (step == kCheckStep && d == ResultDisposition::kFailed)) {
              ++finishing;
            }
          }
          // Recorded by Call.
          (void)slot.Call("ApplyReports", [&] {
            return engine_->ApplyReports(finished->report_ids);
          });
        }
        if (claimed.ok() && claimed->empty()) {
          absl::SleepFor(absl::Milliseconds(5));
        }
      }
    });
  }

  // Stall recovery and the reconcile path.
  threads.Start("recovery", [&](CallThreads::Slot& slot) {
    while (!stop) {
      absl::StatusOr<int> recovered = slot.Call("RecoverStalledTasks", [&] {
        return engine_->RecoverStalledTasks(100);
      });
      if (recovered.ok()) ledger.recovered += *recovered;
      (void)slot.Call("ApplyStaleReports",
                      [&] { return engine_->ApplyStaleReports(100); });
      absl::SleepFor(absl::Milliseconds(50));
    }
  });

  // While runs start, deletes a third of the ended runs one by one, and
  // prunes runs that ended over a second ago. The runs that end later are
  // kept for the checks.
  threads.Start("deleter", [&](CallThreads::Slot& slot) {
    for (int round = 0; !stop && !starting_done; ++round) {
      absl::StatusOr<std::vector<RunRecord>> listed = slot.Call(
          "ListRuns", [&] { return engine_->ListRuns("churn", 200); });
      for (const RunRecord& r :
           listed.ok() ? *listed : std::vector<RunRecord>()) {
        std::optional<int> i = ledger.IndexOf(r.run_id);
        if (r.status == RunStatus::kStarted || !i.has_value() || *i % 3 != 0) {
          continue;
        }
        // Pruning may delete it first.
        absl::StatusOr<RunView> view =
            slot.Call("GetRun", [&] { return engine_->GetRun(r.run_id); },
                      {absl::StatusCode::kNotFound});
        absl::Status deleted =
            slot.Call("DeleteRun", [&] { return engine_->DeleteRun(r.run_id); },
                      {absl::StatusCode::kNotFound});
        if (deleted.ok() && view.ok()) {
          absl::MutexLock lock(&ledger.mu);
          ledger.deleted.push_back(r.run_id);
          for (const TaskRecord& t : view->tasks) {
            ledger.deleted_messages.push_back({t.queue_name, t.message_id});
          }
        }
      }
      if (round % 5 == 0) {
        absl::StatusOr<int> pruned = slot.Call("PruneRuns", [&] {
          return engine_->PruneRuns(absl::Now() - absl::Seconds(1), 10);
        });
        if (pruned.ok()) ledger.pruned += *pruned;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  });

  // Once starting stops, every run must end and every report be applied.
  auto settled = [&] {
    if (!starting_done) return false;
    absl::StatusOr<std::vector<RunRecord>> listed =
        engine_->ListRuns("churn", 10 * kMaxRuns);
    if (!listed.ok()) return false;
    for (const RunRecord& r : *listed) {
      if (r.status == RunStatus::kStarted) return false;
    }
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
    if (!tx.ok()) return false;
    absl::StatusOr<int64_t> reports = (*tx)->CountReports();
    return reports.ok() && *reports == 0;
  };
  const bool all_settled = AwaitCondition(settled, kChurn + absl::Seconds(20));
  stop = true;
  if (!threads.JoinWithin(absl::Seconds(30))) {
    // The stuck threads can't be joined: report where they are and end the
    // process rather than hang it.
    std::string report =
        StrCat("engine calls stuck for 30 s (deadlock): ", threads.Stuck());
    if (database_ != nullptr) {
      SqlSession admin(database_->admin_url());
      for (const auto& row : admin.Rows(
               "SELECT pid, state, wait_event_type || ':' || wait_event, "
               "pg_blocking_pids(pid)::text, left(query, 100) "
               "FROM pg_stat_activity WHERE datname = $1",
               {database_->name()})) {
        StrAppend(&report, "\n  session ", row[0], " ", row[1], " waits ",
                  row[2], " blocked by ", row[3], ": ", row[4]);
      }
    }
    ADD_FAILURE() << report;
    std::fflush(nullptr);
    database_.reset();  // drops it, ending the stuck sessions
    std::_Exit(1);
  }
  if (WithEvents()) engine_->Unsubscribe(subscription);
  ASSERT_TRUE(all_settled) << "runs still started or reports unapplied";

  EXPECT_EQ(threads.aborted(), 0) << "kAborted (deadlock or serialization "
                                     "failure) surfaced:"
                                  << threads.unexpected();
  EXPECT_EQ(threads.unexpected_count(), 0) << threads.unexpected();

  std::vector<RunId> started;
  {
    absl::MutexLock lock(&ledger.mu);
    started = ledger.started;
  }
  ASSERT_GT(started.size(), 20u);
  int gone = 0, completed = 0, failed = 0;
  std::vector<RunId> gone_ids;
  std::vector<std::pair<int, TaskRecord>> kept_tasks;  // (run index, task)
  for (const RunId& id : started) {
    const int i = *ledger.IndexOf(id);
    absl::StatusOr<RunView> view = engine_->GetRun(id);
    if (!view.ok()) {
      EXPECT_EQ(view.status().code(), absl::StatusCode::kNotFound)
          << view.status();
      ++gone;
      gone_ids.push_back(id);
      continue;
    }
    if (Doomed(i)) {
      ++failed;
      EXPECT_EQ(view->run.status, RunStatus::kFailed) << i;
    } else {
      ++completed;
      EXPECT_EQ(view->run.status, RunStatus::kCompleted) << i;
      EXPECT_EQ(view->run.output,
                std::optional<Json>(boost::json::object{{"total", 6}}))
          << i;
    }
    for (const TaskRecord& t : view->tasks) {
      EXPECT_NE(t.status, TaskStatus::kQueued) << "run " << i;
      EXPECT_NE(t.status, TaskStatus::kStarted) << "run " << i;
      kept_tasks.push_back({i, t});
    }
  }

  absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  for (const RunId& id : gone_ids) {
    absl::StatusOr<std::vector<TaskRecord>> tasks = (*tx)->ListTasks(id);
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    EXPECT_TRUE(tasks->empty())
        << "deleted run " << id.ToString() << " kept tasks";
  }
  for (const auto& [i, t] : kept_tasks) {
    absl::StatusOr<std::optional<MessageLocation>> message =
        (*tx)->LookupMessage(t.queue_name, t.message_id);
    ASSERT_TRUE(message.ok()) << message.status();
    EXPECT_TRUE(!message->has_value() || (*message)->archived)
        << "run " << i << " step " << t.key.step_index << " task "
        << t.key.task_index << ": live message for a terminal task";
  }
  {
    absl::MutexLock lock(&ledger.mu);
    for (const auto& [queue, id] : ledger.deleted_messages) {
      absl::StatusOr<std::optional<MessageLocation>> message =
          (*tx)->LookupMessage(queue, id);
      ASSERT_TRUE(message.ok()) << message.status();
      EXPECT_FALSE(message->has_value())
          << "message " << id << " of a deleted run is left";
    }
  }
  const absl::Time far = absl::Now() + absl::Hours(1);
  absl::StatusOr<std::vector<MessageRecord>> live = (*tx)->ReadMessages(
      "churn", far, 100000, far + absl::Hours(1), Fields::kNoPayloads);
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_TRUE(live->empty()) << live->size() << " live messages left";
  tx->reset();  // roll back the read

  if (database_ != nullptr) {
    SqlSession sql(database_->url());
    EXPECT_EQ(sql.Count("SELECT count(*) FROM sluice.tasks t "
                        "JOIN sluice.runs r USING (run_id) "
                        "WHERE r.status <> 'started' "
                        "AND t.status IN ('queued', 'started')"),
              0);
    EXPECT_EQ(sql.Count("SELECT count(*) FROM pgmq.q_churn q "
                        "LEFT JOIN sluice.tasks t ON t.queue_name = 'churn' "
                        "AND t.message_id = q.msg_id "
                        "WHERE t.run_id IS NULL "
                        "OR t.status NOT IN ('queued', 'started')"),
              0);
    EXPECT_EQ(sql.Count("SELECT count(*) FROM pgmq.a_churn a "
                        "LEFT JOIN sluice.tasks t ON t.queue_name = 'churn' "
                        "AND t.message_id = a.msg_id WHERE t.run_id IS NULL"),
              0)
        << "archived messages of deleted runs";
    EXPECT_EQ(sql.Count("SELECT count(*) FROM sluice.outbox"), 0);
  }

  if (WithEvents()) {
    EXPECT_EQ(ended_events.load(), static_cast<int>(started.size()));
  }
  // The scenario did what it is for.
  EXPECT_GT(gone, 0);
  EXPECT_GT(completed, 0);
  EXPECT_GT(ledger.abandoned.load(), 0);
  EXPECT_GT(ledger.recovered.load(), 0);
  EXPECT_GT(ledger.retries.load(), 0);
  {
    absl::MutexLock lock(&ledger.mu);
    EXPECT_FALSE(ledger.deleted.empty());
  }
  std::cout << GetParam() << ": " << started.size() << " runs, " << completed
            << " completed and " << failed << " failed kept, " << gone
            << " deleted (" << ledger.pruned.load() << " pruned), "
            << ledger.abandoned.load() << " abandoned, "
            << ledger.late_results.load() << " late results, "
            << ledger.recovered.load() << " recovered, "
            << ledger.retries.load() << " retries\n";
}

INSTANTIATE_TEST_SUITE_P(Backends, ConcurrentCallsTest,
                         ::testing::Values("memory_with_events",
                                           "sqlite_with_events", "postgres",
                                           "postgres_with_events"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
