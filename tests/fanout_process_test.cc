// Fan-out through real worker processes, on SQLite and on Postgres (issue
// 10, "what it must show"): 200 parents each fan out 50 children (10,000 in
// all) while two worker processes run them and are SIGKILLed at random 10
// times (each replaced at once). Every parent settles exactly once with all
// its children's results in child order, no child's handler completes
// twice (each completion writes a side-table row in its own transaction),
// no report is lost (the outbox ends empty, every link settled).
//
// The Postgres case needs SLUICE_TEST_POSTGRES_URL and skips without it.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/engine.h"
#include "sluice/fan_out.h"
#include "sluice/internal/status_macros.h"
#include "support/fanout_flows.h"
#include "support/store_test.h"

namespace sluice::testing {
namespace {

constexpr int kParents = 200;
constexpr int kChildren = kParents * kFanOutChildren;
constexpr int kWorkers = 2;
constexpr int kKills = 10;
// Bounds a hang, not a speed: on a loaded 2-core machine (CTest running the
// install test's build beside it) the whole run has taken over 150 s.
constexpr absl::Duration kDeadline = absl::Seconds(600);

// Reads the side table on a connection of its own (read-only for SQLite),
// so polling it never takes a write lock from the workers.
class DoneReader {
 public:
  explicit DoneReader(const std::string& url) {
    if (url.rfind("sqlite:", 0) == 0) {
      EXPECT_EQ(sqlite3_open_v2(url.substr(7).c_str(), &sqlite_,
                                SQLITE_OPEN_READONLY, nullptr),
                SQLITE_OK);
      sqlite3_busy_timeout(sqlite_, 10'000);
    } else {
      pg_ = PQconnectdb(url.c_str());
      EXPECT_EQ(PQstatus(pg_), CONNECTION_OK) << PQerrorMessage(pg_);
    }
  }
  ~DoneReader() {
    if (sqlite_ != nullptr) sqlite3_close(sqlite_);
    if (pg_ != nullptr) PQfinish(pg_);
  }

  // Rows of `kind`, or -1 on an error.
  int64_t Count(std::string_view kind) {
    std::vector<std::vector<std::string>> rows = Query(
        StrCat("SELECT count(*) FROM ", Table(), " WHERE kind = '", kind, "'"));
    return rows.size() == 1 ? std::stoll(rows[0][0]) : -1;
  }

  // Rows per run, of `kind`.
  std::map<std::string, int> PerRun(std::string_view kind) {
    std::map<std::string, int> counts;
    for (const auto& row :
         Query(StrCat("SELECT run, count(*) FROM ", Table(), " WHERE kind = '",
                      kind, "' GROUP BY run"))) {
      counts[row[0]] = std::stoi(row[1]);
    }
    return counts;
  }

 private:
  std::string Table() const {
    return DoneTableName(sqlite_ != nullptr ? "sqlite" : "postgres");
  }

  std::vector<std::vector<std::string>> Query(const std::string& sql) {
    std::vector<std::vector<std::string>> rows;
    if (sqlite_ != nullptr) {
      sqlite3_stmt* stmt = nullptr;
      EXPECT_EQ(sqlite3_prepare_v2(sqlite_, sql.c_str(), -1, &stmt, nullptr),
                SQLITE_OK)
          << sqlite3_errmsg(sqlite_);
      while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
        std::vector<std::string>& row = rows.emplace_back();
        for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
          const unsigned char* text = sqlite3_column_text(stmt, i);
          row.emplace_back(text != nullptr ? reinterpret_cast<const char*>(text)
                                           : "");
        }
      }
      sqlite3_finalize(stmt);
      return rows;
    }
    PGresult* result = PQexec(pg_, sql.c_str());
    EXPECT_EQ(PQresultStatus(result), PGRES_TUPLES_OK) << PQerrorMessage(pg_);
    for (int r = 0; r < PQntuples(result); ++r) {
      std::vector<std::string>& row = rows.emplace_back();
      for (int i = 0; i < PQnfields(result); ++i) {
        row.emplace_back(PQgetvalue(result, r, i));
      }
    }
    PQclear(result);
    return rows;
  }

