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

void histogram(std::ostringstream& o, const std::string& name, const std::string& help, const Histogram& h) {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.bounds.size(); ++i) {
        cumulative += h.counts[i];
        o << name << "_bucket{le=\"" << number(h.bounds[i]) << "\"} " << cumulative << "\n";
    }
    o << name << "_bucket{le=\"+Inf\"} " << h.count << "\n";
    o << name << "_sum " << number(h.sum) << "\n" << name << "_count " << h.count << "\n";
}

void counter(std::ostringstream& o, const std::string& name, const std::string& help, double v) {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n" << name << " " << number(v) << "\n";
}
}  // namespace

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

std::string Metrics::render(const std::string& extra_gauges) const {
    std::ostringstream o;
    o << "# HELP inkling_requests_total HTTP requests by endpoint and status.\n# TYPE inkling_requests_total counter\n";
    for (const auto& [key, c] : requests_)
        o << "inkling_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second << "\"} " << c << "\n";
    counter(o, "inkling_prompt_tokens_total", "Prompt tokens sent to the engine.", tokens_in.value);
    counter(o, "inkling_completion_tokens_total", "Tokens generated.", tokens_out.value);
    counter(o, "inkling_engine_restarts_total", "Engine restarts (crash, exit or device loss).", engine_restarts.value);
    counter(o, "inkling_device_losses_total", "Device-lost events reported by the engine.", device_losses.value);
    counter(o, "inkling_requests_retried_total", "Requests resubmitted after the engine died before ACCEPT.",
            requests_retried.value);
    counter(o, "inkling_client_cancels_total", "Requests cancelled because the client went away.",
            client_cancels.value);
    histogram(o, "inkling_time_to_first_token_seconds", "From request to the first token.", ttft);
    histogram(o, "inkling_inter_token_seconds", "Between consecutive tokens of a stream.", inter_token);
    histogram(o, "inkling_request_duration_seconds", "From request to the last byte.", e2e);
    histogram(o, "inkling_queue_wait_seconds", "Time waiting for a slot.", queue_wait);
    o << "# HELP inkling_queue_depth Requests waiting for a slot.\n# TYPE inkling_queue_depth gauge\ninkling_queue_depth "
      << number(queue_depth) << "\n";
    o << "# HELP inkling_requests_active Requests being served.\n# TYPE inkling_requests_active gauge\ninkling_requests_active "
      << number(active) << "\n";
    o << extra_gauges;
    return o.str();
}

}  // namespace inkling::gateway
