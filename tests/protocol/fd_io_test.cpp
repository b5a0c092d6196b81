// FrameWriter and FrameSource on real pipes.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <thread>

#include "protocol/binary_stdio.h"
#include "protocol/frame_encode.h"
#include "protocol/frame_source.h"
#include "protocol/frame_writer.h"

using namespace inkling::protocol;

TEST_CASE("a closed reader makes writes fail with EPIPE instead of killing the process") {
    init_binary_stdio();  // ignores SIGPIPE
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    close(fds[0]);
    FrameWriter w(fds[1]);
    CHECK(!w.write(Stop{"x"}));
    CHECK(w.error().find("EPIPE") != std::string::npos);
    CHECK(!w.write(Stop{"y"}));  // stays failed
    close(fds[1]);
}

TEST_CASE("frames larger than the pipe buffer arrive whole through FrameSource") {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    Data big{"d", std::string(65536, 'q'), std::nullopt};
    std::thread writer([&] {
        FrameWriter w(fds[1]);
        for (int i = 0; i < 8; ++i) w.write(big);
        close(fds[1]);
    });
    FrameSource src(fds[0], Direction::FromEngine);
    int frames = 0;
    while (true) {
        auto r = src.pump(5000);
        while (auto item = src.next()) {
            REQUIRE(std::holds_alternative<Frame>(*item));
            CHECK(encode(std::get<Frame>(*item)) == encode(big));
            ++frames;
        }
        if (r == FrameSource::Pump::Eof) break;
    }
    writer.join();
    close(fds[0]);
    CHECK(frames == 8);
}

TEST_CASE("FrameSource reports a frame cut by EOF as BAD_FRAME") {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    std::string partial = "SUBMIT cut 0 10 1 0 1\nabc";
    REQUIRE(write(fds[1], partial.data(), partial.size()) == static_cast<ssize_t>(partial.size()));
    close(fds[1]);
    FrameSource src(fds[0], Direction::ToEngine);
    while (src.pump(1000) != FrameSource::Pump::Eof) {
    }
    auto item = src.next();
    REQUIRE(item);
    auto p = std::get<Problem>(*item);
    CHECK(p.id == "cut");
    CHECK(p.code == ErrorCode::BadFrame);
    close(fds[0]);
}
