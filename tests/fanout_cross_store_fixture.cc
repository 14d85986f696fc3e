#include "fanout_cross_store_fixture.h"

#include <stdlib.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace sluice::testing {

void CrossStore::SetUp() {
  char dir[] = "/tmp/sluice-xstore-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  temp_dir_ = dir;
  if (GetParam().first == "postgres" || GetParam().second == "postgres") {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
  }
  Open();
}

void CrossStore::CloseStores() {
  central_.reset();
  edge_.reset();
  link_.reset();
  central_store_.reset();
  edge_store_.reset();
  database_.reset();
}

void CrossStore::Open() {
  CloseStores();
  ended_.clear();
  ++opened_;
  std::string url;
  if (GetParam().first == "postgres" || GetParam().second == "postgres") {
    absl::StatusOr<std::unique_ptr<TestDatabase>> db = TestDatabase::Create();
    ASSERT_TRUE(db.ok()) << db.status();
    database_ = *std::move(db);
    url = database_->url();
  }
  auto open = [&](const std::string& kind, const std::string& name) {
    return OpenTestBackend(
        kind, absl::StrCat(temp_dir_, "/", name, opened_, ".db"), url);
  };
  central_store_ = open(GetParam().first, "central");
  edge_store_ = open(GetParam().second, "edge");
  ASSERT_NE(central_store_, nullptr);
  ASSERT_NE(edge_store_, nullptr);
  link_ = std::make_unique<EdgeLink>(*edge_store_);
  EngineOptions options;
  options.clock = &clock_;
  options.log = [](LogLevel, std::string_view) {};
  options.store_name = "central";
  options.stores = {{"edge", link_.get()}};
  absl::StatusOr<std::unique_ptr<Engine>> central =
      Engine::Create(*central_store_, options);
  ASSERT_TRUE(central.ok()) << central.status();
  central_ = *std::move(central);
  EngineOptions edge_options;
  edge_options.clock = &clock_;
  edge_options.log = [](LogLevel, std::string_view) {};
  absl::StatusOr<std::unique_ptr<Engine>> edge =
      Engine::Create(*edge_store_, edge_options);
  ASSERT_TRUE(edge.ok()) << edge.status();
  edge_ = *std::move(edge);
  central_->Subscribe([this](const Event& e) {
    if (e.kind == EventKind::kRunFailed || e.kind == EventKind::kRunCompleted ||
        e.kind == EventKind::kRunCancelled) {
      ended_.push_back(e);
    }
  });
  ASSERT_TRUE(central_->Deploy(parent_).ok());
  ASSERT_TRUE(edge_->Deploy(child_).ok());
}

void CrossStore::TearDown() {
  CloseStores();
  std::error_code ignored;
  std::filesystem::remove_all(temp_dir_, ignored);
}

Job CrossStore::ChildJob() {
  return Job(
      "child", {.queue = "kids"},
      [](const Json& p, TaskContext&) -> absl::StatusOr<StepResult> {
        const boost::json::object& o = p.as_object();
        if (const Json* why = o.if_contains("fail")) {
          return NonRetryable(std::string(why->as_string()));
        }
        return Json(boost::json::object{{"doubled", 2 * o.at("n").as_int64()}});
      });
}

Job CrossStore::ParentJob() {
  return Job("parent", {.queue = "parents", .max_attempts = 3},
             [](const Json& p, TaskContext&) -> absl::StatusOr<StepResult> {
               const boost::json::object& o = p.as_object();
               FanOut out;
               if (const Json* ff = o.if_contains("fail_fast")) {
                 out.fail_fast = ff->as_bool();
               }
               for (const Json& item : o.at("items").as_array()) {
                 out.children.push_back(
                     {.name = "child", .payload = item, .store = "edge"});
               }
               return out;
             });
}

RunId CrossStore::StartParent(const Json& payload) {
  absl::StatusOr<EnqueueResult> started = central_->Enqueue(parent_, payload);
  EXPECT_TRUE(started.ok()) << started.status();
  return started.ok() ? started->run_id : RunId();
}

void CrossStore::Sweep() {
  clock_.Advance(absl::Minutes(2));
  for (Engine* e : {central_.get(), edge_.get()}) {
    (void)e->ApplyStaleReports(1000);
    (void)e->RecoverStalledTasks(1000);
    (void)e->RelayChildReports(1000);
    (void)e->RepairChildLinks(1000);
  }
}

