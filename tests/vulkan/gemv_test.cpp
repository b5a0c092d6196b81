// The Vulkan foundation on a real driver (lavapipe in CI): device bring-up, buffers, an
// embedded shader, and the GEMV against the CPU kernel it stands in for.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/vulkan/buffer.h"
#include "engine/vulkan/context.h"
#include "engine/vulkan/frame.h"
#include "engine/vulkan/ops.h"
#include "engine/vulkan/kernel.h"

using namespace inkling;

namespace {

std::unique_ptr<vulkan::Context> open_or_skip() {
    try {
        return vulkan::Context::open();
    } catch (const vulkan::Unavailable& e) {
        MESSAGE("no Vulkan device: " << e.what());
        return nullptr;
    }
}

std::uint16_t to_bf16(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return static_cast<std::uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}


}  // namespace

TEST_CASE("vulkan: a device is found and described") {
    auto ctx = open_or_skip();
    if (!ctx) return;
    const auto& d = ctx->info();
    CHECK(!d.name.empty());
    CHECK(d.subgroup_size >= 1);
    CHECK(d.max_storage_range > 0);
    CHECK(ctx->budget() > 0);
    auto all = vulkan::list_devices();
    REQUIRE(!all.empty());
    CHECK(all[static_cast<std::size_t>(d.index)].name == d.name);
}

TEST_CASE("vulkan: buffers round-trip and the books count them") {
    auto ctx = open_or_skip();
    if (!ctx) return;
    const auto before = ctx->used();
    {
        vulkan::Buffer dev(*ctx, 4096, vulkan::Buffer::Kind::Device);
        CHECK(ctx->used() >= before + 4096);
        std::vector<std::uint32_t> in(1024), out(1024, 0);
        for (std::uint32_t i = 0; i < 1024; ++i) in[i] = i * 2654435761u;
        dev.write(in.data(), 4096);
        dev.read(out.data(), 4096);
        CHECK(in == out);
    }
    CHECK(ctx->used() == before);
}

TEST_CASE("vulkan: a forced budget refuses what doesn't fit") {
    std::unique_ptr<vulkan::Context> ctx;
    try {
        ctx = vulkan::Context::open(-1, 1 << 20);
    } catch (const vulkan::Unavailable&) {
        return;
    }
    CHECK(ctx->budget() == (1u << 20));
    vulkan::Buffer small(*ctx, 512 << 10, vulkan::Buffer::Kind::Device);
    CHECK_THROWS_WITH_AS(vulkan::Buffer(*ctx, 1 << 20, vulkan::Buffer::Kind::Device),
                         doctest::Contains("budget exceeded"), std::runtime_error);
}

TEST_CASE("vulkan: the copy shader copies") {
    auto ctx = open_or_skip();
    if (!ctx) return;
    const std::uint32_t n = 4096;  // uvec4s
    vulkan::Buffer src(*ctx, n * 16, vulkan::Buffer::Kind::Device), dst(*ctx, n * 16, vulkan::Buffer::Kind::Device);
    std::vector<std::uint32_t> in(n * 4), out(n * 4);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint32_t>(i ^ 0x5a5a5a5a);
    src.write(in.data(), in.size() * 4);
    vulkan::Kernel copy(*ctx, "copy", 2, 4);
    vulkan::Frame f(*ctx);
    f.begin();
    const vulkan::Binding b[] = {{&src}, {&dst}};
    f.dispatch(copy, b, &n, 7);  // few groups: the grid-stride loop covers the rest
    f.run();
    dst.read(out.data(), out.size() * 4);
    CHECK(in == out);
}

TEST_CASE("vulkan: gemv matches the CPU kernel (f32 and bf16, strided rows, several activation rows)") {
    auto ctx = open_or_skip();
    if (!ctx) return;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    cpu::ThreadPool pool(1);
    for (int format : {0, 1}) {
        for (auto [O, I, S] : {std::tuple{37, 96, 1}, std::tuple{64, 250, 3}, std::tuple{5, 1000, 2}}) {
            CAPTURE(format);
            CAPTURE(O);
            CAPTURE(I);
            // Two matrices interleaved row by row (a release checkpoint's gate/up): the
            // second is the view under test, at offset I elements with stride 2·I.
            const std::int64_t stride = 2 * I;
            std::vector<float> wf(static_cast<std::size_t>(O * stride));
            for (auto& v : wf) v = nd(rng);
            std::vector<std::uint16_t> wb(wf.size());
            for (std::size_t i = 0; i < wf.size(); ++i) {
                wb[i] = to_bf16(wf[i]);
                if (format == 1) wf[i] = model::bf16_to_f32(wb[i]);
            }
            std::vector<float> x(static_cast<std::size_t>(S * I));
            for (auto& v : x) v = nd(rng);

            model::Matrix m;
            m.dtype = format == 0 ? model::DType::F32 : model::DType::BF16;
            m.data = format == 0 ? reinterpret_cast<const std::byte*>(wf.data() + I)
                                 : reinterpret_cast<const std::byte*>(wb.data() + I);
            m.rows = O;
            m.cols = I;
            m.row_stride = stride;
            std::vector<float> want(static_cast<std::size_t>(S * O));
            cpu::matmul(x.data(), S, m, want.data(), pool);

            const std::size_t wbytes = format == 0 ? wf.size() * 4 : wb.size() * 2;
            vulkan::Buffer W(*ctx, wbytes, vulkan::Buffer::Kind::Device);
            W.write(format == 0 ? static_cast<const void*>(wf.data()) : wb.data(), wbytes);
            vulkan::Buffer X(*ctx, x.size() * 4, vulkan::Buffer::Kind::Device);
            X.write(x.data(), x.size() * 4);
            vulkan::Buffer Y(*ctx, want.size() * 4, vulkan::Buffer::Kind::Device);
            vulkan::Kernel gemv(*ctx, "gemv", 4, sizeof(vulkan::GemvPush), {static_cast<std::uint32_t>(format)});
            vulkan::GemvPush push{static_cast<std::uint32_t>(O), static_cast<std::uint32_t>(I), static_cast<std::uint32_t>(S),
                          static_cast<std::uint32_t>(stride), static_cast<std::uint32_t>(I), 0,
                          static_cast<std::uint32_t>(I), 0, static_cast<std::uint32_t>(O)};
            vulkan::Frame f(*ctx);
            f.begin();
            const vulkan::Binding b[] = {{&W}, {&X}, {&Y}, {&X}};  // the fourth: swiglu's, unused
            f.dispatch(gemv, b, &push, 16);
            f.run();
            std::vector<float> got(want.size());
            Y.read(got.data(), got.size() * 4);
            for (std::size_t i = 0; i < got.size(); ++i)
                CHECK(std::abs(got[i] - want[i]) <= 1e-5f * (1.0f + std::abs(want[i])) * std::sqrt(float(I)));
        }
    }
}

TEST_CASE("vulkan: a faked loss throws DeviceLost at the n-th submit and every one after") {
    auto ctx = open_or_skip();
    if (!ctx) return;
    vulkan::Frame f(*ctx);
    vulkan::Frame::set_fault_at(vulkan::Frame::submits() + 2);
    f.begin();
    CHECK_NOTHROW(f.run());
    f.begin();
    CHECK_THROWS_AS(f.run(), vulkan::DeviceLost);
    f.begin();
    CHECK_THROWS_AS(f.run(), vulkan::DeviceLost);
    vulkan::Frame::set_fault_at(0);
    f.begin();
    CHECK_NOTHROW(f.run());
}
