// The pure parts of serving several models (#17 item 1): the --model values and per-model
// flags (gateway/engines/model_spec.h), which engines stay resident under the memory budget and the
// idle timeout (gateway/engines/residency.h), and which slot a new conversation takes
// (gateway/engines/affinity_map.h's SlotRecency).
#include <doctest/doctest.h>

#include <stdexcept>

#include "gateway/engines/affinity_map.h"
#include "gateway/engines/model_spec.h"
#include "gateway/engines/residency.h"

using namespace inkling::gateway;
using namespace std::chrono_literals;
using Clock = Residency::Clock;

TEST_CASE("--model values: DIR, ID=DIR; an '=' after a '/' is part of the path") {
    CHECK(parse_model_value("models/inkling-demo").id.empty());
    CHECK(parse_model_value("models/inkling-demo").dir == "models/inkling-demo");
    const ModelSpec named = parse_model_value("demo=models/inkling-demo");
    CHECK(named.id == "demo");
    CHECK(named.dir == "models/inkling-demo");
    CHECK(parse_model_value("./a=b").dir == "./a=b");
    CHECK(parse_model_value("./a=b").id.empty());
    CHECK(parse_model_value("x=/srv/m=1").dir == "/srv/m=1");
    CHECK_THROWS_WITH_AS(parse_model_value("=dir"), "--model =dir: the id before '=' is empty", std::runtime_error);
    CHECK_THROWS_WITH_AS(parse_model_value("demo="), "--model demo=: no model directory", std::runtime_error);
}

TEST_CASE("per-model flags: ID=VALUE naming a --model; ids are checked") {
    std::vector<ModelSpec> specs{{.id = "a", .dir = "/a"}, {.id = "b", .dir = "/b"}};
    auto o = model_option(specs, "model-slots", "b=3");
    CHECK(o.spec == &specs[1]);
    CHECK(o.value == "3");
    CHECK(model_option(specs, "model-engine-arg", "a=--threads=1").value == "--threads=1");
    CHECK_THROWS_WITH_AS(model_option(specs, "model-slots", "3"), "--model-slots 3: expected ID=VALUE", std::runtime_error);
    CHECK_THROWS_WITH_AS(model_option(specs, "model-slots", "c=3"),
                         "--model-slots c=3: no --model is named 'c' (the models: a, b)", std::runtime_error);
    CHECK_NOTHROW(check_model_ids(specs));
    specs.push_back({.id = "a", .dir = "/c"});
    CHECK_THROWS_WITH_AS(check_model_ids(specs), "model id 'a' is given to two --model directories (name them ID=DIR)",
                         std::runtime_error);
    CHECK_THROWS_AS(check_model_ids({{.id = "has space", .dir = "/d"}}), std::runtime_error);
    CHECK_THROWS_AS(check_model_ids({{.id = "", .dir = "/d"}}), std::runtime_error);
}

TEST_CASE("byte sizes: digits with an optional K/M/G/T (powers of 1024)") {
    CHECK(parse_bytes("0", "--memory-budget") == 0);
    CHECK(parse_bytes("1048576", "--memory-budget") == 1048576);
    CHECK(parse_bytes("2G", "--memory-budget") == 2ull << 30);
    CHECK(parse_bytes("512m", "--memory-budget") == 512ull << 20);
    CHECK(parse_bytes("1T", "x") == 1ull << 40);
    for (const char* bad : {"", "G", "1.5G", "-1", "12X", "1234567890123456"})
        CHECK_THROWS_AS(parse_bytes(bad, "--memory-budget"), std::runtime_error);
    CHECK_THROWS_WITH_AS(parse_bytes("lots", "--memory-budget"),
                         "--memory-budget lots: expected bytes, e.g. 8G, 512M or 1048576", std::runtime_error);
}

namespace {

Residency idle(std::uint64_t bytes, Clock::time_point used) {
    return {.bytes = bytes, .resident = true, .unloadable = true, .last_used = used};
}

}  // namespace

TEST_CASE("the memory budget: a load unloads idle models least recently used first, as few as it takes") {
    const auto t = Clock::time_point{} + 1000h;
    // Three resident idle models of 4, 3, 2 GB used at t+1, t+0, t+2; want: 5 GB, budget 10.
    std::vector<Residency> m{idle(4, t + 1s), idle(3, t), idle(2, t + 2s), {.bytes = 5}};
    RoomPlan p = make_room(m, 3, 10);
    CHECK(p.fits);
    CHECK(p.unload == std::vector<std::size_t>{1, 0});  // 9 resident: 3 GB (oldest) is not enough, then 4 GB
    CHECK(make_room(m, 3, 14).unload == std::vector<std::size_t>{});  // fits as it is
    CHECK(make_room(m, 3, 14).fits);
    CHECK(make_room(m, 3, 0).fits);  // no budget
    // A busy model keeps its bytes: with the 4 GB one in use, 4 + 5 fit in 10 only once both others go.
    m[0].unloadable = false;
    p = make_room(m, 3, 10);
    CHECK(p.fits);
    CHECK(p.unload == std::vector<std::size_t>{1, 2});
    // ... and in 8 nothing helps for now: nothing is unloaded in vain.
    p = make_room(m, 3, 8);
    CHECK_FALSE(p.fits);
    CHECK(p.unload.empty());
    // Over the budget alone: never fits.
    CHECK_FALSE(make_room(m, 3, 4).fits);
    // Not resident models take nothing.
    std::vector<Residency> cold{{.bytes = 8}, {.bytes = 8}};
    CHECK(make_room(cold, 1, 8).fits);
    CHECK(make_room(cold, 1, 8).unload.empty());
}

TEST_CASE("the idle timeout: resident unloadable models idle that long, and when the next one will be") {
    const auto t = Clock::time_point{} + 1000h;
    std::vector<Residency> m{idle(1, t), idle(1, t + 10s), {.bytes = 1, .resident = true, .last_used = t},
                             {.bytes = 1, .last_used = t}};
    CHECK(idle_expired(m, t + 29s, 30s).empty());
    CHECK(idle_expired(m, t + 30s, 30s) == std::vector<std::size_t>{0});
    CHECK(idle_expired(m, t + 40s, 30s) == std::vector<std::size_t>{0, 1});  // busy (2) and unloaded (3) never
    CHECK(idle_expired(m, t + 400s, 0s).empty());                            // no timeout
    CHECK(next_idle_expiry(m, 30s) == t + 30s);
    CHECK(next_idle_expiry(m, 0s) == Clock::time_point::max());
    m[0].resident = m[1].resident = false;
    CHECK(next_idle_expiry(m, 30s) == Clock::time_point::max());
}

TEST_CASE("a new conversation takes the slot unused longest; on a fresh engine its hashed one") {
    SlotRecency r(4);
    CHECK(r.coldest(6) == 2);  // all unused: the hashed slot (6 % 4)
    r.touch(2);
    CHECK(r.coldest(6) == 0);  // the lowest unused
    r.touch(0);
    r.touch(1);
    r.touch(3);
    CHECK(r.coldest(6) == 2);  // touched longest ago
    r.touch(2);
    CHECK(r.coldest(5) == 0);
    r.touch(9);  // out of range: ignored
    CHECK(r.coldest(5) == 0);
}
