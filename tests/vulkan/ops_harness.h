// The tools of the backend-ops parity harness (tests/vulkan/backend_ops_test.cpp): one
// device and one vulkan::Ops for the whole run, seeded inputs, and guarded buffers.
//
// A Guarded buffer is one whose every element the test knows before a dispatch: what the
// op reads, what it updates, and a NaN sentinel in the slack around them (before the
// first element, after the last, between strided rows). After the dispatch the elements
// the op must write are compared with the CPU's values within their tolerance, and every
// other element must come back bit for bit, so an out-of-bounds write shows as
// "clobbered" and a missing one as "wrong" (the sentinel is still there). Inputs live in
// guarded buffers too: a shader that writes its input, or reads a sentinel where it
// should read data, fails the same checks.
//
//   auto* dev = test_ops::device();
//   if (!dev) return;                      // no Vulkan device: skipped with a MESSAGE
//   test_ops::Guarded y(*dev->ctx, 64);    // 64 floats of sentinel
//   y.expect(3, want, 1e-6);               // the op writes `want` at 3, the rest stays
//   y.upload();
//   … record the op on y.buffer(), run the frame …
//   test_ops::check(y, "y");
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/vulkan/buffer.h"
#include "engine/vulkan/context.h"
#include "engine/vulkan/ops.h"

namespace inkling::test_ops {

// A signalling NaN, compared by its bits: what reads it turns into NaN, and arithmetic on
// it gives a quiet NaN of other bits, so an op that updates it in place (a += b past n)
// still shows. Loads, stores and copies keep its bits.
constexpr std::uint32_t kSentinelBits = 0x7fa5a5a5u;
inline float from_bits(std::uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
inline float sentinel() { return from_bits(kSentinelBits); }
inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

struct Device {
    std::unique_ptr<vulkan::Context> ctx;
    std::unique_ptr<vulkan::Ops> ops;
};

// The device of the run, opened (and the shaders compiled) on first use; nullptr, with
// a MESSAGE saying why, when there is none. Never destroyed: destroying a VkDevice from a
// static destructor, after the driver's own exit handlers, crashes NVIDIA's driver.
inline Device* device() {
    static Device* dev = nullptr;
    static std::string why;
    if (!dev && why.empty()) {
        try {
            auto d = std::make_unique<Device>();
            d->ctx = vulkan::Context::open();
            d->ops = std::make_unique<vulkan::Ops>(*d->ctx);
            dev = d.release();
        } catch (const vulkan::Unavailable& e) {
            why = e.what();
        }
    }
    if (!dev) MESSAGE("no Vulkan device: " << why);
    return dev;
}

// Seeded inputs: every case draws from its own fixed seed.
struct Rand {
    std::mt19937 g;
    explicit Rand(std::uint32_t seed) : g(seed) {}
    float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(g); }
    std::int64_t between(std::int64_t lo, std::int64_t hi) {  // inclusive
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(g);
    }
    float normal(float sd) { return std::normal_distribution<float>(0.0f, sd)(g); }
    std::vector<float> uniform(std::size_t n, float lo, float hi) {
        std::vector<float> v(n);
        for (auto& x : v) x = uniform(lo, hi);
        return v;
    }
    std::vector<float> normal(std::size_t n, float sd) {
        std::vector<float> v(n);
        for (auto& x : v) x = normal(sd);
        return v;
    }
};

// A device buffer of floats and the test's image of it (see the top of this file). One of
// 32-bit words (expert ids, slot numbers) holds them as floats of those bits, compared bit
// for bit, and its messages print them as words.
class Guarded {
public:
    enum class Holds { Floats, Words };
    Guarded(vulkan::Context& ctx, std::size_t floats, Holds holds = Holds::Floats)
        : buf_(ctx, floats * 4, vulkan::Buffer::Kind::Device),
          before_(floats, sentinel()),
          want_(floats, 0.0f),
          tol_(floats, -1.0),
          words_(holds == Holds::Words) {}

    std::size_t size() const { return before_.size(); }
    const vulkan::Buffer& buffer() const { return buf_; }
    // What element i holds before the op.
    void set(std::size_t i, float v) { before_.at(i) = v; }
    float at(std::size_t i) const { return before_.at(i); }
    // Elements [i, i + v.size()) before the op.
    void set(std::size_t i, const std::vector<float>& v) {
        for (std::size_t j = 0; j < v.size(); ++j) set(i + j, v[j]);
    }
    // The op writes `want` at i, within `tol` (absolute; 0: bit for bit).
    void expect(std::size_t i, float want, double tol) {
        want_.at(i) = want;
        tol_.at(i) = tol;
    }
    // The same for a word: what element i holds before, and the word the op writes there.
    void set_word(std::size_t i, std::uint32_t v) { set(i, from_bits(v)); }
    void expect_word(std::size_t i, std::uint32_t want) { expect(i, from_bits(want), 0); }
    void upload() { buf_.write(before_.data(), before_.size() * 4); }

