#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "protocol/fields.h"

using namespace inkling::protocol;

TEST_CASE("parse_u64 takes whole unsigned decimal tokens only") {
    CHECK(parse_u64("0") == 0u);
    CHECK(parse_u64("42") == 42u);
    CHECK(parse_u64("18446744073709551615") == std::numeric_limits<std::uint64_t>::max());
    for (const char* bad : {"", "-1", "+1", "1.0", "1e3", "0x10", " 1", "1 ", "12a", "18446744073709551616",
                            "١"})
        CHECK_MESSAGE(!parse_u64(bad), bad);
}

TEST_CASE("parse_finite_double accepts plain decimals and rejects inf, nan, hex and junk") {
    CHECK(parse_finite_double("0") == 0.0);
    CHECK(parse_finite_double("0.7") == 0.7);
    CHECK(parse_finite_double("-1.5") == -1.5);
    CHECK(parse_finite_double(".5") == 0.5);
    CHECK(parse_finite_double("5.") == 5.0);
    CHECK(parse_finite_double("1e-3") == 1e-3);
    CHECK(parse_finite_double("2E+0") == 2.0);
    for (const char* bad : {"", "inf", "-inf", "nan", "NaN", "infinity", "0x1p3", "+1", "1e", "1e+", ".",
                            "-", "1.2.3", "1,5", "1e999", "-1e999", " 1", "1 "})
        CHECK_MESSAGE(!parse_finite_double(bad), bad);
}

TEST_CASE("parse_logprob also takes nan and -inf") {
    CHECK(std::isnan(*parse_logprob("nan")));
    CHECK(*parse_logprob("-inf") == -HUGE_VAL);
    CHECK(parse_logprob("-0.125000") == -0.125);
    CHECK(!parse_logprob("inf"));
}

TEST_CASE("ids are 1..63 safe characters and never the reserved 0") {
    CHECK(is_valid_id("1", 63));
    CHECK(is_valid_id("chatcmpl-3f.a_b:9", 63));
    CHECK(is_valid_id(std::string(63, 'x'), 63));
    CHECK(!is_valid_id(std::string(64, 'x'), 63));
    CHECK(!is_valid_id("", 63));
    CHECK(!is_valid_id("0", 63));
    CHECK(is_valid_id("00", 63));
    for (const char* bad : {"a b", "a\tb", "é", "a/b", "a=b", "a\r"}) CHECK_MESSAGE(!is_valid_id(bad, 63), bad);
}

TEST_CASE("split_fields splits at space runs and keeps other bytes in tokens") {
    auto f = split_fields("  SUBMIT  a 1\t2 ");
    REQUIRE(f.size() == 3);
    CHECK(f[0] == "SUBMIT");
    CHECK(f[1] == "a");
    CHECK(f[2] == "1\t2");
    CHECK(split_fields("").empty());
    CHECK(split_fields("   ").empty());
}

TEST_CASE("printable escapes control and non-ASCII bytes and cuts long text") {
    CHECK(printable("ok") == "ok");
    CHECK(printable(std::string("a\0b\r\n", 5)) == "a\\x00b\\x0d\\x0a");
    CHECK(printable("\\") == "\\x5c");
    CHECK(printable(std::string(100, 'z'), 10) == std::string(10, 'z') + "...");
}

TEST_CASE("format_double is the shortest text that parses back exactly") {
    for (double v : {0.0, 0.7, 0.1, 1.0 / 3.0, 2.0, 1e-7, 0.95}) {
        std::string text = format_double(v);
        CHECK(parse_finite_double(text) == v);
    }
    CHECK(format_double(0.7) == "0.7");
    CHECK(format_fixed(1.23456789, 3) == "1.235");
    CHECK(format_fixed(std::nan(""), 6) == "nan");
}
