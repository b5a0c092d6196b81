#include <doctest/doctest.h>
TEST_CASE("build smoke") { CHECK(1 == 1); }
