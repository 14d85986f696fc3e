// WritePrometheusText: the text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/internal/strings.h"
#include "sluice/metrics.h"

namespace sluice {
namespace {

using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

// Label values escape backslash, double quote and line feed.
void AppendLabelValue(std::string_view value, std::string* out) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '"':
        out->append("\\\"");
        break;
      case '\n':
        out->append("\\n");
        break;
      default:
        out->push_back(c);
    }
  }
}

// The shortest text that reads back as the same double ("0.1", "3").
std::string FormatValue(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  char buffer[64];
  std::to_chars_result r =
      std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, r.ptr);
}

void AppendSample(std::string_view name, const Labels& labels,
                  std::string_view value, std::string* out) {
  out->append(name);
  if (!labels.empty()) {
    out->push_back('{');
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out->push_back(',');
      StrAppend(out, labels[i].first, "=\"");
      AppendLabelValue(labels[i].second, out);
      out->push_back('"');
    }
    out->push_back('}');
  }
  StrAppend(out, " ", value, "\n");
}

void AppendHeader(std::string_view name, std::string_view type,
                  std::string_view help, std::string* out) {
  // Help texts are ours: no backslash or line feed to escape.
  StrAppend(out, "# HELP ", name, " ", help, "\n", "# TYPE ", name, " ", type,
            "\n");
}

void AppendHistogram(std::string_view name, Labels labels,
                     const HistogramSnapshot& h, std::string* out) {
  std::string bucket = StrCat(name, "_bucket");
  int64_t cumulative = 0;
  labels.emplace_back("le", "");
  for (size_t i = 0; i < h.bucket_counts.size(); ++i) {
    cumulative += h.bucket_counts[i];
    std::string le = i < h.upper_bounds.size() ? FormatValue(h.upper_bounds[i])
                                               : std::string("+Inf");
    labels.back().second = le;
    AppendSample(bucket, labels, StrCat(cumulative), out);
  }
  if (h.bucket_counts.empty()) {
    labels.back().second = "+Inf";
    AppendSample(bucket, labels, "0", out);
  }
  labels.pop_back();
  AppendSample(StrCat(name, "_sum"), labels, FormatValue(h.sum), out);
  AppendSample(StrCat(name, "_count"), labels, StrCat(h.count), out);
}

template <typename Row>
void AppendFamily(std::string_view name, std::string_view type,
                  std::string_view help, const std::vector<Row>& rows,
                  const std::function<void(const Row&, std::string*)>& append,
                  std::string* out) {
  AppendHeader(name, type, help, out);
  for (const Row& row : rows) append(row, out);
}

void AppendRunCounters(const MetricsSnapshot& s, std::string* out) {
  struct Counter {
    std::string_view name;
    std::string_view help;
    int64_t FlowRunCounts::*field;
  };
  static constexpr Counter kCounters[] = {
      {"sluice_runs_started_total", "Runs this process started, by flow.",
       &FlowRunCounts::started},
      {"sluice_runs_completed_total",
       "Runs that completed in this process's transactions, by flow.",
       &FlowRunCounts::completed},
      {"sluice_runs_failed_total",
       "Runs that failed in this process's transactions, by flow.",
       &FlowRunCounts::failed},
      {"sluice_runs_cancelled_total",
       "Runs that were cancelled in this process's transactions, by flow.",
       &FlowRunCounts::cancelled},
  };
  for (const Counter& c : kCounters) {
    AppendFamily<FlowRunCounts>(
        c.name, "counter", c.help, s.runs,
        [&c](const FlowRunCounts& r, std::string* o) {
          AppendSample(c.name, {{"flow", r.flow}}, StrCat(r.*c.field), o);
        },
        out);
  }
}

