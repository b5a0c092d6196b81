// Prometheus metrics of the gateway, rendered as text exposition format 0.0.4. Plain
// counters and fixed-bucket histograms; everything runs on one thread, so no atomics.
#pragma once

#include <cstdint>
#include <map>
#include <string>
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

class Metrics {
public:
    Metrics();
    // Requests by endpoint and HTTP status.
    void request(const std::string& endpoint, int status) { ++requests_[{endpoint, status}]; }
    Counter tokens_in, tokens_out, engine_restarts, device_losses, requests_retried, client_cancels;
    Histogram ttft, inter_token, e2e, queue_wait;
    // Filled in by the caller just before render().
    double queue_depth = 0, active = 0;
    std::string render(const std::string& extra_gauges) const;
    std::uint64_t requests_total() const;

private:
    std::map<std::pair<std::string, int>, std::uint64_t> requests_;
};

}  // namespace inkling::gateway
