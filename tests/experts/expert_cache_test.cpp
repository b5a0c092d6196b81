// The expert store, cache and usage history on small synthetic containers (records of
// known bytes): reads and CRCs, every way a container can be broken, LRU with pins,
// rounds, prefetch, counters, and the usage file's round trip, decay and corruption.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "engine/experts/expert_cache.h"
#include "engine/experts/expert_store.h"
#include "engine/experts/usage_history.h"
#include "engine/model/lane_order.h"
#include "tests/experts/error_of.h"
#include "tests/support/scratch_dir.h"

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using namespace inkling;
using test_errors::error_of;
using experts::ExpertCache;
using experts::ExpertStore;
using test_support::ScratchDir;

namespace {


// Byte i of record (layer slot s, expert e): a pattern that tells records apart.
std::byte pattern(int s, int e, std::int64_t i) {
    return static_cast<std::byte>((s * 131 + e * 17 + i * 7 + i / 4096) & 0xff);
}

// A container of `experts` int8 experts (hidden 64, width 32 unless given) on `layers` whose
// records hold pattern() bytes.
experts::ContainerHeader write_container(const fs::path& path, std::vector<int> layers, int experts,
                                         std::int64_t hidden = 64, std::int64_t inter = 32) {
    experts::ContainerHeader h;
    h.format = experts::Format::Int8;
    h.group = 0;
    h.hidden = hidden;
    h.inter = inter;
    h.experts = experts;
    h.layers = std::move(layers);
    h.source = "synthetic";
    h.record_bytes = experts::record_layout(h.format, 32, h.hidden, h.inter).bytes;
    std::vector<std::vector<std::byte>> records;
    std::vector<std::uint32_t> crcs;
    for (std::size_t s = 0; s < h.layers.size(); ++s)
        for (int e = 0; e < experts; ++e) {
            std::vector<std::byte> r(static_cast<std::size_t>(h.record_bytes));
            for (std::size_t i = 0; i < r.size(); ++i) r[i] = pattern(static_cast<int>(s), e, static_cast<std::int64_t>(i));
            crcs.push_back(experts::crc32(r.data(), r.size()));
            records.push_back(std::move(r));
        }
    auto head = experts::encode_header(h, crcs);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
    for (const auto& r : records) out.write(reinterpret_cast<const char*>(r.data()), static_cast<std::streamsize>(r.size()));
    return h;
}

experts::CacheOptions options(int cap, int pins, bool prefetch = true, fs::path usage_file = {}) {
    experts::CacheOptions o;
    o.cap = cap;
    o.pins = pins;
    o.prefetch = prefetch;
    o.usage_file = std::move(usage_file);
    return o;
}

bool holds(const std::byte* buf, std::int64_t bytes, int s, int e) {
    for (std::int64_t i = 0; i < bytes; i += 97)
        if (buf[i] != pattern(s, e, i)) return false;
    return true;
}

void flip_byte(const fs::path& path, std::int64_t at) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(at);
    f.write(&c, 1);
}

// The record a slot view points into: the gate matrix's data sits at the record's start.
const std::byte* record_of(const model::Ffn& f, const ExpertStore& s) { return f.gate.data - s.layout().gate.data_at; }

}  // namespace

TEST_CASE("the store reads each record whole, around the page cache, and views its three matrices") {
    ScratchDir t("experts-store");
    auto h = write_container(t.dir / "experts.inkx", {1, 3}, 4);
    auto store = ExpertStore::open(t.dir / "experts.inkx");
    CHECK(store->record_bytes() == h.record_bytes);
    CHECK(store->layer_slot(3) == 1);
    CHECK(store->layer_slot(2) == -1);
    auto buf = experts::aligned_buffer(static_cast<std::size_t>(store->record_bytes()));
    for (int s = 0; s < 2; ++s)
        for (int e = 0; e < 4; ++e) {
            store->read(h.layers[s], e, buf.get());
            CHECK(holds(buf.get(), store->record_bytes(), s, e));
        }
    auto f = store->view(buf.get());
    CHECK(f.gate.dtype == model::DType::I8);
    CHECK(f.gate.rows == 32);
    CHECK(f.gate.cols == 64);
    CHECK(f.down.rows == 64);
    CHECK(f.down.cols == 32);
    CHECK(record_of(f, *store) == buf.get());
    const auto k = store->counters();
    CHECK(k.reads == 8);
    CHECK(k.bytes == static_cast<std::uint64_t>(8 * h.record_bytes));
    CHECK(error_of([&] { store->read(2, 0, buf.get()); }).find("no record for layer 2") != std::string::npos);
    CHECK(experts::sequential_read_rate(t.dir / "experts.inkx", 1 << 20, 1) > 0);
    CHECK(experts::sequential_read_rate(t.dir / "experts.inkx", 1 << 20, 3) > 0);
}

