#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/tokenizer.h"
#include "protocol/tml_render.h"
#include "tests/support/inkling_tokenizer.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/tiny_tokenizer.h"

using inkling::model::Tokenizer;
using Ids = std::vector<std::int32_t>;
namespace fs = std::filesystem;
using test_support::ScratchDir;

namespace {

using test_support::inkling_tokenizer;  // $INKLING_TOKENIZER_JSON, else build/o200k-inkling

using test_support::byte_level;

// A tiny byte-level tokenizer: ids 0..255 are the bytes, then `extra` in order from 256.
nlohmann::json tiny(const std::vector<std::string>& extra) { return test_support::tiny_tokenizer(extra); }

Tokenizer load_json(const ScratchDir& dir, const nlohmann::json& j) {
    return Tokenizer::load(dir.write("tokenizer.json", j.dump()));
}

std::string load_error(const ScratchDir& dir, const std::string& text) {
    fs::path p = dir.write("broken.json", text);
    try {
        Tokenizer::load(p);
    } catch (const std::runtime_error& e) {
        std::string what = e.what();
        CHECK_MESSAGE(what.find(p.string()) != std::string::npos, "error does not name the file: " << what);
        return what;
    }
    FAIL("loading " << text.substr(0, 80) << " did not throw");
    return {};
}

Ids cat(std::initializer_list<Ids> parts) {
    Ids out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

}  // namespace

TEST_CASE("Inkling tokenizer: the TMLv0 added tokens have the ids of the A.3 table") {
    const Tokenizer& tok = inkling_tokenizer();
    CHECK(tok.vocab_size() == 200058);
    const std::pair<const char*, std::int32_t> named[] = {
        {"<|unused|>", 199998},
        {"<|endoftext|>", 199999},
        {"<|message_user|>", 200000},
        {"<|message_model|>", 200001},
        {"<|message_system|>", 200002},
        {"<|message_tool|>", 200003},
        {"<|content_text|>", 200004},
        {"<|content_image|>", 200005},
        {"<|content_model_end_sampling|>", 200006},
        {"<|content_thinking|>", 200008},
        {"<|end_message|>", 200010},
        {"<|content_audio_input|>", 200020},
        {"<|content_tool_error|>", 200022},
        {"<|audio|>", 200023},
        {"<|content_xml|>", 200024},
        {"<|begin_of_text|>", 200028},
        {"<|audio_end|>", 200043},
        {"<|content_invoke_tool_json|>", 200049},
        {"<|unused_200053|>", 200053},
        {"<|unused_200054|>", 200054},
        {"<|content_invoke_tool_text|>", 200057},
        {"<|unused_200007|>", 200007},
        {"<|unused_200018|>", 200018},
    };
    for (auto [text, id] : named) {
        CAPTURE(text);
        CHECK(tok.find(text) == id);
        CHECK(tok.token_bytes(id) == text);
        CHECK(tok.is_added(id));
        CHECK(tok.encode(text) == Ids{id});
    }
    // Every id of the block is an added token; o200k's <|endofprompt|> is not one.
    for (std::int32_t id = 199998; id <= 200057; ++id) CHECK(tok.is_added(id));
    CHECK(!tok.find("<|endofprompt|>"));
    CHECK(!tok.is_added(199997));
}

TEST_CASE("Inkling tokenizer: ordinary text gives o200k_base ids") {
    const Tokenizer& tok = inkling_tokenizer();
    // Reference ids from tiktoken's o200k_base.
    CHECK(tok.encode("Hello, world!") == Ids{13225, 11, 2375, 0});
    CHECK(tok.encode("hi") == Ids{3686});
    CHECK(tok.encode("I'm here") == Ids{15390, 2105});
    CHECK(tok.encode("12345") == Ids{7633, 2548});
    CHECK(tok.encode("  \r\n\r\n") == Ids{162199});
    CHECK(tok.encode("日本語のテキスト") == Ids{9048, 40909, 3385, 16056, 18368, 38236});
    CHECK(tok.encode("👍🏽") == Ids{82514, 52622, 121});
    CHECK(tok.encode("").empty());
    // Vocab entries are found by their byte-level spelling.
    CHECK(tok.find("Ġthe") == 290);
    CHECK(tok.find("hi") == 3686);
    CHECK(tok.token_bytes(290) == " the");
    CHECK(!tok.find("<|nope|>"));
    CHECK(!tok.find("\xff"));
}

TEST_CASE("Inkling tokenizer: added tokens inside text become single ids") {
    const Tokenizer& tok = inkling_tokenizer();
    namespace tml = inkling::protocol::tml;
    std::string prompt = tml::render({{tml::Role::User, {tml::Part::text_part("hi")}, {}}}, {.effort = 0.9});
    Ids effort = tok.encode("Thinking effort level: 0.9");
    CHECK(tok.encode(prompt) == cat({{200002, 200004}, effort, {200010, 200000, 200004, 3686, 200010, 200001}}));

    // Each segment is pre-tokenized on its own: trailing spaces before a marker are the
    // segment's end, exactly as if the text stopped there.
    CHECK(tok.encode("a  <|end_message|>b") == cat({tok.encode("a  "), {200010}, tok.encode("b")}));
    CHECK(tok.encode("<|audio|><|audio|><|audio|>") == Ids{200023, 200023, 200023});
    CHECK(tok.encode("x<|audio_end|>") == Ids{87, 200043});
    // Near misses stay ordinary text.
    for (const char* s : {"<|message_user", "<|Message_User|>", "<|unused_99|>", "<|endofprompt|>", "<||>"}) {
        CAPTURE(s);
        for (std::int32_t id : tok.encode(s)) CHECK(!tok.is_added(id));
    }
    CHECK(tok.encode("<<|end_message|>>") == cat({tok.encode("<"), {200010}, tok.encode(">")}));
}

TEST_CASE("Inkling tokenizer: decode(encode(s)) == s on tricky strings") {
    const Tokenizer& tok = inkling_tokenizer();
    std::vector<std::string> cases = {
        "",
        " ",
        "Hello, world!",
        "line one\r\nline two\r\n\r\n   \tindented\n",
        "don't DON'T you're You'LL we'd",
        "naïve café — «quotes» ‘single’ “double”",
        "Ελληνικά русский עברית العربية हिन्दी ไทย 한국어 中文 日本語",
        "e\u0301 a\u0308 combining marks",
        "👩‍💻 👨‍👩‍👧‍👦 🇫🇷 👍🏽 1️⃣",
        "int main() { return x<<2 >= y ? a : b; } // /usr/bin/env",
        "1234567890 3.14159 -42 1e-9 ٣٤٥ ０１２",
        std::string("nul\0inside", 10),
        "\x01\x02\x1f\x7f\xc2\x80\xc2\x9f",
        "bad utf-8: \xff\xfe \xc3 \xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf end",
        "\xe9t\xe9 latin-1",
        "<|message_user|><|content_text|>hi<|end_message|><|message_model|>",
        "<|end_message|>\xff<|audio|>\xc3",
        std::string(5000, ' ') + "x",
        std::string(3000, 'a'),
        std::string(2000, '!') + "\n" + std::string(2000, '9'),
    };
    for (const auto& s : cases) {
        CAPTURE(s.substr(0, 60));
        Ids ids = tok.encode(s);
        CHECK(tok.decode(ids) == s);
    }
}

TEST_CASE("Inkling tokenizer: unknown ids throw std::out_of_range") {
    const Tokenizer& tok = inkling_tokenizer();
    CHECK_THROWS_AS(tok.token_bytes(-1), std::out_of_range);
    CHECK_THROWS_AS(tok.token_bytes(200058), std::out_of_range);
    CHECK_THROWS_AS(tok.token_bytes(201023), std::out_of_range);  // padding rows of the model
    Ids bad{3686, 200058};
    CHECK_THROWS_AS(tok.decode(bad), std::out_of_range);
    // The message names the id (FAIL throws doctest's own exception, not out_of_range).
    try {
        tok.token_bytes(250000);
        FAIL("token_bytes(250000) did not throw");
    } catch (const std::out_of_range& e) {
        CHECK(std::string(e.what()).find("250000") != std::string::npos);
    }
}

TEST_CASE("Inkling tokenizer: encode is safe from several threads at once") {
    const Tokenizer& tok = inkling_tokenizer();
    std::string text;
    for (int i = 0; i < 200; ++i) text += "The quick brown fox, número " + std::to_string(i) + " — 🦊<|end_message|>\n";
    Ids want = tok.encode(text);
    std::vector<Ids> got(4);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < got.size(); ++t) {
        threads.emplace_back([&, t] {
            for (int r = 0; r < 5; ++r) got[t] = tok.encode(text);
        });
    }
    for (auto& th : threads) th.join();
    for (const auto& g : got) CHECK(g == want);
}