  sqlite3* sqlite_ = nullptr;
  PGconn* pg_ = nullptr;
};

// Waits until `done` holds, checking every 50 ms (each check is a query);
// false at `deadline`.
bool AwaitUntil(const std::function<bool()>& done, absl::Time deadline) {
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return done();
}

class FanOutProcessTest : public StoreTest {
 protected:
  // Starts worker `id` and waits for its "ready".
  Child* StartWorkerProcess(const std::string& id) {
    children_.push_back(Spawn(SLUICE_TEST_FANOUT_WORKER, {url_, id}));
    Child* child = &children_.back();
    std::string line;
    EXPECT_TRUE(ReadLine(child->out, absl::Now() + absl::Seconds(60), &line))
        << id << " did not start";
    EXPECT_EQ(line, "ready") << id;
    return child;
  }

  absl::Status CreateDoneTable() {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, backend_->Begin());
    SLUICE_RETURN_IF_ERROR(
        tx->RunNative([](const NativeConnection& connection) {
          return NativeExec(connection, CreateDoneTableSql(connection.backend));
        }));
    return tx->Commit();
  }

  // Every parent run has ended.
  bool AllParentsEnded() {
    absl::StatusOr<std::vector<RunRecord>> runs =
        engine_->ListRuns("fan_parent", kParents + 1);
    if (!runs.ok() || runs->size() != kParents) return false;
    return std::all_of(runs->begin(), runs->end(),
                       [](const RunRecord& r) { return IsTerminal(r.status); });
  }

  // The checks on one parent run `p` once everything ended; its children's
  // side-table rows go into `expected_children`.
  void CheckParent(int p, const RunId& run,
                   std::map<std::string, int>& expected_children);
};

void FanOutProcessTest::CheckParent(
    int p, const RunId& run, std::map<std::string, int>& expected_children) {
  const std::string text = StrCat("parent ", p, " (", run.ToString(), ")");
  absl::StatusOr<RunView> view = engine_->GetRun(run);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->run.status, RunStatus::kCompleted) << text;
  // The spawn task fanned out exactly once, however often it was tried.
  int fanned_out = 0;
  for (const AttemptRecord& a : view->attempts) {
    fanned_out +=
        a.task.step_index == 0 && a.outcome == AttemptOutcome::kFannedOut;
  }
  EXPECT_EQ(fanned_out, 1) << text;
  // Its results, in child order, as the collect step passed them on.
  ASSERT_TRUE(view->run.output.has_value()) << text;
  const Json* collected = view->run.output->as_object().if_contains("collect");
  ASSERT_TRUE(collected != nullptr && collected->is_array()) << text;
  const boost::json::array& results = collected->as_array();
  ASSERT_EQ(results.size(), static_cast<size_t>(kFanOutChildren)) << text;
  const TaskKey spawn{run, 0, 0};
  for (int c = 0; c < kFanOutChildren; ++c) {
    const Json expected = boost::json::object{
        {"status", "completed"},
        {"output",
         boost::json::object{{"p", p}, {"c", c}, {"v", p * 1000 + c}}}};
    EXPECT_EQ(results[c], expected) << text << " child " << c;
    ++expected_children[ChildRunId(spawn, c).ToString()];
  }
  // Every link settled, with the child's outcome.
  absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  absl::StatusOr<std::vector<ChildLinkRecord>> links =
      (*tx)->GetChildLinks(spawn, Fields::kAll);
  ASSERT_TRUE(links.ok()) << links.status();
  ASSERT_TRUE((*tx)->Commit().ok());
  ASSERT_EQ(links->size(), static_cast<size_t>(kFanOutChildren)) << text;
  for (const ChildLinkRecord& link : *links) {
    EXPECT_EQ(link.status, ChildStatus::kCompleted)
        << text << " link " << link.child_index;
    EXPECT_EQ(link.child_run_id, ChildRunId(spawn, link.child_index)) << text;
  }
}

