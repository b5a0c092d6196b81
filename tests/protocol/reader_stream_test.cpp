// Randomized streams of valid and invalid frames, fed in random chunk sizes: the reader
// yields exactly the expected sequence (never desynchronises) and never crashes.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "protocol/frame_encode.h"
#include "protocol/frame_reader.h"

using namespace inkling::protocol;

namespace {

struct Piece {
    std::string wire;
    std::string expect;  // "frame:<encoding>" or "problem:<id>:<CODE>"
};

Piece valid_piece(std::mt19937& rng, int n) {
    std::uniform_int_distribution<int> kind(0, 3);
    std::string id = "r" + std::to_string(n);
    Frame f;
    switch (kind(rng)) {
    case 0: {
        Submit s;
        s.id = id;
        s.slot = static_cast<std::uint32_t>(rng() % 4);
        s.max_tokens = 1 + rng() % 100;
        s.temperature = (rng() % 200) / 100.0;
        s.top_p = (1 + rng() % 100) / 100.0;
        std::size_t len = 1 + rng() % 300;
        for (std::size_t i = 0; i < len; ++i) s.prompt += static_cast<char>(1 + rng() % 255);
        if (rng() % 3 == 0) s.extension.assign(80 * (1 + rng() % 3), '\x07');
        if (rng() % 2) s.options.seed = rng();
        f = s;
        break;
    }
    case 1: f = Stop{id}; break;
    case 2: f = Cancel{id}; break;
    default: f = StatsRequest{}; break;
    }
    std::string wire = encode(f);
    return {wire, "frame:" + wire};
}

Piece invalid_piece(std::mt19937& rng, int n) {
    std::string id = "bad" + std::to_string(n);
    switch (rng() % 7) {
    case 0: return {"garbage here\n", "problem:0:BAD_REQUEST"};
    case 1: return {std::string(5000, 'G') + "\n", "problem:0:BAD_FRAME"};
    case 2: return {"SUBMIT " + id + " 0 4 9 7 1\nSTOP\n", "problem:" + id + ":BAD_REQUEST"};  // temp 7
    case 3: return {"SUBMIT " + id + " 0 3 9 0 1\nabcZ", "problem:" + id + ":BAD_FRAME"};      // no LF
    case 4: return {"SUBMIT " + id + " 0 3 9 0 1\n" + std::string("a\0c\n", 4), "problem:" + id + ":BAD_REQUEST"};
    case 5: return {"CANCEL a b\n", "problem:a:BAD_REQUEST"};
    default: return {"SUBMIT " + id + " 0 x 9 0 1\n", "problem:" + id + ":BAD_REQUEST"};
    }
}

std::string describe(const ReadItem& item) {
    if (auto* f = std::get_if<Frame>(&item)) return "frame:" + encode(*f);
    const auto& p = std::get<Problem>(item);
    return "problem:" + p.id + ":" + std::string(to_string(p.code));
}

}  // namespace

TEST_CASE("random streams of valid and invalid frames never desynchronise") {
    std::mt19937 rng(20261129);
    for (int round = 0; round < 200; ++round) {
        std::string wire;
        std::vector<std::string> expected;
        int pieces = 1 + static_cast<int>(rng() % 20);
        for (int i = 0; i < pieces; ++i) {
            Piece p = rng() % 3 == 0 ? invalid_piece(rng, i) : valid_piece(rng, i);
            wire += p.wire;
            expected.push_back(p.expect);
        }
        FrameReader r(Direction::ToEngine);
        std::vector<std::string> got;
        std::size_t at = 0;
        while (at < wire.size()) {
            std::size_t n = std::min<std::size_t>(wire.size() - at, 1 + rng() % 700);
            r.feed(std::string_view(wire).substr(at, n));
            at += n;
            while (auto item = r.next()) got.push_back(describe(*item));
        }
        r.finish();
        while (auto item = r.next()) got.push_back(describe(*item));
        REQUIRE(got == expected);
    }
}

TEST_CASE("random bytes never crash either reader and finish() always leaves it idle") {
    std::mt19937 rng(7);
    for (int round = 0; round < 300; ++round) {
        std::string junk;
        std::size_t len = rng() % 2000;
        const std::string_view alphabet = "SUBMITSTOPCANCELDATADONE 0123456789\n\x01.=-";
        for (std::size_t i = 0; i < len; ++i)
            junk += rng() % 4 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng() % 256);
        for (auto dir : {Direction::ToEngine, Direction::FromEngine}) {
            Limits limits;
            limits.max_prompt_bytes = 4096;
            limits.max_extension_bytes = 4096;
            FrameReader r(dir, limits);
            r.feed(junk);
            r.finish();
            while (r.next()) {
            }
            CHECK(!r.mid_frame());
        }
    }
}
