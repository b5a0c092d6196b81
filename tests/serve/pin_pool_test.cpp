// The snapshot pool's bookkeeping (#15 item 7): which snapshot a prompt restores, what a
// restore writes back, its count and byte bounds, and the snapshots a diverging prompt drops.
// The end-to-end exactness of restored states is tests/serve/turn_reuse_e2e.py's.
#include <doctest/doctest.h>

#include "engine/serve/pin_pool.h"
#include "tests/engine/fixture_paths.h"

using namespace inkling;

namespace {

// A state of the ring fixture (window 4 < capacity: its sliding layers are rings) whose
// record is `ids`, every float of it `mark`, so a restore shows which snapshot it came from.
forward::SessionState state_of(const model::Config& c, const std::vector<std::int32_t>& ids, float mark) {
    auto s = forward::make_session(c, 64);
    s.fed = ids;
    s.len = static_cast<std::int64_t>(ids.size());
    for (auto& L : s.layers) {
        std::fill(L.k.begin(), L.k.end(), mark);
        std::fill(L.v.begin(), L.v.end(), mark);
        for (auto& h : L.conv) std::fill(h.begin(), h.end(), mark);
    }
    return s;
}

std::size_t snapshot_bytes(const model::Config& c, std::size_t ids) {
    serve::PinPool probe(1, ~std::size_t{0});
    probe.pin(0, state_of(c, std::vector<std::int32_t>(ids, 3), 1.0f), c);
    return probe.bytes();
}

}  // namespace

TEST_CASE("pin pool: the deepest strict prefix still backed by the slot's record is restored, rings and convs") {
    const auto c = model::load_config(test_paths::fixtures() / "ring-hf-f32");
    serve::PinPool pool(8, 1u << 20);
    pool.pin(0, state_of(c, {1, 2}, 1.0f), c);
    pool.pin(0, state_of(c, {1, 2, 3, 4}, 2.0f), c);
    pool.pin(1, state_of(c, {1, 2, 3, 4, 5}, 3.0f), c);  // another slot's: never restored into slot 0
    auto slot = state_of(c, {1, 2, 3, 4, 9, 9}, 7.0f);
    // A prompt equal to a snapshot's ids is not served by it (a forward needs a new token).
    auto depth = pool.restore(0, std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, slot);
    REQUIRE(depth);
    CHECK(*depth == 4);
    CHECK(slot.fed == std::vector<std::int32_t>{1, 2, 3, 4});
    CHECK(slot.device_token == 0);
    for (std::size_t i = 0; i < slot.layers.size(); ++i) {
        CHECK(slot.layers[i].conv[2].front() == 2.0f);
        // Rings are copied back; global layers' rows stay the slot's (read by position).
        CHECK(slot.layers[i].k.front() == (c.kinds[i].local ? 2.0f : 7.0f));
    }
    // The record no longer holds {1,2,3,4}: only the shallower snapshot is backed.
    auto other = state_of(c, {1, 2, 8}, 7.0f);
    depth = pool.restore(0, std::vector<std::int32_t>{1, 2, 3, 4, 5}, other);
    REQUIRE(depth);
    CHECK(*depth == 2);
    auto tainted = state_of(c, {1, 2, 3, 4, 5}, 7.0f);
    tainted.tainted = true;
    CHECK_FALSE(pool.restore(0, std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, tainted));
    const auto st = pool.stats();
    CHECK(st["restored"] == 2);
    CHECK(st["tokens_restored"] == 6);
}

TEST_CASE("pin pool: counts and bytes bound it, least recently used out first; tainted states are not taken") {
    const auto c = model::load_config(test_paths::fixtures() / "ring-hf-f32");
    const std::size_t each = snapshot_bytes(c, 3);
    REQUIRE(each > 0);
    // What STATS info snapshot_bytes says: the snapshot less its ids.
    CHECK(each == serve::PinPool::state_bytes(c, 64) + 3 * sizeof(std::int32_t));
    // A context no longer than the window has no rings to keep, only the convs.
    CHECK(serve::PinPool::state_bytes(c, 4) < serve::PinPool::state_bytes(c, 64));
    serve::PinPool pool(64, 2 * each + each / 2);  // room for two
    pool.pin(0, state_of(c, {1, 2, 3}, 1.0f), c);
    pool.pin(0, state_of(c, {1, 2, 4}, 1.0f), c);
    auto first = state_of(c, {1, 2, 3}, 0.0f);
    CHECK(pool.restore(0, std::vector<std::int32_t>{1, 2, 3, 9}, first));  // {1,2,3} is now the most recent
    pool.pin(0, state_of(c, {1, 2, 5}, 1.0f), c);
    CHECK(pool.size() == 2);
    CHECK(pool.bytes() == 2 * each);
    CHECK(pool.stats()["evicted"] == 1);
    auto s = state_of(c, {1, 2, 4}, 0.0f);
    CHECK_FALSE(pool.restore(0, std::vector<std::int32_t>{1, 2, 4, 9}, s));  // the one evicted
    // The same ids again are the same state: marked used, not taken twice.
    pool.pin(0, state_of(c, {1, 2, 5}, 1.0f), c);
    CHECK(pool.stats()["taken"] == 3);
    auto audio = state_of(c, {1, 2, 6}, 1.0f);
    audio.tainted = true;
    pool.pin(0, audio, c);
    CHECK(pool.stats()["taken"] == 3);
    serve::PinPool counted(1, 1u << 20);
    counted.pin(0, state_of(c, {1}, 1.0f), c);
    counted.pin(0, state_of(c, {2}, 1.0f), c);
    CHECK(counted.size() == 1);
    serve::PinPool off(8, 0);
    off.pin(0, state_of(c, {1}, 1.0f), c);
    CHECK(off.size() == 0);
}

TEST_CASE("pin pool: a prompt that overwrites the slot past what it keeps drops the snapshots it disagrees with") {
    const auto c = model::load_config(test_paths::fixtures() / "ring-hf-f32");
    serve::PinPool pool(8, 1u << 20);
    pool.pin(0, state_of(c, {1, 2}, 1.0f), c);
    pool.pin(0, state_of(c, {1, 2, 3, 4}, 1.0f), c);
    pool.pin(0, state_of(c, {1, 2, 3, 4, 5, 6}, 1.0f), c);
    pool.pin(1, state_of(c, {1, 2, 7, 7}, 1.0f), c);
    // Slot 0 keeps 2 positions and is fed {1,2,3,4,8,...}: {1,2,3,4} agrees, the deeper one not.
    pool.drop_diverged(0, std::vector<std::int32_t>{1, 2, 3, 4, 8, 9, 9}, 2);
    CHECK(pool.size() == 3);
    CHECK(pool.stats()["diverged"] == 1);
    // A shorter prompt that agrees as far as it goes leaves a deeper snapshot to the record check.
    pool.drop_diverged(0, std::vector<std::int32_t>{1, 2, 3}, 2);
    CHECK(pool.size() == 3);
    pool.drop_slot(0);
    CHECK(pool.size() == 1);
}
