// /api/events over HTTP: a run's events arrive as server-sent events
// without payloads, and an open stream ends when the server stops.
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "dashboard_api_fixture.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace sluice::testing {
namespace {

// Reads /api/events on its own thread until told to stop or the stream
// ends.
class EventReader {
 public:
  EventReader(const AdminServer& server)
      : client_(server.address(), server.port()) {
    client_.set_read_timeout(60, 0);
    thread_ = std::thread([this] {
      httplib::Result result =
          client_.Get("/api/events", [this](const char* data, size_t length) {
            absl::MutexLock lock(&mu_);
            text_.append(data, length);
            return !stop_;
          });
      status_ = result ? result->status : 0;
      ended_.Notify();
    });
  }
  ~EventReader() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    client_.stop();
    thread_.join();
  }

  // Waits until the stream's text contains every one of `parts`.
  bool WaitFor(std::initializer_list<std::string> parts) {
    auto has_all = [&] {
      for (const std::string& part : parts) {
        if (!absl::StrContains(text_, part)) return false;
      }
      return true;
    };
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&has_all), absl::Seconds(30));
  }
  std::string text() {
    absl::MutexLock lock(&mu_);
    return text_;
  }
  absl::Notification& ended() { return ended_; }

 private:
  httplib::Client client_;
  absl::Mutex mu_;
  std::string text_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int status_ = 0;
  absl::Notification ended_;
  std::thread thread_;
};

using DashboardEventsTest = DashboardApiTest;

TEST_P(DashboardEventsTest, RunCompleted_ArrivesAsAnEvent_WithoutPayloads) {
  StartServer();
  StartWorker(AlbumFlow());
  EventReader reader(*server_);
  ASSERT_TRUE(reader.WaitFor({": connected"})) << reader.text();
  absl::StatusOr<RunId> id = engine_->StartRun(
      "album", boost::json::object{{"items", boost::json::array{20, 22}},
                                   {"marker", "private-value-7731"}});
  ASSERT_TRUE(id.ok()) << id.status();
  const std::string run_id = "\"run_id\":\"" + id->ToString() + "\"";
  ASSERT_TRUE(reader.WaitFor({"event: run\ndata: {" + run_id +
                                  ",\"flow\":\"album\",\"version\":\"album\","
                                  "\"kind\":\"run:completed\",\"step\":null}",
                              "\"kind\":\"step:completed\",\"step\":\"each\"",
                              "event: step\n"}))
      << reader.text();
  std::string text = reader.text();
  EXPECT_TRUE(absl::StrContains(text, "\"kind\":\"run:started\""));
  // Neither the input nor any output is sent.
  EXPECT_FALSE(absl::StrContains(text, "\"value\"")) << text;
  EXPECT_FALSE(absl::StrContains(text, "private-value-7731")) << text;
}

TEST_P(DashboardEventsTest, AnOpenStream_EndsWhenTheServerStops) {
  StartServer();
  EventReader reader(*server_);
  ASSERT_TRUE(reader.WaitFor({": connected"})) << reader.text();
  absl::Notification stopped;
  std::thread stopper([&] {
    server_->Stop();
    stopped.Notify();
  });
  EXPECT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(reader.ended().WaitForNotificationWithTimeout(absl::Seconds(30)));
  stopper.join();
}

INSTANTIATE_TEST_SUITE_P(Backends, DashboardEventsTest, DashboardBackends(),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