TEST_CASE("rank-BPE without merges merges the pair whose concatenation has the lowest id") {
    ScratchDir dir("tokenizer-test");
    // 256 "bc", 257 "ab", 258 "abc", 259 "cd"
    Tokenizer tok = load_json(dir, tiny({"bc", "ab", "abc", "cd"}));
    CHECK(tok.vocab_size() == 260);
    // a b c d: "bc" (256) first, then "abc" (258); "cd" never gets its chance.
    CHECK(tok.encode("abcd") == Ids{258, 'd'});
    CHECK(tok.encode("abc") == Ids{258});          // a whole piece in the vocab
    CHECK(tok.encode("ab cd") == Ids{257, ' ', 259});
    CHECK(tok.encode("xyz") == Ids{'x', 'y', 'z'});
    CHECK(tok.decode(Ids{258, 'd'}) == "abcd");
}

TEST_CASE("merges in string and array form give the same BPE; ignore_merges takes whole pieces") {
    ScratchDir dir("tokenizer-test");
    auto j = tiny({"ab", "bc", "abc", "abcd"});  // 256 ab, 257 bc, 258 abc, 259 abcd
    j["model"]["merges"] = nlohmann::json::array({"a b", "b c"});
    Tokenizer strings = load_json(dir, j);
    j["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"a", "b"}), nlohmann::json::array({"b", "c"})});
    Tokenizer arrays = load_json(dir, j);
    // "a b" first (rank 0); ("ab", "c") is no merge, so "abc" is never formed.
    CHECK(strings.encode("abcd") == Ids{256, 'c', 'd'});
    CHECK(arrays.encode("abcd") == Ids{256, 'c', 'd'});
    CHECK(strings.encode("bcd") == Ids{257, 'd'});
    // ignore_merges: a piece that is itself in the vocab is one token.
    j["model"]["ignore_merges"] = true;
    CHECK(load_json(dir, j).encode("abcd") == Ids{259});
    CHECK(load_json(dir, j).encode("abcd abcda") == Ids{259, ' ', 256, 'c', 'd', 'a'});
    // Ties between equal pairs go to the leftmost.
    j["model"]["merges"] = nlohmann::json::array({"a a"});
    j["model"]["vocab"][byte_level("aa")] = 260;
    CHECK(load_json(dir, j).encode("aaa") == Ids{260, 'a'});
}

TEST_CASE("added tokens match longest first, leftmost first, anywhere in the text") {
    ScratchDir dir("tokenizer-test");
    auto j = tiny({});
    j["added_tokens"] = nlohmann::json::array({
        {{"id", 300}, {"content", "<a>"}, {"special", true}},
        {{"id", 301}, {"content", "<a><b>"}, {"special", true}},
        {{"id", 302}, {"content", "b>"}, {"special", false}},
    });
    Tokenizer tok = load_json(dir, j);
    CHECK(tok.vocab_size() == 303);
    CHECK(tok.encode("<a><b>") == Ids{301});
    CHECK(tok.encode("x<a>y") == Ids{'x', 300, 'y'});
    CHECK(tok.encode("<a><b") == Ids{300, '<', 'b'});
    CHECK(tok.encode("<b>") == Ids{'<', 302});         // non-special added tokens match too
    CHECK(tok.encode("<a><a><b>") == Ids{300, 301});
    CHECK(tok.token_bytes(301) == "<a><b>");
    CHECK_THROWS_AS(tok.token_bytes(299), std::out_of_range);  // a gap in the id space
}

TEST_CASE("malformed tokenizer.json files give errors that name the file and the problem") {
    ScratchDir dir("tokenizer-test");
    auto mutate = [&](auto edit) {
        auto j = tiny({"ab"});
        edit(j);
        return load_error(dir, j.dump());
    };
    auto contains = [](const std::string& what, const std::string& part) {
        CAPTURE(what);
        CHECK(what.find(part) != std::string::npos);
    };

    try {
        Tokenizer::load(dir.dir / "missing.json");
        FAIL("no throw");
    } catch (const std::runtime_error& e) {
        contains(e.what(), "missing.json: cannot open");
    }
    contains(load_error(dir, "{\"model\": "), "not valid JSON");
    contains(load_error(dir, "[1, 2]"), "not a JSON object");
    contains(mutate([](auto& j) { j.erase("model"); }), "model is missing");
    contains(mutate([](auto& j) { j["model"]["type"] = "WordPiece"; }), "model.type is \"WordPiece\"");
    contains(mutate([](auto& j) { j["model"].erase("vocab"); }), "model.vocab is missing");
    contains(mutate([](auto& j) { j["model"]["vocab"]["\xe2\x96\x81the"] = 500; }), "not byte-level-encoded");
    contains(mutate([](auto& j) { j["model"]["vocab"]["xy"] = 256; }), "id 256 is used twice");
    contains(mutate([](auto& j) { j["model"]["vocab"]["xy"] = -3; }), "outside");
    contains(mutate([](auto& j) { j["model"]["vocab"]["xy"] = "7"; }), "not an integer");
    contains(mutate([](auto& j) { j["model"]["vocab"].erase("A"); }), "no token for the single byte 0x41");
    contains(mutate([](auto& j) { j["model"]["merges"] = nlohmann::json::array({"a q"}); }), "the merged token \"aq\" is not in model.vocab");
    contains(mutate([](auto& j) { j["model"]["merges"] = nlohmann::json::array({"a b", "zz b"}); }), "model.merges[1]: \"zz\" is not in model.vocab");
    contains(mutate([](auto& j) { j["model"]["merges"] = nlohmann::json::array({"ab"}); }), "not two tokens");
    contains(mutate([](auto& j) { j["model"]["merges"] = nlohmann::json::array({42}); }), "model.merges[0] is neither");
    contains(mutate([](auto& j) { j["pre_tokenizer"] = nullptr; }), "pre_tokenizer is missing");
    contains(mutate([](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "([a-"; }),
             "regex does not compile");
    contains(mutate([](auto& j) { j["pre_tokenizer"]["pretokenizers"].erase(0); }), "no Split regex");
    contains(mutate([](auto& j) { j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true; }),
             "ByteLevel with add_prefix_space or use_regex");
    contains(mutate([](auto& j) { j["normalizer"] = {{"type", "NFC"}}; }), "normalizer");
    contains(mutate([](auto& j) { j["added_tokens"] = nlohmann::json::array({{{"id", 300}, {"content", ""}}}); }), "added_tokens[0]: content");
    contains(mutate([](auto& j) { j["added_tokens"] = nlohmann::json::array({{{"id", 300}, {"content", "<x>"}, {"lstrip", true}}}); }),
             "lstrip=true is not supported");
    contains(mutate([](auto& j) {
                 j["added_tokens"] = nlohmann::json::array({{{"id", 300}, {"content", "<x>"}}, {{"id", 301}, {"content", "<x>"}}});
             }),
             "listed twice");
}