TEST_CASE("lane order: each read leaves an int8 record's matrices in the lane order, the views say so, values kept") {
    ScratchDir t("experts-lanes");
    // Rows of 544 (one group of 16 blocks and one block after it) and 1,056 columns.
    write_container(t.dir / "experts.inkx", {2}, 2, 544, 1056);
    auto plain = ExpertStore::open(t.dir / "experts.inkx"), lanes = ExpertStore::open(t.dir / "experts.inkx");
    lanes->set_lane_order(true);
    CHECK(lanes->lane_order());
    CHECK_FALSE(plain->lane_order());
    auto a = experts::aligned_buffer(static_cast<std::size_t>(plain->record_bytes()));
    auto b = experts::aligned_buffer(static_cast<std::size_t>(plain->record_bytes()));
    for (int pass = 0; pass < 2; ++pass)  // the first read checks the CRC, the second does not
        for (int e = 0; e < 2; ++e) {
            plain->read(2, e, a.get());
            lanes->read(2, e, b.get(), true);
            CHECK(std::memcmp(a.get(), b.get(), static_cast<std::size_t>(plain->record_bytes())) != 0);
            const model::Ffn fa = plain->view(a.get()), fb = lanes->view(b.get(), true);
            for (const auto& [ma, mb] : {std::pair{fa.gate, fb.gate}, {fa.up, fb.up}, {fa.down, fb.down}}) {
                CHECK_FALSE(ma.lane_packed);
                CHECK(mb.lane_packed);
                // The same values (their bits: pattern() scales may be NaN), each at its lane place.
                bool same = true;
                for (std::int64_t r = 0; r < ma.rows; r += 7)
                    for (std::int64_t c = 0; c < ma.cols; ++c) {
                        const float va = ma.at(r, c), vb = mb.at(r, c);
                        same = same && std::memcmp(&va, &vb, 4) == 0 &&
                               ma.row(r)[c] == mb.row(r)[model::lane_offset(model::DType::I8, c, ma.cols)];
                    }
                CHECK(same);
            }
        }
}

TEST_CASE("the cache asks for the lane order on the records it keeps: pinned ones, and all when every expert fits") {
    ScratchDir t("experts-cache-lanes");
    write_container(t.dir / "experts.inkx", {0}, 4, 544, 1056);
    auto store = ExpertStore::open(t.dir / "experts.inkx");
    store->set_lane_order(true);
    auto packed = [](const model::Ffn& f) { return f.gate.lane_packed && f.up.lane_packed && f.down.lane_packed; };
    {
        ExpertCache all(store, options(4, 0, false));
        auto lease = all.acquire(0, std::vector<int>{0, 1, 2, 3});
        for (const auto& f : lease.ffn()) CHECK(packed(f));
    }
    // Of 3 slots, 1 pinned: only the pinned expert's record is packed (the others are read
    // and evicted in turn, where packing would cost each read more than it saves).
    experts::UsageHistory h({0}, 4);
    h.add(0, 2, 5);  // expert 2 the one with use: the pin
    h.save(t.dir / "usage.json");
    ExpertCache some(store, options(3, 1, false, t.dir / "usage.json"));
    REQUIRE(some.pinned_total() == 1);
    CHECK(some.pinned(0, 2));
    int pinned_seen = 0, other_seen = 0;
    for (int e = 0; e < 4; ++e) {
        auto lease = some.acquire(0, std::vector<int>{e});
        const bool pinned = some.pinned(0, e);
        CHECK(packed(lease.ffn()[0]) == pinned);
        CHECK_FALSE((lease.ffn()[0].gate.lane_packed != lease.ffn()[0].down.lane_packed));
        (pinned ? pinned_seen : other_seen)++;
    }
    CHECK(pinned_seen == 1);
    CHECK(other_seen == 3);
    // A store left off (another ISA, --lane-order off) never packs.
    auto plain = ExpertStore::open(t.dir / "experts.inkx");
    ExpertCache none(plain, options(4, 0, false));
    auto lease = none.acquire(0, std::vector<int>{0, 1, 2, 3});
    for (const auto& f : lease.ffn()) CHECK_FALSE(f.gate.lane_packed);
}

