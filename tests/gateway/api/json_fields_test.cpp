// A request body's bounds (parse_body), before any dialect reads it.
#include <doctest/doctest.h>

#include <string>

#include "gateway/api/api_error.h"
#include "gateway/api/json_fields.h"

using namespace inkling::gateway;

TEST_CASE("request bodies nest at most 64 deep, counted outside strings") {
    auto nested = [](std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
    CHECK(parse_body(nested(64)).is_array());
    try {
        parse_body(nested(65));
        FAIL("65 levels were accepted");
    } catch (const ApiError& e) {
        CHECK(e.status == 400);
        CHECK(std::string(e.what()) == "the body nests JSON deeper than 64 levels (at byte 64)");
    }
    // Brackets inside strings (escaped quotes included) are text, not nesting.
    const std::string text = "{\"a\": \"" + std::string(100, '[') + "\\\"" + std::string(100, '{') + "\"}";
    CHECK(parse_body(text)["a"].get<std::string>().size() == 201);
    // 32 MiB of '[' is refused by the scan at byte 64, before the parser allocates anything.
    CHECK_THROWS_WITH_AS(parse_body(std::string(32u << 20, '[')), "the body nests JSON deeper than 64 levels (at byte 64)",
                         ApiError);
    CHECK_THROWS_WITH_AS(parse_body("{\"a\":"), doctest::Contains("the body is not valid JSON"), ApiError);
}

TEST_CASE("request bodies hold at most 262144 JSON values") {
    auto zeros = [](std::size_t n) {
        std::string s = "[0";
        for (std::size_t i = 1; i < n; ++i) s += ",0";
        return s + "]";
    };
    CHECK(parse_body(zeros(kMaxJsonValues - 1)).size() == kMaxJsonValues - 1);  // the array is a value too
    CHECK_THROWS_WITH_AS(parse_body(zeros(kMaxJsonValues)), doctest::Contains("more than 262144 JSON values"), ApiError);
    // Commas inside strings are text.
    CHECK(parse_body("[\"" + std::string(kMaxJsonValues + 5, ',') + "\"]").size() == 1);
}
