#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "gateway/generation/stop_filter.h"

using namespace inkling::gateway;

namespace {
std::string run_stop(std::vector<std::string> stops, const std::vector<std::string>& pieces, bool& stopped) {
    StopFilter f(std::move(stops));
    std::string out;
    for (const auto& p : pieces) {
        auto o = f.feed(p);
        out += o.text;
        if (o.stopped) {
            stopped = true;
            return out;
        }
    }
    out += f.flush().text;
    stopped = false;
    return out;
}
}  // namespace

TEST_CASE("stop sequences: nothing of a stop sequence ever leaks, even split across pieces") {
    bool stopped = false;
    CHECK(run_stop({"END"}, {"abc E", "N", "D tail"}, stopped) == "abc ");
    CHECK(stopped);
    CHECK(run_stop({"END"}, {"abc E", "N", "x"}, stopped) == "abc ENx");
    CHECK(!stopped);
    CHECK(run_stop({"\n\n", "##"}, {"a\n", "b#", "#c"}, stopped) == "a\nb");
    CHECK(stopped);
    CHECK(run_stop({"aab"}, {"aaab"}, stopped) == "a");
    CHECK(stopped);
    // What is held back never reaches the client before it is decided.
    StopFilter f({"STOP"});
    CHECK(f.feed("xyzST").text == "xyz");
    CHECK(f.feed("O").text == "");
    CHECK(f.feed("x").text == "STOx");
}