TEST_CASE("a broken container is a clear error: bad magic, truncation, a flipped record byte, another model") {
    ScratchDir t("experts-broken");
    const fs::path p = t.dir / "experts.inkx";
    auto h = write_container(p, {2, 4}, 3);
    {
        flip_byte(p, 0);
        CHECK(error_of([&] { ExpertStore::open(p); }).find("bad magic") != std::string::npos);
        flip_byte(p, 0);
    }
    {
        fs::resize_file(p, static_cast<std::uintmax_t>(h.file_bytes() - 100));
        auto e = error_of([&] { ExpertStore::open(p); });
        CHECK(e.find(p.string()) != std::string::npos);
        CHECK(e.find("truncated") != std::string::npos);
        write_container(p, {2, 4}, 3);
    }
    {
        // Layer 4 (second in the file), expert 1: a CRC error naming both, on every read
        // until the file is fixed; other records still read.
        flip_byte(p, h.record_offset(3 + 1) + 1234);
        auto store = ExpertStore::open(p);
        auto buf = experts::aligned_buffer(static_cast<std::size_t>(store->record_bytes()));
        auto e = error_of([&] { store->read(4, 1, buf.get()); });
        CHECK(e.find(p.string()) != std::string::npos);
        CHECK(e.find("CRC mismatch") != std::string::npos);
        CHECK(e.find("layer 4, expert 1") != std::string::npos);
        CHECK(error_of([&] { store->read(4, 1, buf.get()); }).find("CRC mismatch") != std::string::npos);
        CHECK_NOTHROW(store->read(4, 0, buf.get()));
        // Through the cache: acquire reports it, and the cache goes on serving.
        ExpertCache cache(store, options(2, 0));
        std::vector<int> bad{1}, good{0, 2};
        CHECK(error_of([&] { cache.acquire(4, bad); }).find("layer 4, expert 1") != std::string::npos);
        CHECK(!cache.resident(4, 1));
        auto lease = cache.acquire(4, good);
        CHECK(holds(record_of(lease.ffn()[1], *store), store->record_bytes(), 1, 2));
    }
    {
        write_container(p, {2, 4}, 3);
        auto store = ExpertStore::open(p);
        model::Config c;
        c.hidden = 64;
        c.moe_inter = 32;
        c.experts = 3;
        c.layers = 5;
        c.kinds.assign(5, {});
        c.kinds[2].sparse = c.kinds[4].sparse = true;
        CHECK_NOTHROW(store->check_config(c));
        c.experts = 4;
        CHECK(error_of([&] { store->check_config(c); }).find("expert count is 3 in the container but 4") !=
              std::string::npos);
        c.experts = 3;
        c.kinds[3].sparse = true;
        CHECK(error_of([&] { store->check_config(c); }).find("sparse layer list is [2,4] in the container but [2,3,4]") !=
              std::string::npos);
        c.kinds[3].sparse = false;
        c.hidden = 128;
        CHECK(error_of([&] { store->check_config(c); }).find("hidden is 64") != std::string::npos);
    }
}

