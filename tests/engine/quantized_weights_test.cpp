// Quantized dense matrices in model.safetensors (docs/container.md): NAME as I8 or U8
// (packed int4) next to NAME.scales bind as I8/Q4 views, 2-D and stacked, and a model
// with some of them still runs close to the f32 one. Broken ones are named in the error.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <map>

#include "engine/cpu/thread_pool.h"
#include "engine/forward/forward.h"
#include "engine/model/weights.h"
#include "engine/quant/quantize.h"
#include "tests/engine/fixture_paths.h"
#include "tests/support/safetensors_files.h"
#include "tests/support/scratch_dir.h"

namespace fs = std::filesystem;
using namespace inkling;
using model::DType;

namespace {

using test_support::raw;
using test_support::Tensor;
using test_support::read_safetensors;
using test_support::Tensors;
using test_support::write_safetensors;

// Replaces the f32 tensor `name` ([lead…, rows, cols]) by its int8 (group 0) or int4
// quantization; returns the quantized matrices, one per leading index.
std::vector<quant::QuantizedMatrix> quantize_tensor(Tensors& ts, const std::string& name, std::int64_t group,
                                                    Tensors* dequantized = nullptr) {
    Tensor t = ts.at(name);
    REQUIRE(t.dtype == "F32");
    const std::int64_t cols = t.shape.back(), rows = t.shape[t.shape.size() - 2];
    const std::int64_t n = t.shape.size() == 3 ? t.shape[0] : 1;
    std::vector<quant::QuantizedMatrix> qs;
    std::string data, scales;
    std::vector<float> deq;
    for (std::int64_t e = 0; e < n; ++e) {
        const auto* w = reinterpret_cast<const float*>(t.bytes.data()) + e * rows * cols;
        qs.push_back(group ? quant::quantize_int4_groups(w, rows, cols, group) : quant::quantize_int8_rows(w, rows, cols));
        data += raw(qs.back().data);
        scales += raw(qs.back().scales);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t c = 0; c < cols; ++c) deq.push_back(qs.back().view().at(r, c));
    }
    if (dequantized) (*dequantized)[name] = {"F32", t.shape, raw(deq)};
    std::vector<std::int64_t> lead(t.shape.begin(), t.shape.end() - 2);
    auto shape = [&](std::int64_t last) {
        auto s = lead;
        s.push_back(rows);
        s.push_back(last);
        return s;
    };
    const auto& q = qs.front();
    ts[name] = {group ? "U8" : "I8", shape(group ? q.padded / 2 : q.padded), data};
    ts[name + ".scales"] = {"F32", shape(q.groups), scales};
    return qs;
}

// A copy of base-hf-f32 to rewrite.
struct Scratch : test_support::ScratchDir {
    explicit Scratch(const std::string& suffix = "")
        : ScratchDir("quantized" + suffix, test_paths::fixtures() / "base-hf-f32") {}
    fs::path file() const { return dir / "model.safetensors"; }
};

void check_same(const model::Matrix& bound, const quant::QuantizedMatrix& q) {
    CHECK(bound.dtype == q.dtype);
    CHECK(bound.rows == q.rows);
    CHECK(bound.cols == q.cols);
    CHECK(bound.row_stride == q.padded);
    CHECK(bound.group == q.group);
    CHECK(bound.scale_stride == q.groups);
    const model::Matrix v = q.view();
    for (std::int64_t r = 0; r < q.rows; ++r)
        for (std::int64_t c = 0; c < q.cols; ++c) REQUIRE(bound.at(r, c) == v.at(r, c));
}

std::string load_error(const fs::path& dir) {
    try {
        model::load_model(dir);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "(loaded without error)";
}

const std::string kGate = "model.layers.0.mlp.gate_proj.weight";
const std::string kDown = "model.layers.0.mlp.down_proj.weight";

}  // namespace

