// The reasoning/content split of streamed tokens (protocol/text/output_splitter.h) and the
// whole-character release under it.
#include <doctest/doctest.h>

#include <string>

#include "protocol/text/output_splitter.h"

using namespace inkling::protocol::text;

TEST_CASE("the splitter routes reasoning and content by the model's channel markers") {
    OutputSplitter s(false);
    std::string content, reasoning;
    for (std::string t : {"<|content_thinking|>", "Let", " me", "<|content_text|>", "Hi", "<|end_message|>",
                          "<|content_model_end_sampling|>"}) {
        auto o = s.feed(t);
        content += o.content;
        reasoning += o.reasoning;
    }
    CHECK(reasoning == "Let me");
    CHECK(content == "Hi");
    OutputSplitter direct(true);
    CHECK(direct.feed("plain").content == "plain");
}

TEST_CASE("the splitter releases only whole UTF-8 characters and replaces invalid bytes") {
    OutputSplitter s(true);
    CHECK(s.feed("\xe2\x82").content.empty());  // first two bytes of €
    CHECK(s.feed("\xac!").content == "\xe2\x82\xac!");
    CHECK(s.feed("\xff").content == "\xef\xbf\xbd");
    CHECK(s.feed("\xc3").content.empty());
    CHECK(s.flush().content == "\xef\xbf\xbd");  // cut short at the end
    CHECK(s.feed("\xed\xa0\x80").content == "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // a surrogate
    CHECK(is_marker("<|audio_end|>"));
    CHECK(!is_marker("<|not a marker|>"));
    CHECK(!is_marker("<b>"));
}
