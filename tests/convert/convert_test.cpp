// The converter's parts that the end-to-end suite (tests/convert/convert_e2e.sh) reaches
// only indirectly: the safetensors layout, which names DST may hold, the error sums, the
// schemes' arithmetic, the resume point after a torn tail, and the plain progress lines.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/convert/destination.h"
#include "engine/convert/expert_writer.h"
#include "engine/convert/progress.h"
#include "engine/convert/quant_error.h"
#include "engine/convert/quantize_rows.h"
#include "engine/convert/safetensors_layout.h"
#include "tests/support/scratch_dir.h"

namespace fs = std::filesystem;
using namespace inkling;
using namespace inkling::convert;

TEST_CASE("convert: the safetensors layout puts F32 first, leaves no gaps and starts the data on 64 bytes") {
    std::vector<SafetensorsEntry> in = {{"a.weight", "BF16", {3, 5}, 30, 0},
                                        {"a.norm", "F32", {5}, 20, 0},
                                        {"b.weight", "I8", {2, 32}, 64, 0},
                                        {"b.weight.scales", "F32", {2, 1}, 8, 0}};
    const auto l = layout_safetensors(in);
    REQUIRE(l.entries.size() == 4);
    CHECK(l.entries[0].name == "a.norm");
    CHECK(l.entries[1].name == "b.weight.scales");
    CHECK(l.entries[2].name == "a.weight");
    CHECK(l.header.size() % 64 == 0);
    std::int64_t at = static_cast<std::int64_t>(l.header.size());
    for (const auto& e : l.entries) {
        CHECK(e.offset == at);
        at += e.bytes;
    }
    CHECK(l.file_bytes == at);
    std::uint64_t n = 0;
    std::memcpy(&n, l.header.data(), 8);
    const auto j = nlohmann::json::parse(l.header.substr(8, n));
    CHECK(j["b.weight"]["dtype"] == "I8");
    CHECK(j["b.weight"]["data_offsets"] == nlohmann::json::array({58, 122}));
}

TEST_CASE("convert: DST may hold only the converter's own files") {
    for (const char* ok : {"model.safetensors", "experts.inkx.partial", "experts.inkx.state", "convert-report.json",
                           "chat_template.jinja", "tokenizer.json.partial", "config.json"})
        CHECK_MESSAGE(is_converter_file(ok), ok);
    for (const char* no : {"model-00001-of-00002.safetensors", "notes.txt", "experts.inkx.bak", "partial"})
        CHECK_MESSAGE(!is_converter_file(no), no);
}

TEST_CASE("convert: the error sums give relative L2 and survive a JSON round trip") {
    QuantError e;
    const float ref[4] = {3, 4, 0, 0}, deq[4] = {3, 4, 0, 0.5f};
    e.add_rows("attn.q", "int8", ref, deq, 4);
    e.count_tensor("attn.q");
    CHECK(e.kinds().at("attn.q").relative_l2() == doctest::Approx(0.1));
    const auto back = QuantError::from_json(e.to_json());
    CHECK(back.kinds().at("attn.q").err2 == e.kinds().at("attn.q").err2);
    CHECK(back.kinds().at("attn.q").tensors == 1);
    CHECK(back.to_json() == e.to_json());
}

TEST_CASE("convert: scheme arithmetic (padding to 32, groups, packed bytes)") {
    const Scheme i8 = dense_scheme(DenseMode::Int8), g64 = dense_scheme(DenseMode::Int4g64);
    const Scheme g32 = expert_scheme(experts::Format::Int4);
    CHECK(i8.name() == "int8");
    CHECK(g64.name() == "int4g64");
    CHECK(g32.name() == "int4g32");
    CHECK(i8.groups(70) == 1);
    CHECK(i8.row_bytes(70) == 96);
    CHECK(g64.groups(96) == 2);
    CHECK(g64.row_bytes(96) == 48);
    CHECK(g32.groups(16) == 1);
    CHECK(g32.row_bytes(16) == 16);
}

namespace {

// A container header of two layers × two experts, and records of recognisable bytes.
experts::ContainerHeader tiny_header() {
    experts::ContainerHeader h;
    h.format = experts::Format::Int8;
    h.group = 0;
    h.hidden = 32;
    h.inter = 32;
    h.experts = 2;
    h.layers = {1, 2};
    experts::encode_header(h, std::vector<std::uint32_t>(4, 0));
    return h;
}

std::vector<std::byte> record_bytes(const experts::ContainerHeader& h, int i) {
    return std::vector<std::byte>(static_cast<std::size_t>(h.record_bytes), static_cast<std::byte>(i + 1));
}

}  // namespace

TEST_CASE("convert: resuming keeps the records the state vouches for and drops a torn tail") {
    test_support::ScratchDir t("convert-test");
    const auto h = tiny_header();
    ResumeState state;
    {
        OutputFile out(t.dir / "experts.inkx", false);
        for (int i = 0; i < 3; ++i) {
            const auto r = record_bytes(h, i);
            out.pwrite_all(r.data(), r.size(), h.record_offset(i));
            state.crcs.push_back(experts::crc32(r.data(), r.size()));
        }
        const auto torn = record_bytes(h, 3);
        out.pwrite_all(torn.data(), torn.size() / 2, h.record_offset(3));
    }
    QuantError e;
    e.add_rows("experts.gate", "int8", std::vector<float>{1.0f}.data(), std::vector<float>{0.5f}.data(), 1);
    state.errors = e.to_json();

    SUBCASE("all the recorded records check out") {
        OutputFile out(t.dir / "experts.inkx", true);
        const auto p = find_resume_point(h, out, state);
        CHECK(p.records == 3);
        CHECK(out.size() == h.record_offset(3));
        CHECK(p.errors.to_json() == state.errors);
    }
    SUBCASE("a record that does not match its CRC starts the experts over") {
        {
            OutputFile out(t.dir / "experts.inkx", true);
            const std::byte flipped{0x7f};
            out.pwrite_all(&flipped, 1, h.record_offset(1) + 10);
        }
        OutputFile out(t.dir / "experts.inkx", true);
        const auto p = find_resume_point(h, out, state);
        CHECK(p.records == 0);
        CHECK(out.size() == 0);
        CHECK(p.errors.kinds().empty());
    }
    SUBCASE("a state that claims more than the file holds starts over") {
        state.crcs.push_back(123);
        OutputFile out(t.dir / "experts.inkx", true);
        CHECK(find_resume_point(h, out, state).records == 0);
    }
}

TEST_CASE("convert: off a terminal, progress is a plain line every 5 %") {
    std::FILE* f = std::tmpfile();
    REQUIRE(f);
    Progress p(1000, 0, f);
    for (int i = 0; i < 100; ++i) p.add(10);
    p.finish();
    std::rewind(f);
    int lines = 0;
    char buf[256];
    std::string last;
    while (std::fgets(buf, sizeof buf, f)) {
        ++lines;
        last = buf;
    }
    std::fclose(f);
    CHECK(lines == 21);  // the first step, 5 %, 10 %, … 95 %, then the final 100 % line
    CHECK(last.find("100%  0.0 MB of 0.0 MB") != std::string::npos);
}
