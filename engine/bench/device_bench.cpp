#include "engine/bench/device_bench.h"

#include <chrono>
#include <cstdio>
#include <vector>

#include "engine/vulkan/buffer.h"
#include "engine/vulkan/context.h"
#include "engine/vulkan/frame.h"
#include "engine/vulkan/ops.h"
#include "engine/vulkan/kernel.h"

namespace inkling::bench {
namespace {

using Clock = std::chrono::steady_clock;


// Seconds per repetition of what `record` puts in a frame, best of three runs of `reps`.
template <class F>
double time_frames(vulkan::Context& ctx, int reps, F record) {
    vulkan::Frame f(ctx);
    double best = 1e30;
    for (int run = 0; run < 4; ++run) {  // the first run warms up
        f.begin();
        for (int r = 0; r < reps; ++r) record(f);
        const auto t0 = Clock::now();
        f.run();
        const double s = std::chrono::duration<double>(Clock::now() - t0).count() / reps;
        if (run > 0) best = std::min(best, s);
    }
    return best;
}

}  // namespace

nlohmann::json bench_device_kernels(int device, std::size_t mb) {
    auto ctx = vulkan::Context::open(device);
    const std::size_t bytes = std::min<std::size_t>(mb << 20, ctx->info().max_storage_range & ~std::size_t{15});
    vulkan::Buffer src(*ctx, bytes, vulkan::Buffer::Kind::Device), dst(*ctx, bytes, vulkan::Buffer::Kind::Device);
    vulkan::Kernel copy(*ctx, "copy", 2, 4);
    const std::uint32_t count = static_cast<std::uint32_t>(bytes / 16);
    const double copy_s = time_frames(*ctx, 10, [&](vulkan::Frame& f) {
        const vulkan::Binding b[] = {{&src}, {&dst}};
        f.dispatch(copy, b, &count, 65535);
        f.barrier();
    });
    const double copy_gb_s = 2.0 * static_cast<double>(bytes) / copy_s / 1e9;
    nlohmann::json j = {{"device", ctx->info().name},
                        {"copy", {{"bytes", bytes}, {"gb_s", copy_gb_s}}}};
    std::fprintf(stderr, "[bench] %s: copy shader %.0f GB/s (read + write, %zu MiB)\n", ctx->info().name.c_str(),
                 copy_gb_s, bytes >> 20);

    // The decode GEMV on a 14336 × 4096 matrix (an MLP projection of an 8B-class model).
    const std::uint32_t O = 14336, I = 4096;
    std::vector<float> x(I, 0.5f);
    vulkan::Buffer X(*ctx, I * 4, vulkan::Buffer::Kind::Device), Y(*ctx, O * 4, vulkan::Buffer::Kind::Device);
    X.write(x.data(), I * 4);
    for (std::uint32_t format : {0u, 1u}) {
        const std::size_t wbytes = std::size_t{O} * I * (format == 0 ? 4 : 2);
        if (wbytes > ctx->info().max_storage_range) continue;
        vulkan::Buffer W(*ctx, wbytes, vulkan::Buffer::Kind::Device);
        vulkan::Kernel gemv(*ctx, "gemv", 4, sizeof(vulkan::GemvPush), {format});
        const vulkan::GemvPush p{O, I, 1, I, 0, 0, I, 0, O};
        const double s = time_frames(*ctx, 20, [&](vulkan::Frame& f) {
            const vulkan::Binding b[] = {{&W}, {&X}, {&Y}, {&X}};  // the fourth: swiglu's, unused
            f.dispatch(gemv, b, &p, O / 4);
        });
        const double gb_s = static_cast<double>(wbytes) / s / 1e9;
        const char* name = format == 0 ? "f32" : "bf16";
        j["gemv"][name] = {{"rows", O}, {"cols", I}, {"us", s * 1e6}, {"gb_s", gb_s}, {"fraction_of_copy", gb_s / copy_gb_s}};
        std::fprintf(stderr, "[bench] gemv %s %ux%u at n=1: %.1f us, %.0f GB/s = %.0f%% of the copy's\n", name, O, I,
                     s * 1e6, gb_s, 100.0 * gb_s / copy_gb_s);
    }
    return j;
}

}  // namespace inkling::bench