TEST_CASE("I8 and U8 tensors with .scales bind as int8 and int4 matrices, 2-D and stacked") {
    Scratch s, twin("-twin");
    Tensors ts = read_safetensors(s.file());
    Tensors deq = ts;  // the same model with the dequantized values as F32
    const auto gate = quantize_tensor(ts, kGate, 0, &deq);                 // [96, 64] int8
    const auto down = quantize_tensor(ts, kDown, 64, &deq);                // [64, 96]: groups 64 + 32
    const auto q = quantize_tensor(ts, "model.layers.0.self_attn.q_proj.weight", 64, &deq);
    const auto embed = quantize_tensor(ts, "model.embed_tokens.weight", 0, &deq);
    const std::string shared = "model.layers.3.mlp.shared_experts.";
    const auto sg = quantize_tensor(ts, shared + "gate_proj", 32, &deq);   // [2, 32, 64]
    const auto su = quantize_tensor(ts, shared + "up_proj", 0, &deq);
    const auto sd = quantize_tensor(ts, shared + "down_proj", 32, &deq);   // [2, 64, 32]
    write_safetensors(s.file(), ts);
    write_safetensors(twin.file(), deq);

    const auto m = model::load_model(s.dir);
    const auto& L0 = m.weights.layers[0];
    check_same(L0.dense.gate, gate[0]);
    check_same(L0.dense.down, down[0]);
    CHECK(L0.dense.down.group == 64);
    CHECK(L0.dense.down.scale_stride == 2);
    check_same(L0.wq, q[0]);
    check_same(m.weights.embed, embed[0]);
    CHECK(L0.dense.up.dtype == DType::F32);
    const auto& L3 = m.weights.layers[3];
    REQUIRE(L3.shared.size() == 2);
    for (std::size_t j = 0; j < 2; ++j) {
        check_same(L3.shared[j].gate, sg[j]);
        check_same(L3.shared[j].up, su[j]);
        check_same(L3.shared[j].down, sd[j]);
    }

    // The quantized model runs, and differs from its dequantized f32 twin only by the
    // int8 rounding of the activations (per block of 32).
    const auto f32 = model::load_model(twin.dir);
    cpu::ThreadPool pool(2);
    forward::Forward a(f32, pool), b(m, pool);
    const std::vector<std::int32_t> ids{1, 17, 42, 99, 3, 250, 7, 8};
    auto sa = forward::make_session(f32.config, 16), sb = forward::make_session(m.config, 16);
    const auto la = a.step(sa, ids, nullptr, false), lb = b.step(sb, ids, nullptr, false);
    REQUIRE(la.size() == lb.size());
    const double rel = quant::relative_l2(la.data(), lb.data(), static_cast<std::int64_t>(la.size()));
    MESSAGE("logits relative L2, quantized vs its dequantized f32 twin: " << rel);
    CHECK(rel > 0.0);
    CHECK(rel < 0.05);
}

TEST_CASE("a quantized tensor without scales, or of the wrong shape, is named in the error") {
    {
        Scratch s;
        Tensors ts = read_safetensors(s.file());
        quantize_tensor(ts, kGate, 0);
        ts.erase(kGate + ".scales");
        write_safetensors(s.file(), ts);
        const auto e = load_error(s.dir);
        CHECK(e.find(kGate + ".scales is missing") != std::string::npos);
    }
    {
        Scratch s;
        Tensors ts = read_safetensors(s.file());
        quantize_tensor(ts, kDown, 64);
        ts[kDown].shape = {64, 96};  // the unpacked width, with 48 bytes a row: also a size error
        ts[kDown].bytes += std::string(64 * 48, '\0');
        write_safetensors(s.file(), ts);
        const auto e = load_error(s.dir);
        CHECK(e.find("tensor " + kDown + ": expected shape [64, 48]") != std::string::npos);
        CHECK(e.find("found [64, 96]") != std::string::npos);
    }
    {
        Scratch s;
        Tensors ts = read_safetensors(s.file());
        quantize_tensor(ts, kDown, 64);
        ts[kDown + ".scales"].shape = {32, 4};
        write_safetensors(s.file(), ts);
        const auto e = load_error(s.dir);
        CHECK(e.find("tensor " + kDown + ".scales: expected F32 [64, groups]") != std::string::npos);
        CHECK(e.find("found F32 [32, 4]") != std::string::npos);
    }
}