TEST_CASE("the cache: least recently used out, hits and misses counted, views valid while leased") {
    ScratchDir t("experts-lru");
    write_container(t.dir / "experts.inkx", {0}, 6);
    auto store = ExpertStore::open(t.dir / "experts.inkx");
    ExpertCache cache(store, options(3, 0, false));
    CHECK(cache.cap() == 3);
    CHECK(cache.pinned_total() == 0);
    auto take = [&](std::vector<int> ids) {
        auto lease = cache.acquire(0, ids);
        REQUIRE(lease.ffn().size() == ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i)
            CHECK(holds(record_of(lease.ffn()[i], *store), store->record_bytes(), 0, ids[i]));
    };
    take({0, 1, 2});  // 3 misses, read in parallel
    take({1});        // hit
    take({3});        // evicts 0 (least recently used)
    CHECK(!cache.resident(0, 0));
    CHECK(cache.resident(0, 1));
    CHECK(cache.resident(0, 2));
    CHECK(cache.resident(0, 3));
    take({4, 5});     // evicts 2 and 1
    CHECK(cache.resident(0, 3));
    CHECK(!cache.resident(0, 1));
    auto k = cache.counters();
    CHECK(k.hits == 1);
    CHECK(k.misses == 6);
    CHECK(k.bytes_read == static_cast<std::uint64_t>(6 * store->record_bytes()));
    CHECK(k.hit_pct() == doctest::Approx(100.0 / 7));
    // A round never holds more than the slots.
    std::vector<int> all{0, 1, 2, 3, 4, 5};
    CHECK(cache.round_size(0, all) == 3);
    CHECK(cache.slot_bytes() == static_cast<std::size_t>(3 * store->record_bytes()));
}

TEST_CASE("pinned experts are read at start, never evicted, and leave the rest of the slots to the round") {
    ScratchDir t("experts-pins");
    write_container(t.dir / "experts.inkx", {1, 2}, 8);
    experts::UsageHistory h({1, 2}, 8);
    h.add(0, 5, 10);
    h.add(0, 2, 7);
    h.add(0, 6, 1);
    h.add(1, 7, 3);  // layer 2: one expert with any use, so one pin
    h.save(t.dir / "usage.json");
    auto store = ExpertStore::open(t.dir / "experts.inkx");
    ExpertCache cache(store, options(4, 2, false, t.dir / "usage.json"));
    CHECK(cache.pinned_total() == 3);
    CHECK(cache.pinned(1, 5));
    CHECK(cache.pinned(1, 2));
    CHECK(!cache.pinned(1, 6));
    CHECK(cache.pinned(2, 7));
    CHECK(cache.resident(1, 5));
    CHECK(cache.resident(2, 7));
    CHECK(store->counters().reads == 3);
    // Layer 1 has 2 free slots: a round takes pinned experts freely, two others at most.
    std::vector<int> ids{0, 1, 2, 3, 5};
    CHECK(cache.round_size(1, ids) == 3);  // 0, 1, pinned 2; then 3 would be the third other
    std::vector<int> tail{3, 5};
    CHECK(cache.round_size(1, tail) == 2);
    for (int round = 0; round < 3; ++round)
        for (int e : {0, 1, 3, 4, 6}) {
            std::vector<int> one{e};
            cache.acquire(1, one);
        }
    CHECK(cache.resident(1, 5));
    CHECK(cache.resident(1, 2));
    CHECK(cache.counters().hits == 0);  // two free slots for five experts round robin
}

TEST_CASE("prefetch fills free slots without blocking, and the next acquire finds them") {
    ScratchDir t("experts-prefetch");
    write_container(t.dir / "experts.inkx", {0, 1}, 8);
    auto store = ExpertStore::open(t.dir / "experts.inkx");
    ExpertCache cache(store, options(2, 0));
    std::vector<int> want{3, 5, 6};
    cache.prefetch(1, want);  // two slots: 3 and 5
    std::vector<int> ids{3, 5};
    auto lease = cache.acquire(1, ids);
    CHECK(holds(record_of(lease.ffn()[0], *store), store->record_bytes(), 1, 3));
    const auto k = cache.counters();
    CHECK(k.prefetched == 2);
    CHECK(k.hits == 2);
    CHECK(k.prefetch_hits == 2);
    CHECK(k.misses == 0);
    // Slots in use are not taken by a prefetch.
    std::vector<int> other{0, 1};
    cache.prefetch(1, other);
    CHECK(cache.counters().prefetched == 2);
    lease.release();
    cache.prefetch(1, other);
    CHECK(cache.counters().prefetched == 4);
}

