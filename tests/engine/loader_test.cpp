// Loading: both config forms, both layouts, and every way a checkpoint can be broken —
// each must end in a clear error naming the file or tensor, never a crash.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>

#include "engine/model/config.h"
#include "engine/model/safetensors.h"
#include "engine/model/weights.h"
#include "tests/engine/fixture_paths.h"
#include "tests/support/scratch_dir.h"

namespace fs = std::filesystem;
using namespace inkling::model;

namespace {

// A scratch copy of a fixture that a test may break.
// A copy of a fixture to damage.
struct Scratch : test_support::ScratchDir {
    explicit Scratch(const std::string& fixture) : ScratchDir("loader-" + fixture, test_paths::fixtures() / fixture) {}
};

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write(const fs::path& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << bytes;
}

// Rewrites one tensor's header entry of a single-file checkpoint.
void edit_header(const fs::path& file, const std::function<void(nlohmann::json&)>& edit) {
    std::string bytes = read(file);
    std::uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    auto header = nlohmann::json::parse(bytes.substr(8, n));
    edit(header);
    std::string text = header.dump();
    text.resize(n, ' ');  // same length keeps the data offsets valid
    REQUIRE(text.size() == n);
    write(file, bytes.substr(0, 8) + text + bytes.substr(8 + n));
}

std::string load_error(const fs::path& dir) {
    try {
        load_model(dir);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "(loaded without error)";
}

}  // namespace

TEST_CASE("both layouts load to the same geometry; release gate/up are strided views") {
    auto hf = load_model(test_paths::fixtures() / "base-hf-f32");
    auto rel = load_model(test_paths::fixtures() / "base-release-f32");
    CHECK(hf.weights.layout == "transformers");
    CHECK(rel.weights.layout == "release");
    CHECK(hf.config.layers == rel.config.layers);
    const auto& a = hf.weights.layers[0].dense;
    const auto& b = rel.weights.layers[0].dense;
    CHECK(b.gate.row_stride == 2 * b.gate.cols);
    for (std::int64_t r : {0, 1, 5})
        for (std::int64_t col : {0, 3, 63}) {
            CHECK(a.gate.at(r, col) == b.gate.at(r, col));
            CHECK(a.up.at(r, col) == b.up.at(r, col));
        }
    const auto& ea = hf.weights.layers[3].experts[2];
    const auto& eb = rel.weights.layers[3].experts[2];
    CHECK(ea.up.at(4, 7) == eb.up.at(4, 7));
    CHECK(ea.down.at(9, 1) == eb.down.at(9, 1));
}

TEST_CASE("config: nested and flat forms, precedence and defaults") {
    auto nested = parse_config(R"({"eos_token_id": 200006, "audio_token_id": 7, "audio_config": {"n_mel_bins": 80},
        "text_config": {"hidden_size": 64, "num_hidden_layers": 12, "vocab_size": 100, "num_attention_heads": 4,
                        "dense_intermediate_size": 256, "intermediate_size": 32, "dense_mlp_idx": 2,
                        "n_routed_experts": 8, "num_experts_per_tok": 2}})", "nested");
    CHECK(nested.eos == 200006);
    CHECK(nested.audio_token == 7);
    CHECK(nested.dense_inter == 256);
    CHECK(nested.moe_inter == 32);
    CHECK(!nested.kinds[1].sparse);
    CHECK(nested.kinds[2].sparse);
    CHECK(nested.kinds[4].local);
    CHECK(!nested.kinds[5].local);  // every 6th layer is global by default
    CHECK(!nested.kinds[11].local);
    auto flat = parse_config(R"({"hidden_size": 64, "num_hidden_layers": 3, "vocab_size": 100,
        "num_attention_heads": 4, "intermediate_size": 96, "moe_intermediate_size": 16,
        "layer_types": ["hybrid", "hybrid_sliding", "hybrid"], "local_layer_ids": [0],
        "n_routed_experts": 4, "num_experts_per_tok": 1})", "flat");
    CHECK(flat.dense_inter == 96);
    CHECK(flat.moe_inter == 16);
    CHECK(!flat.kinds[0].local);  // layer_types wins over local_layer_ids
    CHECK(flat.kinds[1].local);
    CHECK(flat.eos == -1);
}

