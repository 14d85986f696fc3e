// Responses, times, truncated payloads and the flow catalog shared by the
// dashboard API's handlers.
#include <algorithm>
#include <string>
#include <utility>

#include "boost/json/object.hpp"
#include "dashboard/api_internal.h"
#include "sluice/internal/strings.h"

namespace sluice::dashboard {
namespace {

// A preview's length: about 1 KiB, cut back to a whole UTF-8 character.
constexpr size_t kPreviewBytes = 1024;

size_t Utf8Prefix(std::string_view text, size_t limit) {
  if (text.size() <= limit) return text.size();
  size_t end = limit;
  // Back off continuation bytes (10xxxxxx) so no character is split.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return end;
}

}  // namespace

void SendJson(httplib::Response& response, int status, const Json& body) {
  response.status = status;
  response.set_header("Cache-Control", "no-store");
  response.set_content(SerializeJson(body), "application/json");
}

void SendError(httplib::Response& response, int status,
               std::string_view message) {
  SendJson(response, status, boost::json::object{{"error", message}});
}

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

void SendStatus(httplib::Response& response, const absl::Status& status) {
  // Engine errors name ids, flows and steps, never payload values.
  SendError(response, HttpStatusOf(status), ToStd(status.message()));
}

Json TimeJson(absl::Time t) {
  return Json(absl::FormatTime(absl::RFC3339_full, t, absl::UTCTimeZone()));
}

Json TimeJson(const std::optional<absl::Time>& t) {
  return t ? TimeJson(*t) : Json(nullptr);
}

absl::StatusOr<absl::Time> ParseTime(std::string_view text,
                                     std::string_view what) {
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, ToAbsl(text), &t, &error)) {
    return absl::InvalidArgumentError(
        StrCat(what, " \"", text,
               "\" is not an RFC 3339 time (like 2026-12-02T11:00:00Z)"));
  }
  return t;
}

Json Payload(const Json& value, size_t max_bytes) {
  std::string text = SerializeJson(value);
  if (text.size() <= max_bytes) return value;
  return boost::json::object{
      {"truncated", true},
      {"bytes", text.size()},
      {"preview", text.substr(0, Utf8Prefix(text, kPreviewBytes))}};
}

Json Payload(const std::optional<Json>& value, size_t max_bytes) {
  return value ? Payload(*value, max_bytes) : Json(nullptr);
}

absl::StatusOr<RunId> ParseRunIdParam(std::string_view text) {
  absl::StatusOr<RunId> id = RunId::Parse(text);
  if (!id.ok() || id->IsNil()) {
    return absl::InvalidArgumentError(
        StrCat("\"", text.substr(0, 64),
               "\" is not a run id (36 characters, like "
               "0190f2a4-5b6c-7d8e-9f00-112233445566)"));
  }
  return *id;
}

absl::StatusOr<FlowCatalog> FlowCatalog::Read(Engine& engine) {
  const absl::Time read_at = engine.clock().Now();
  absl::StatusOr<std::unique_ptr<Transaction>> tx = engine.backend().Begin();
  if (!tx.ok()) return tx.status();
  absl::StatusOr<std::vector<FlowRecord>> flows = (*tx)->ListFlows();
  if (!flows.ok()) return flows.status();
  absl::StatusOr<std::vector<AliasRecord>> aliases = (*tx)->ListAliases();
  if (!aliases.ok()) return aliases.status();
  FlowCatalog catalog;
  catalog.read_at = read_at;
  for (FlowRecord& record : *flows) {
    FlowEntry entry;
    entry.slug = record.slug;
    entry.alias = record.alias.empty() ? record.slug : record.alias;
    entry.created_at = record.created_at;
    // An unreadable definition still lists the version, without steps.
    absl::StatusOr<FlowShape> shape = FlowShape::FromJson(record.definition);
    if (shape.ok()) entry.shape = *std::move(shape);
    if (!entry.shape.steps.empty()) {
      entry.queue = entry.shape.steps.front().queue_name;
    }
    catalog.flows.emplace(entry.slug, std::move(entry));
  }
  for (const AliasRecord& alias : *aliases) {
    catalog.active[alias.alias] = alias.active_slug;
  }
  // A flow that is its own alias without an alias row is active.
  for (const auto& [slug, entry] : catalog.flows) {
    if (entry.alias == slug && !catalog.active.contains(slug)) {
      catalog.active[slug] = slug;
    }
  }
  return catalog;
}

const FlowEntry* FlowCatalog::Find(std::string_view slug) const {
  auto it = flows.find(std::string(slug));
  return it == flows.end() ? nullptr : &it->second;
}

std::vector<std::string> FlowCatalog::SlugsOf(std::string_view name) const {
  std::vector<std::string> slugs;
  for (const auto& [slug, entry] : flows) {
    if (entry.alias == name) slugs.push_back(slug);
  }
  if (slugs.empty()) slugs.emplace_back(name);
  return slugs;
}

}  // namespace sluice::dashboard