    struct Verdict {
        std::size_t clobbered = 0, wrong = 0;
        std::string first_clobbered, first_wrong;
        double worst = 0;  // largest |got − want| ÷ tol over the expected elements
    };
    Verdict verdict() const {
        std::vector<float> got(before_.size());
        buf_.read(got.data(), got.size() * 4);
        Verdict v;
        for (std::size_t i = 0; i < got.size(); ++i) {
            if (tol_[i] < 0) {
                if (same_bits(got[i], before_[i])) continue;
                if (v.clobbered++ == 0)
                    v.first_clobbered = "[" + std::to_string(i) + "] = " + show(got[i]) + ", was " + show(before_[i]);
                continue;
            }
            const double d = std::abs(static_cast<double>(got[i]) - want_[i]);
            const bool ok = tol_[i] == 0 ? same_bits(got[i], want_[i]) : d <= tol_[i];
            if (tol_[i] > 0 && std::isfinite(d)) v.worst = std::max(v.worst, d / tol_[i]);
            if (ok) continue;
            if (v.wrong++ == 0) {
                char tol[32];
                std::snprintf(tol, sizeof tol, "%.3g", tol_[i]);
                v.first_wrong =
                    "[" + std::to_string(i) + "] = " + show(got[i]) + ", want " + show(want_[i]) + " ± " + tol;
            }
        }
        return v;
    }

private:
    // A value as the messages print it: NaNs with their bits (the sentinel is one), words
    // as words.
    std::string show(float f) const {
        char s[32];
        std::uint32_t bits;
        std::memcpy(&bits, &f, 4);
        if (words_) std::snprintf(s, sizeof s, "word %u (0x%08x)", bits, bits);
        else if (std::isnan(f)) std::snprintf(s, sizeof s, "nan 0x%08x", bits);
        else std::snprintf(s, sizeof s, "%.9g", static_cast<double>(f));
        return s;
    }

    vulkan::Buffer buf_;
    std::vector<float> before_, want_;
    std::vector<double> tol_;  // < 0: not written by the op
    bool words_;
};

// Every element of `g` as it must be: written ones within tolerance, the rest untouched.
inline void check(const Guarded& g, const char* name) {
    const Guarded::Verdict v = g.verdict();
    INFO(std::string(name) << ": first clobbered " << v.first_clobbered << "; first wrong " << v.first_wrong
                           << "; worst |got - want| / tol " << v.worst);
    CHECK(v.clobbered == 0);
    CHECK(v.wrong == 0);
}

// A read-only input of any element type.
template <class T>
vulkan::Buffer input(vulkan::Context& ctx, const std::vector<T>& v) {
    vulkan::Buffer b(ctx, std::max<std::size_t>(4, v.size() * sizeof(T)), vulkan::Buffer::Kind::Device);
    if (!v.empty()) b.write(v.data(), v.size() * sizeof(T));
    return b;
}

inline std::uint32_t u32(std::int64_t v) { return static_cast<std::uint32_t>(v); }

// The bf16 weight of an f32: its top half, exactly what the bits say (the suites' bf16
// weights are these, their f32 images model::bf16_to_f32 of them).
inline std::uint16_t bf16_top(float v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return static_cast<std::uint16_t>(bits >> 16);
}

// The pairs and slots of a random moe_gemv shape (E experts already drawn): K of at most
// max_k, R rows of at most max_r, gate or down, the slots and their chunks, and now and
// then a chunk left out.
template <class Shape>
void random_pairs(Rand& r, Shape& m, std::int64_t max_k, std::int64_t max_r) {
    m.K = r.between(1, std::min<std::int64_t>(max_k, m.E));
    m.R = r.between(1, max_r);
    m.down = r.between(0, 1) == 1;
    m.slots = r.between(1, m.E);
    m.per_chunk = r.between(1, m.slots);
    const std::int64_t chunks = (m.slots + m.per_chunk - 1) / m.per_chunk;
    m.skip = chunks > 1 && r.between(0, 2) == 0 ? r.between(0, chunks - 1) : -1;
}

}  // namespace inkling::test_ops
