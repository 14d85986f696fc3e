// GET /api/events: a text/event-stream of the engine's run and step events
// (ids, names and kinds; never payloads), with a `: ping` comment every 15
// seconds. A stream ends when its client goes or the server stops.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "boost/json/object.hpp"
#include "dashboard/api_internal.h"
#include "dashboard/catalog_cache.h"
#include "dashboard/event_hub.h"
#include "sluice/internal/strings.h"

namespace sluice::dashboard {
namespace {

constexpr absl::Duration kPingEvery = absl::Seconds(15);
// How often a quiet stream looks up whether the server is stopping.
constexpr absl::Duration kPoll = absl::Milliseconds(500);

// One client's stream: formats its events, naming each run's alias.
class EventStream {
 public:
  EventStream(std::shared_ptr<CatalogCache> catalogs,
              std::shared_ptr<EventHub> hub,
              std::shared_ptr<EventHub::Stream> stream)
      : catalogs_(std::move(catalogs)),
        hub_(std::move(hub)),
        stream_(std::move(stream)) {}
  ~EventStream() { hub_->Close(stream_); }

  // httplib calls this until it returns false or the sink is done.
  bool Next(httplib::DataSink& sink) {
    if (!greeted_) {
      greeted_ = true;
      last_write_ = absl::Now();
      return Write(sink, "retry: 3000\n: connected\n\n");
    }
    std::vector<StreamEvent> events;
    int64_t dropped = 0;
    if (!hub_->Wait(*stream_, kPoll, events, dropped)) {
      sink.done();  // the server is stopping
      return true;
    }
    std::string text;
    for (const StreamEvent& event : events) text += Frame(event);
    if (dropped != reported_dropped_) {
      StrAppend(&text, ": dropped ", dropped - reported_dropped_,
                " events (the client read too slowly)\n\n");
      reported_dropped_ = dropped;
    }
    if (text.empty() && absl::Now() - last_write_ >= kPingEvery) {
      text = ": ping\n\n";
    }
    if (text.empty()) return true;
    last_write_ = absl::Now();
    return Write(sink, text);
  }

 private:
  static bool Write(httplib::DataSink& sink, const std::string& text) {
    return sink.write(text.data(), text.size());
  }

  const std::string& AliasOf(const std::string& slug) {
    auto it = aliases_.find(slug);
    if (it != aliases_.end()) return it->second;
    // A flow new to this stream: look it up once.
    absl::StatusOr<std::shared_ptr<const FlowCatalog>> catalog =
        catalogs_->GetNamed(slug);
    const FlowEntry* flow = catalog.ok() ? (*catalog)->Find(slug) : nullptr;
    return aliases_[slug] = flow ? flow->alias : slug;
  }

  std::string Frame(const StreamEvent& event) {
    const bool is_run = event.step_slug.empty();
    boost::json::object data{
        {"run_id", event.run_id},
        {"flow", AliasOf(event.flow_slug)},
        {"version", event.flow_slug},
        {"kind", ToString(event.kind)},
        {"step", is_run ? Json(nullptr) : Json(event.step_slug)}};
    return StrCat("event: ", is_run ? "run" : "step",
                  "\ndata: ", SerializeJson(data), "\n\n");
  }

  std::shared_ptr<CatalogCache> catalogs_;
  std::shared_ptr<EventHub> hub_;
  std::shared_ptr<EventHub::Stream> stream_;
  std::map<std::string, std::string> aliases_;
  bool greeted_ = false;
  absl::Time last_write_;
  int64_t reported_dropped_ = 0;
};

}  // namespace

void AddEventRoute(httplib::Server& server,
                   std::shared_ptr<CatalogCache> catalogs,
                   std::shared_ptr<EventHub> hub) {
  server.Get("/api/events", [catalogs, hub](const httplib::Request&,
                                            httplib::Response& response) {
    // Subscribed before the response starts: a client that has read the
    // first comment sees every event after it.
    std::shared_ptr<EventHub::Stream> stream = hub->Open();
    if (stream == nullptr) {
      return SendError(
          response, 503,
          StrCat("too many live event streams (at most ", EventHub::kMaxStreams,
                 "); poll the JSON API instead"));
    }
    auto state =
        std::make_shared<EventStream>(catalogs, hub, std::move(stream));
    response.set_header("Cache-Control", "no-store");
    response.set_chunked_content_provider(
        "text/event-stream",
        [state](size_t, httplib::DataSink& sink) { return state->Next(sink); });
  });
}

}  // namespace sluice::dashboard
