// Prometheus metrics of the gateway, rendered as text exposition format 0.0.4. Plain
// counters and fixed-bucket histograms; everything runs on one thread, so no atomics.
// PrometheusText is the one writer of that format: the gateway's own figures (Metrics) and
// each model's (/metrics, gateway/http/health.cpp) go through it.
//
//   PrometheusText out;
//   out.counter("inkling_prompt_tokens_total", "Prompt tokens sent to the engine.", 42);
//   out.family("inkling_model_up", "gauge", "1 while the model's engine is ready.");
//   out.sample("inkling_model_up", "model=\"demo\"", 1);
//   std::string text = out.text();
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace inkling::gateway {

struct Counter {
    double value = 0;
    void inc(double by = 1) { value += by; }
};

struct Histogram {
    explicit Histogram(std::vector<double> bounds) : bounds(std::move(bounds)), counts(this->bounds.size(), 0) {}
    void observe(double v);
    std::vector<double> bounds;
    std::vector<std::uint64_t> counts;  // per bucket (not cumulative)
    std::uint64_t count = 0;
    double sum = 0;
};

class PrometheusText {
public:
    // A family's HELP and TYPE lines; its samples follow.
    void family(std::string_view name, std::string_view type, std::string_view help);
    // One sample: `labels` is what goes between the braces (`model="demo"`), "" for none.
    // Values are written with 10 significant digits; counts exactly.
    void sample(std::string_view name, std::string_view labels, double value);
    void sample_count(std::string_view name, std::string_view labels, std::uint64_t count);
    // A family of one unlabelled sample.
    void counter(std::string_view name, std::string_view help, double value);
    void gauge(std::string_view name, std::string_view help, double value);
    // A histogram's cumulative buckets, +Inf, sum and count.
    void histogram(std::string_view name, std::string_view help, const Histogram& h);
    const std::string& text() const { return text_; }

private:
    std::string text_;
};

class Metrics {
public:
    Metrics();
    // Requests by endpoint and HTTP status.
    void request(const std::string& endpoint, int status) { ++requests_[{endpoint, status}]; }
    Counter tokens_in, tokens_out, engine_restarts, device_losses, requests_retried, client_cancels;
    Histogram ttft, inter_token, e2e, queue_wait;
    // Filled in by the caller just before write().
    double queue_depth = 0, active = 0;
    // The gateway's own families, in a fixed order (the models' follow them on /metrics).
    void write(PrometheusText& out) const;
    std::uint64_t requests_total() const;

private:
    std::map<std::pair<std::string, int>, std::uint64_t> requests_;
};

}  // namespace inkling::gateway