TEST_P(FanOutProcessTest, TwoHundredParents_TenKills_EachSettlesOnce) {
  ASSERT_TRUE(engine_->Deploy(FanChildJob()).ok());
  ASSERT_TRUE(engine_->Deploy(FanParentFlow()).ok());
  ASSERT_TRUE(CreateDoneTable().ok());
  std::vector<Json> inputs;
  for (int p = 0; p < kParents; ++p) {
    inputs.push_back(boost::json::object{{"p", p}});
  }
  absl::StatusOr<std::vector<RunId>> parents =
      engine_->StartRuns("fan_parent", inputs);
  ASSERT_TRUE(parents.ok()) << parents.status();

  std::vector<Child*> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.push_back(StartWorkerProcess(StrCat("w", w, "-0")));
  }
  ASSERT_FALSE(HasFailure());

  // Each kill waits for a number of committed child completions: the
  // first for one (while parents still fan out), the rest at random over
  // the run.
  const int seed = std::random_device()();
  SCOPED_TRACE(StrCat("seed ", seed));
  std::mt19937 random(seed);
  std::vector<int> thresholds = {1};
  std::uniform_int_distribution<int> progress(100, kChildren * 9 / 10);
  while (thresholds.size() < kKills) thresholds.push_back(progress(random));
  std::sort(thresholds.begin(), thresholds.end());
  std::uniform_int_distribution<int> slot(0, kWorkers - 1);
  DoneReader done(url_);
  const absl::Time deadline = absl::Now() + kDeadline;
  for (int k = 0; k < kKills; ++k) {
    ASSERT_TRUE(AwaitUntil([&] { return done.Count("child") >= thresholds[k]; },
                           deadline))
        << "kill " << k << ": fewer than " << thresholds[k]
        << " children completed by the deadline";
    ASSERT_LT(done.Count("parent"), kParents)
        << "kill " << k << " came after every parent settled";
    const int w = slot(random);
    int status = KillAndReap(*workers[w], SIGKILL);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
    workers[w] = StartWorkerProcess(StrCat("w", w, "-", k + 1));
    ASSERT_FALSE(HasFailure());
  }

  ASSERT_TRUE(AwaitUntil(
      [&] { return done.Count("parent") >= kParents && AllParentsEnded(); },
      deadline))
      << "by the deadline, " << done.Count("parent") << " of " << kParents
      << " parents settled and " << done.Count("child") << " of " << kChildren
      << " children completed";
  for (Child* worker : workers) {
    int status = KillAndReap(*worker, SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }

  std::map<std::string, int> expected_children;
  std::map<std::string, int> expected_parents;
  for (int p = 0; p < kParents; ++p) {
    CheckParent(p, (*parents)[p], expected_children);
    ++expected_parents[(*parents)[p].ToString()];
    ASSERT_FALSE(HasFailure()) << "one parent's failures say enough";
  }
  // No report is lost or left behind.
  absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  absl::StatusOr<int64_t> reports = (*tx)->CountChildReports();
  ASSERT_TRUE(reports.ok()) << reports.status();
  EXPECT_EQ(*reports, 0);
  ASSERT_TRUE((*tx)->Commit().ok());

  // Exactly one committed completion per parent and per child.
  EXPECT_EQ(done.PerRun("parent"), expected_parents);
  std::map<std::string, int> children = done.PerRun("child");
  EXPECT_EQ(children.size(), static_cast<size_t>(kChildren));
  int twice = 0;
  for (const auto& [run, count] : children) {
    if (count != 1 && ++twice <= 5) {
      ADD_FAILURE() << "child " << run << " completed " << count << " times";
    }
  }
  EXPECT_EQ(twice, 0);
  EXPECT_TRUE(children == expected_children);
  absl::StatusOr<std::vector<RunRecord>> child_runs =
      engine_->ListRuns("fan_child", kChildren);
  ASSERT_TRUE(child_runs.ok()) << child_runs.status();
  EXPECT_EQ(child_runs->size(), static_cast<size_t>(kChildren));
  for (const RunRecord& run : *child_runs) {
    ASSERT_EQ(run.status, RunStatus::kCompleted) << run.run_id.ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, FanOutProcessTest,
                         ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
