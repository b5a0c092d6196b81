#include "gateway/metrics.h"

#include <cmath>
#include <sstream>

namespace inkling::gateway {

namespace {
std::vector<double> latency_buckets() {
    return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

std::string number(double v) {
    std::ostringstream o;
    o.precision(10);
    o << v;
    return o.str();
}
}  // namespace

void PrometheusText::family(std::string_view name, std::string_view type, std::string_view help) {
    text_.append("# HELP ").append(name).append(" ").append(help).append("\n# TYPE ").append(name).append(" ");
    text_.append(type).append("\n");
}

void PrometheusText::sample(std::string_view name, std::string_view labels, double value) {
    text_.append(name);
    if (!labels.empty()) text_.append("{").append(labels).append("}");
    text_.append(" ").append(number(value)).append("\n");
}

void PrometheusText::sample_count(std::string_view name, std::string_view labels, std::uint64_t count) {
    text_.append(name);
    if (!labels.empty()) text_.append("{").append(labels).append("}");
    text_.append(" ").append(std::to_string(count)).append("\n");
}

void PrometheusText::counter(std::string_view name, std::string_view help, double value) {
    family(name, "counter", help);
    sample(name, "", value);
}

void PrometheusText::gauge(std::string_view name, std::string_view help, double value) {
    family(name, "gauge", help);
    sample(name, "", value);
}

void PrometheusText::histogram(std::string_view name, std::string_view help, const Histogram& h) {
    family(name, "histogram", help);
    const std::string bucket = std::string(name) + "_bucket";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.bounds.size(); ++i) {
        cumulative += h.counts[i];
        sample_count(bucket, "le=\"" + number(h.bounds[i]) + "\"", cumulative);
    }
    sample_count(bucket, "le=\"+Inf\"", h.count);
    sample(std::string(name) + "_sum", "", h.sum);
    sample_count(std::string(name) + "_count", "", h.count);
}

void Histogram::observe(double v) {
    ++count;
    sum += v;
    for (std::size_t i = 0; i < bounds.size(); ++i)
        if (v <= bounds[i]) {
            ++counts[i];
            return;
        }
}

Metrics::Metrics()
    : ttft(latency_buckets()), inter_token(latency_buckets()), e2e(latency_buckets()), queue_wait(latency_buckets()) {}

std::uint64_t Metrics::requests_total() const {
    std::uint64_t n = 0;
    for (const auto& [_, c] : requests_) n += c;
    return n;
}

void Metrics::write(PrometheusText& out) const {
    out.family("inkling_requests_total", "counter", "HTTP requests by endpoint and status.");
    for (const auto& [key, c] : requests_)
        out.sample_count("inkling_requests_total",
                         "endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"", c);
    out.counter("inkling_prompt_tokens_total", "Prompt tokens sent to the engine.", tokens_in.value);
    out.counter("inkling_completion_tokens_total", "Tokens generated.", tokens_out.value);
    out.counter("inkling_engine_restarts_total", "Engine restarts (crash, exit or device loss).", engine_restarts.value);
    out.counter("inkling_device_losses_total", "Device-lost events reported by the engine.", device_losses.value);
    out.counter("inkling_requests_retried_total", "Requests resubmitted after the engine died before ACCEPT.",
                requests_retried.value);
    out.counter("inkling_client_cancels_total", "Requests cancelled because the client went away.",
                client_cancels.value);
    out.histogram("inkling_time_to_first_token_seconds", "From request to the first token.", ttft);
    out.histogram("inkling_inter_token_seconds", "Between consecutive tokens of a stream.", inter_token);
    out.histogram("inkling_request_duration_seconds", "From request to the last byte.", e2e);
    out.histogram("inkling_queue_wait_seconds", "Time waiting for a slot.", queue_wait);
    out.gauge("inkling_queue_depth", "Requests waiting for a slot.", queue_depth);
    out.gauge("inkling_requests_active", "Requests being served.", active);
}

}  // namespace inkling::gateway
