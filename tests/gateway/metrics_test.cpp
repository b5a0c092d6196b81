// The one Prometheus text writer (gateway/metrics.h): the exposition format 0.0.4 byte for
// byte, as scrapers and tests/lib/scrape.py read it.
#include <doctest/doctest.h>

#include <string>

#include "gateway/metrics.h"

using namespace inkling::gateway;

TEST_CASE("PrometheusText writes families, labelled samples, exact counts and 10-digit values") {
    PrometheusText out;
    out.family("inkling_model_up", "gauge", "1 while the model's engine is ready.");
    out.sample("inkling_model_up", "model=\"demo\"", 1);
    out.sample("inkling_model_up", "model=\"small\"", 1.0 / 3);
    out.sample_count("inkling_requests_total", "endpoint=\"chat\",status=\"200\"", 18446744073709551615ull);
    out.counter("inkling_prompt_tokens_total", "Prompt tokens sent to the engine.", 12345678901.0);
    out.gauge("inkling_queue_depth", "Requests waiting for a slot.", 0);
    CHECK(out.text() ==
          "# HELP inkling_model_up 1 while the model's engine is ready.\n"
          "# TYPE inkling_model_up gauge\n"
          "inkling_model_up{model=\"demo\"} 1\n"
          "inkling_model_up{model=\"small\"} 0.3333333333\n"
          "inkling_requests_total{endpoint=\"chat\",status=\"200\"} 18446744073709551615\n"
          "# HELP inkling_prompt_tokens_total Prompt tokens sent to the engine.\n"
          "# TYPE inkling_prompt_tokens_total counter\n"
          "inkling_prompt_tokens_total 1.23456789e+10\n"
          "# HELP inkling_queue_depth Requests waiting for a slot.\n"
          "# TYPE inkling_queue_depth gauge\n"
          "inkling_queue_depth 0\n");
}

TEST_CASE("a histogram is written as cumulative buckets, +Inf, sum and count") {
    Histogram h({0.1, 1});
    h.observe(0.05);
    h.observe(0.5);
    h.observe(7);
    PrometheusText out;
    out.histogram("inkling_queue_wait_seconds", "Time waiting for a slot.", h);
    CHECK(out.text() ==
          "# HELP inkling_queue_wait_seconds Time waiting for a slot.\n"
          "# TYPE inkling_queue_wait_seconds histogram\n"
          "inkling_queue_wait_seconds_bucket{le=\"0.1\"} 1\n"
          "inkling_queue_wait_seconds_bucket{le=\"1\"} 2\n"
          "inkling_queue_wait_seconds_bucket{le=\"+Inf\"} 3\n"
          "inkling_queue_wait_seconds_sum 7.55\n"
          "inkling_queue_wait_seconds_count 3\n");
}

TEST_CASE("the gateway's own families come first, requests by endpoint and status") {
    Metrics m;
    m.request("chat", 200);
    m.request("chat", 200);
    m.request("other", 429);
    PrometheusText out;
    m.write(out);
    CHECK(out.text().starts_with("# HELP inkling_requests_total HTTP requests by endpoint and status.\n"
                                 "# TYPE inkling_requests_total counter\n"
                                 "inkling_requests_total{endpoint=\"chat\",status=\"200\"} 2\n"
                                 "inkling_requests_total{endpoint=\"other\",status=\"429\"} 1\n"
                                 "# HELP inkling_prompt_tokens_total Prompt tokens sent to the engine.\n"));
    CHECK(out.text().ends_with("# HELP inkling_requests_active Requests being served.\n"
                               "# TYPE inkling_requests_active gauge\n"
                               "inkling_requests_active 0\n"));
    CHECK(m.requests_total() == 3);
}