void AppendTaskMetrics(const MetricsSnapshot& s, std::string* out) {
  struct Counter {
    std::string_view name;
    std::string_view help;
    int64_t StepTaskCounts::*field;
  };
  static constexpr Counter kCounters[] = {
      {"sluice_tasks_claimed_total", "Task attempts claimed, by flow and step.",
       &StepTaskCounts::claimed},
      {"sluice_tasks_completed_total", "Tasks completed, by flow and step.",
       &StepTaskCounts::completed},
      {"sluice_tasks_retried_total",
       "Failed attempts queued again for a retry, by flow and step.",
       &StepTaskCounts::retried},
      {"sluice_tasks_failed_total", "Tasks failed for good, by flow and step.",
       &StepTaskCounts::failed},
      {"sluice_tasks_stalled_total",
       "Task leases that ran out and that stall recovery handled, by flow "
       "and step.",
       &StepTaskCounts::stalled},
  };
  for (const Counter& c : kCounters) {
    AppendFamily<StepTaskCounts>(
        c.name, "counter", c.help, s.tasks,
        [&c](const StepTaskCounts& t, std::string* o) {
          AppendSample(c.name, {{"flow", t.flow}, {"step", t.step}},
                       StrCat(t.*c.field), o);
        },
        out);
  }
  AppendFamily<StepTaskCounts>(
      "sluice_task_handler_duration_seconds", "histogram",
      "How long handlers ran, by flow and step.", s.tasks,
      [](const StepTaskCounts& t, std::string* o) {
        AppendHistogram("sluice_task_handler_duration_seconds",
                        {{"flow", t.flow}, {"step", t.step}}, t.handler_seconds,
                        o);
      },
      out);
  AppendFamily<StepTaskCounts>(
      "sluice_task_latency_seconds", "histogram",
      "From a task being queued to its completion being stored, by flow and "
      "step.",
      s.tasks,
      [](const StepTaskCounts& t, std::string* o) {
        AppendHistogram("sluice_task_latency_seconds",
                        {{"flow", t.flow}, {"step", t.step}}, t.latency_seconds,
                        o);
      },
      out);
}

void AppendQueueMetrics(const MetricsSnapshot& s, std::string* out) {
  AppendHeader("sluice_queue_tasks", "gauge",
               "Tasks on a queue by state (waiting, delayed, active), read "
               "from the store.",
               out);
  for (const QueueMetrics& q : s.queues) {
    const std::pair<std::string_view, const std::optional<int64_t>*> states[] =
        {{"waiting", &q.waiting},
         {"delayed", &q.delayed},
         {"active", &q.active}};
    for (const auto& [state, value] : states) {
      if (!value->has_value()) continue;
      AppendSample("sluice_queue_tasks", {{"queue", q.queue}, {"state", state}},
                   StrCat(**value), out);
    }
  }
  AppendHeader("sluice_queue_oldest_waiting_seconds", "gauge",
               "How long the oldest claimable task of a queue has waited (0 "
               "when none waits), read from the store.",
               out);
  for (const QueueMetrics& q : s.queues) {
    if (!q.oldest_waiting_seconds) continue;
    AppendSample("sluice_queue_oldest_waiting_seconds", {{"queue", q.queue}},
                 FormatValue(*q.oldest_waiting_seconds), out);
  }
  AppendFamily<QueueMetrics>(
      "sluice_claim_batch_size", "histogram",
      "Tasks taken by each non-empty claim, by queue.", s.queues,
      [](const QueueMetrics& q, std::string* o) {
        if (q.claim_batch_size.count == 0) return;
        AppendHistogram("sluice_claim_batch_size", {{"queue", q.queue}},
                        q.claim_batch_size, o);
      },
      out);
}

void AppendProcessGauges(const MetricsSnapshot& s, std::string* out) {
  AppendHeader("sluice_store_up", "gauge",
               "1 if the store answered the snapshot's reads, else 0.", out);
  AppendSample("sluice_store_up", {}, s.store_error.empty() ? "1" : "0", out);
  AppendHeader("sluice_outbox_backlog", "gauge",
               "Outbox reports not yet applied, read from the store.", out);
  if (s.outbox_backlog) {
    AppendSample("sluice_outbox_backlog", {}, StrCat(*s.outbox_backlog), out);
  }
  AppendHeader("sluice_workers", "gauge",
               "Workers this process started and has not stopped.", out);
  AppendSample("sluice_workers", {}, StrCat(s.live_workers), out);
}

}  // namespace

void WritePrometheusText(const MetricsSnapshot& snapshot, std::string* out) {
  AppendRunCounters(snapshot, out);
  AppendTaskMetrics(snapshot, out);
  AppendQueueMetrics(snapshot, out);
  AppendProcessGauges(snapshot, out);
}

std::string WritePrometheusText(const MetricsSnapshot& snapshot) {
  std::string out;
  WritePrometheusText(snapshot, &out);
  return out;
}

}  // namespace sluice