TEST_CASE("config errors name the key") {
    const std::string base =
        R"("hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 100, "num_attention_heads": 4, "dense_mlp_idx": 2)";
    auto err = [&](const std::string& extra) {
        try {
            parse_config("{" + base + extra + "}", "cfg");
        } catch (const std::runtime_error& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    CHECK(err(R"(, "layer_types": ["hybrid"])").find("layer_types") != std::string::npos);
    CHECK(err(R"(, "layer_types": ["hybrid", "sliding"])").find("hybrid_sliding") != std::string::npos);
    CHECK(err(R"(, "local_layer_ids": [5])").find("local_layer_ids") != std::string::npos);
    CHECK(err(R"(, "num_key_value_heads": 3)").find("key_value_heads") != std::string::npos);
    CHECK(err(R"(, "unpadded_vocab_size": 101)").find("unpadded_vocab_size") != std::string::npos);
    CHECK(err(R"(, "dense_mlp_idx": 0, "n_routed_experts": 4, "num_experts_per_tok": 5)").find("num_experts_per_tok") != std::string::npos);
    CHECK(err(R"(, "hidden_size": "wide")").find("must be an integer") != std::string::npos);  // last key wins
    try {
        parse_config("{not json", "cfg");
        FAIL("parsed");
    } catch (const std::runtime_error& e) {
        CHECK(std::string(e.what()).find("not valid JSON") != std::string::npos);
    }
}

TEST_CASE("missing config.json or safetensors files are named") {
    Scratch s("base-hf-f32");
    fs::remove(s.dir / "config.json");
    CHECK(load_error(s.dir).find("config.json") != std::string::npos);
    Scratch t("base-hf-f32");
    fs::remove(t.dir / "model.safetensors");
    fs::remove(t.dir / "audio.safetensors");
    CHECK(load_error(t.dir).find("no *.safetensors") != std::string::npos);
}

TEST_CASE("a missing shard is named by the index") {
    Scratch s("base-release-bf16");
    fs::remove(s.dir / "model-00002-of-00002.safetensors");
    auto e = load_error(s.dir);
    CHECK(e.find("shard model-00002-of-00002.safetensors") != std::string::npos);
    CHECK(e.find("missing") != std::string::npos);
}

TEST_CASE("truncated files are refused with the file's name") {
    Scratch s("base-hf-f32");
    auto file = s.dir / "model.safetensors";
    std::string bytes = read(file);
    write(file, bytes.substr(0, bytes.size() - 100));
    auto e = load_error(s.dir);
    CHECK(e.find("model.safetensors") != std::string::npos);
    CHECK(e.find("truncated") != std::string::npos);
    write(file, bytes.substr(0, 5));
    CHECK(load_error(s.dir).find("truncated") != std::string::npos);
    write(file, std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}");
    CHECK(load_error(s.dir).find("header length") != std::string::npos);
}

TEST_CASE("corrupt headers: bad JSON, unknown dtype, inconsistent byte length") {
    {
        Scratch s("base-hf-f32");
        auto file = s.dir / "model.safetensors";
        std::string bytes = read(file);
        bytes[8] = '!';
        write(file, bytes);
        CHECK(load_error(s.dir).find("not valid JSON") != std::string::npos);
    }
    {
        Scratch s("base-hf-f32");
        edit_header(s.dir / "model.safetensors", [](nlohmann::json& h) { h["model.norm.weight"]["dtype"] = "F64"; });
        auto e = load_error(s.dir);
        CHECK(e.find("model.norm.weight") != std::string::npos);
        CHECK(e.find("unsupported dtype F64") != std::string::npos);
    }
    {
        Scratch s("base-hf-f32");
        edit_header(s.dir / "model.safetensors", [](nlohmann::json& h) { h["model.norm.weight"]["shape"] = {65}; });
        CHECK(load_error(s.dir).find("bytes") != std::string::npos);
    }
}

TEST_CASE("a tensor of the wrong shape or a missing tensor is named with both shapes") {
    {
        Scratch s("base-hf-f32");
        // Renaming keeps the file valid but removes the tensor the config needs.
        edit_header(s.dir / "model.safetensors", [](nlohmann::json& h) {
            h["model.layers.1.self_attn.q_norm.weightX"] = h["model.layers.1.self_attn.q_norm.weight"];
            h.erase("model.layers.1.self_attn.q_norm.weight");
        });
        auto e = load_error(s.dir);
        CHECK(e.find("missing tensor model.layers.1.self_attn.q_norm.weight") != std::string::npos);
        CHECK(e.find("[16]") != std::string::npos);
    }
    {
        Scratch s("base-hf-f32");
        std::string cfg = read(s.dir / "config.json");
        auto j = nlohmann::json::parse(cfg);
        j["head_dim"] = 8;  // every global-layer projection is now the wrong shape
        write(s.dir / "config.json", j.dump());
        auto e = load_error(s.dir);
        CHECK(e.find("expected shape") != std::string::npos);
        CHECK(e.find("found") != std::string::npos);
    }
}
