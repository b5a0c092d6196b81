#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "protocol/text/base64.h"

using namespace inkling::protocol::text;

TEST_CASE("base64 round-trips any bytes, reads unpadded text and names what is wrong") {
    CHECK(decode_base64("aGVsbG8=") == "hello");
    for (const std::string& s : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)})
        CHECK(decode_base64(encode_base64(s)) == s);
    CHECK(encode_base64("hello") == "aGVsbG8=");
    CHECK(decode_base64("aGVsbG8") == "hello");
    CHECK_THROWS_WITH_AS(decode_base64("aGV$bG8="), "bad byte at offset 3", std::invalid_argument);
    CHECK_THROWS_WITH_AS(decode_base64("aGVsbG8=x"), "bad byte at offset 8", std::invalid_argument);
    CHECK_THROWS_WITH_AS(decode_base64("aGVsb"), "bad length", std::invalid_argument);
}