TEST_CASE("the warm-up reads every expert a cache of cap E holds, and then nothing misses") {
    ScratchDir t("experts-warm-all");
    write_container(t.dir / "experts.inkx", {1, 3}, 8);
    auto store = ExpertStore::open(t.dir / "experts.inkx");
    auto o = options(0, 0);
    o.warm = true;
    ExpertCache cache(store, o);
    cache.wait_warm();
    CHECK(cache.warm_pending() == 0);
    CHECK(cache.counters().warmed == 16);
    CHECK(store->counters().reads == 16);
    for (int layer : {1, 3})
        for (int e = 0; e < 8; ++e) {
            CAPTURE(layer);
            CAPTURE(e);
            CHECK(cache.resident(layer, e));
            std::vector<int> one{e};
            auto lease = cache.acquire(layer, one);
            CHECK(holds(record_of(lease.ffn()[0], *store), store->record_bytes(), layer == 1 ? 0 : 1, e));
        }
    const auto k = cache.counters();
    CHECK(k.misses == 0);
    CHECK(k.hits == 16);
    CHECK(k.prefetch_hits == 16);  // owed to the warm-up
    CHECK(cache.describe().find("warm-up 0 reads") != std::string::npos);
}

TEST_CASE("the warm-up fills only empty slots, most used experts first, and never evicts") {
    ScratchDir t("experts-warm-some");
    write_container(t.dir / "experts.inkx", {0}, 8);
    experts::UsageHistory h({0}, 8);
    h.add(0, 6, 9);
    h.add(0, 4, 5);
    h.add(0, 1, 2);
    h.save(t.dir / "usage.json");
    auto store = ExpertStore::open(t.dir / "experts.inkx");
    auto o = options(4, 1, true, t.dir / "usage.json");
    o.warm = true;
    ExpertCache cache(store, o);  // pins 6; three empty slots: 4, 1, then the unused 0
    cache.wait_warm();
    CHECK(cache.pinned(0, 6));
    CHECK(cache.counters().warmed == 3);
    for (int e : {6, 4, 1, 0}) CHECK(cache.resident(0, e));
    for (int e : {2, 3, 5, 7}) CHECK(!cache.resident(0, e));
    // A full cache evicts on demand as before; the warm-up adds nothing more.
    std::vector<int> ids{2, 3};
    cache.acquire(0, ids);
    cache.wait_warm();
    CHECK(cache.counters().warmed == 3);
    CHECK(cache.counters().misses == 2);
    CHECK(cache.resident(0, 6));

    // Without --warm-experts nothing is read beyond the pins.
    auto store2 = ExpertStore::open(t.dir / "experts.inkx");
    ExpertCache cold(store2, options(4, 1, true, t.dir / "usage.json"));
    cold.wait_warm();
    CHECK(cold.counters().warmed == 0);
    CHECK(store2->counters().reads == 1);
    CHECK(cold.describe().find("warm-up off") != std::string::npos);
}

TEST_CASE("a cache ended during its warm-up stops at once and loses nothing it had") {
    ScratchDir t("experts-warm-stop");
    write_container(t.dir / "experts.inkx", {0, 1, 2, 3}, 16);
    auto store = ExpertStore::open(t.dir / "experts.inkx");
    for (int round = 0; round < 5; ++round) {
        auto o = options(0, 0);
        o.warm = true;
        o.io_threads = 1;
        auto cache = std::make_unique<ExpertCache>(store, o);
        std::vector<int> ids{round, 15 - round};
        auto lease = cache->acquire(2, ids);  // a demand read overtakes the warm-up's queue
        CHECK(holds(record_of(lease.ffn()[1], *store), store->record_bytes(), 2, 15 - round));
        lease.release();
        cache.reset();  // joins with warm-up reads still queued
    }
}

