#include <doctest/doctest.h>

#include <string>

#include "gateway/engines/affinity_map.h"

using namespace inkling::gateway;

TEST_CASE("the affinity map keeps at most its capacity, dropping the least recently used") {
    AffinityMap m(2);
    const auto a = AffinityMap::key_of("conversation a"), b = AffinityMap::key_of("conversation b"),
               c = AffinityMap::key_of(std::string(12u << 20, 'c'));  // a 12 MB first turn is 8 bytes here
    CHECK(a != b);
    CHECK(AffinityMap::key_of("conversation a") == a);
    CHECK(AffinityMap::key_of("") == 14695981039346656037ull);  // FNV-1a: the same in every build
    m.remember(a, 1);
    m.remember(b, 2);
    CHECK(m.find(a) == 1);  // a is now the most recent
    m.remember(c, 3);       // evicts b
    CHECK(m.size() == 2);
    CHECK(!m.find(b));
    CHECK(m.find(a) == 1);
    CHECK(m.find(c) == 3);
    m.remember(a, 0);  // an update moves, never grows
    CHECK(m.size() == 2);
    CHECK(m.find(a) == 0);
    CHECK(m.bytes() == 2 * AffinityMap::kBytesPerEntry);
    AffinityMap none(0);
    none.remember(a, 1);
    CHECK(none.size() == 0);
}