bool CrossStore::RunToEnd(const RunId& run) {
  for (int pass = 0; pass < 30; ++pass) {
    DriveParents();
    DriveChildren();
    (void)central_->RelayChildReports();
    absl::StatusOr<RunView> view = central_->GetRun(run);
    if (view.ok() && IsTerminal(view->run.status) &&
        ChildReportsAtEdge() == 0) {
      bool owed = false;
      for (const ChildLinkRecord& l : LinksOf(ParentTaskOf(run))) {
        owed = owed || l.status == ChildStatus::kPending || !l.cascaded;
      }
      if (!owed) return true;
    }
    Sweep();
  }
  return false;
}

void CrossStore::ExpectSettledOnce(const RunId& run) {
  SCOPED_TRACE(absl::StrCat("parent run ", run.ToString()));
  EXPECT_EQ(DriveChildren(), 0) << "a child was left to run";
  absl::StatusOr<int> relayed = central_->RelayChildReports();
  EXPECT_TRUE(relayed.ok()) << relayed.status();
  EXPECT_EQ(ChildReportsAtEdge(), 0) << "a report was left at the edge";
  EXPECT_EQ(TimesEnded(run), 1);
  for (const ChildLinkRecord& link : LinksOf(ParentTaskOf(run))) {
    EXPECT_NE(link.status, ChildStatus::kPending) << link.child_index;
    EXPECT_TRUE(link.cascaded) << link.child_index;
  }
}

RunView CrossStore::ParentView(const RunId& run) {
  absl::StatusOr<RunView> view = central_->GetRun(run);
  EXPECT_TRUE(view.ok()) << view.status();
  return view.ok() ? *std::move(view) : RunView();
}

RunView CrossStore::ChildView(const RunId& child) {
  absl::StatusOr<RunView> view = edge_->GetRun(child);
  EXPECT_TRUE(view.ok()) << view.status();
  return view.ok() ? *std::move(view) : RunView();
}

TaskKey CrossStore::ParentTaskOf(const RunId& run) {
  return TaskKey{run, 0, 0};
}

std::vector<ChildLinkRecord> CrossStore::LinksOf(const TaskKey& parent) {
  absl::StatusOr<std::unique_ptr<Transaction>> tx = central_store_->Begin();
  EXPECT_TRUE(tx.ok()) << tx.status();
  if (!tx.ok()) return {};
  absl::StatusOr<std::vector<ChildLinkRecord>> links =
      (*tx)->GetChildLinks(parent, Fields::kAll);
  EXPECT_TRUE(links.ok()) << links.status();
  return links.ok() ? *std::move(links) : std::vector<ChildLinkRecord>();
}

int64_t CrossStore::ChildReportsAtEdge() {
  absl::StatusOr<std::unique_ptr<Transaction>> tx = edge_store_->Begin();
  EXPECT_TRUE(tx.ok()) << tx.status();
  if (!tx.ok()) return -1;
  absl::StatusOr<int64_t> n = (*tx)->CountChildReports();
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *n : -1;
}

std::vector<ChildReport> CrossStore::PeekEdgeReports() {
  absl::StatusOr<std::unique_ptr<Transaction>> tx = edge_store_->Begin();
  EXPECT_TRUE(tx.ok()) << tx.status();
  if (!tx.ok()) return {};
  absl::StatusOr<std::vector<ChildReport>> all =
      (*tx)->PeekChildReports(0, 1000);
  EXPECT_TRUE(all.ok()) << all.status();
  return all.ok() ? *std::move(all) : std::vector<ChildReport>();
}

void CrossStore::AppendEdgeReports(std::vector<ChildReport> reports) {
  absl::StatusOr<std::unique_ptr<Transaction>> tx = edge_store_->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  ASSERT_TRUE((*tx)->AppendChildReports(reports).ok());
  ASSERT_TRUE((*tx)->Commit().ok());
}

int CrossStore::TimesEnded(const RunId& run) {
  int n = 0;
  for (const Event& e : ended_) n += e.run_id == run ? 1 : 0;
  return n;
}

Json CrossStore::Items(std::initializer_list<int> ns) {
  boost::json::array items;
  for (int n : ns) items.push_back(boost::json::object{{"n", n}});
  return Json(std::move(items));
}

}  // namespace sluice::testing