TEST_CASE("the usage history: round trip, decay by half-life, the top experts, broken files start empty") {
    ScratchDir t("experts-usage");
    const fs::path p = t.dir / "expert-usage.json";
    experts::UsageHistory h({2, 5}, 4, 100.0);
    h.add(0, 1, 8);
    h.add(0, 3, 8);
    h.add(0, 2, 9);
    h.add(1, 0, 2);
    CHECK(h.top(0, 2) == std::vector<int>{2, 1});  // ties: the lower id
    CHECK(h.top(1, 3) == std::vector<int>{0});      // only experts with a count
    h.add_tokens(100);                              // one half-life
    CHECK(h.count(0, 2) == doctest::Approx(4.5));
    h.add_tokens(50);
    CHECK(h.count(1, 0) == doctest::Approx(1.0 / std::sqrt(2.0)));
    h.save(p);
    std::string warning;
    auto back = experts::UsageHistory::load(p, {2, 5}, 4, warning);
    CHECK(warning.empty());
    CHECK(back.tokens() == 150);
    CHECK(back.half_life() == 100.0);
    CHECK(back.count(0, 2) == h.count(0, 2));
    CHECK(back.top(0, 4) == h.top(0, 4));
    for (const auto& e : fs::directory_iterator(t.dir)) CHECK(e.path() == p);  // no temporary left

    auto load_warning = [&](const std::string& bytes, std::vector<int> layers = {2, 5}, int experts = 4) {
        std::ofstream(p, std::ios::trunc) << bytes;
        auto l = experts::UsageHistory::load(p, layers, experts, warning);
        CHECK(l.top(0, 4).empty());
        return warning;
    };
    CHECK(load_warning("{\"kind\":\"inkling-expert-usage\",\"vers").find("corrupt") != std::string::npos);
    CHECK(load_warning("[1,2]").find("not an expert usage file") != std::string::npos);
    h.save(p);
    std::ifstream in(p);
    std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(load_warning(good, {2, 6}).find("another model") != std::string::npos);
    CHECK(load_warning(good, {2, 5}, 8).find("another model") != std::string::npos);
    auto j = nlohmann::json::parse(good);
    j["counts"][0][1] = -1;
    CHECK(load_warning(j.dump()).find("not negative") != std::string::npos);
    fs::remove(p);
    experts::UsageHistory::load(p, {2, 5}, 4, warning);
    CHECK(warning.empty());  // no file yet: nothing to warn about
    // The cache starts from a corrupt file with a warning and no pins, and saves over it.
    write_container(t.dir / "experts.inkx", {2, 5}, 4);
    std::ofstream(p, std::ios::trunc) << "garbage";
    {
        ExpertCache cache(ExpertStore::open(t.dir / "experts.inkx"), options(2, -1, true, p));
        CHECK(cache.pinned_total() == 0);
        cache.record_use(5, 3, 4);
    }
    auto saved = experts::UsageHistory::load(p, {2, 5}, 4, warning);
    CHECK(warning.empty());
    CHECK(saved.count(1, 3) == 4.0);
}

TEST_CASE("cap from RAM: --ram-gb and the default stay within 1..E") {
    ScratchDir t("experts-cap");
    write_container(t.dir / "experts.inkx", {0, 1}, 8);
    auto store = ExpertStore::open(t.dir / "experts.inkx");
    const double rb = static_cast<double>(store->record_bytes());
    CHECK(experts::cap_for_bytes(*store, 0) == 1);
    CHECK(experts::cap_for_bytes(*store, rb * 2 * 3 + 1) == 3);
    CHECK(experts::cap_for_bytes(*store, 1e15) == 8);
    const int d = experts::default_cap(*store, 0);
    CHECK(d >= 1);
    CHECK(d <= 8);
}

TEST_CASE("the usage history's temporary is a fresh private file: a planted symlink is never written through") {
    ScratchDir t("experts-usage-tmp");
    const fs::path p = t.dir / "expert-usage.json";
    const fs::path victim = t.dir / "victim.txt";
    std::ofstream(victim) << "keep me\n";
    // The name the old code used, predictable from the pid.
    fs::create_symlink(victim, p.string() + ".tmp." + std::to_string(::getpid()));
    experts::UsageHistory h({2}, 4, 100.0);
    h.add(0, 1, 3);
    h.save(p);
    std::ifstream in(victim);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text == "keep me\n");
    CHECK(fs::is_regular_file(fs::symlink_status(p)));
    CHECK((fs::status(p).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
    std::string warning;
    CHECK(experts::UsageHistory::load(p, {2}, 4, warning).count(0, 1) == 3.0);
    int files = 0;
    for (const auto& e : fs::directory_iterator(t.dir)) files += e.path().filename().string().find(".tmp.") == std::string::npos;
    CHECK(files == 2);  // the history and the victim; only the planted link has ".tmp."
}
