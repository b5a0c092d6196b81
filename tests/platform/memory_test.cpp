// platform::MappedFile's two backings (--load-weights map / copy): the same bytes either way,
// whatever the size; the copy on whole huge pages where the OS offers them; errors name the file.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "platform/memory.h"

namespace {

namespace fs = std::filesystem;
using inkling::platform::FileBacking;
using inkling::platform::MappedFile;

fs::path write_file(const std::string& name, const std::vector<char>& bytes) {
    const fs::path p = fs::temp_directory_path() / name;
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
}

}  // namespace

TEST_CASE("a file copied into memory holds the bytes its mapping shows, at every size") {
    std::mt19937 rng(7);
    // Around the 2 MiB page: below, exactly, one byte past; and an odd size over several.
    for (std::size_t size : {std::size_t{1}, std::size_t{4095}, std::size_t{2} << 20, (std::size_t{2} << 20) + 1,
                             std::size_t{5 << 20} + 123}) {
        CAPTURE(size);
        std::vector<char> bytes(size);
        for (auto& b : bytes) b = static_cast<char>(rng());
        const fs::path p = write_file("inkling-memory-test.bin", bytes);
        {
            const MappedFile mapped(p), copied(p, FileBacking::Copy);
            CHECK_FALSE(mapped.copied());
            CHECK(copied.copied());
            REQUIRE(mapped.size() == size);
            REQUIRE(copied.size() == size);
            CHECK(std::equal(bytes.begin(), bytes.end(), reinterpret_cast<const char*>(mapped.data())));
            CHECK(std::equal(bytes.begin(), bytes.end(), reinterpret_cast<const char*>(copied.data())));
#ifndef _WIN32
            // Whole huge pages from a 2 MiB boundary, so THP can back every byte.
            CHECK(reinterpret_cast<std::uintptr_t>(copied.data()) % (std::uintptr_t{2} << 20) == 0);
#endif
        }
        fs::remove(p);
    }
}

TEST_CASE("an empty file holds nothing either way; a missing one is an error naming it") {
    const fs::path empty = write_file("inkling-memory-empty.bin", {});
    CHECK(MappedFile(empty, FileBacking::Copy).size() == 0);
    CHECK(MappedFile(empty).size() == 0);
    fs::remove(empty);
    const fs::path missing = fs::temp_directory_path() / "inkling-memory-missing.bin";
    for (FileBacking b : {FileBacking::Map, FileBacking::Copy}) {
        try {
            MappedFile f(missing, b);
            FAIL("opened a missing file");
        } catch (const std::runtime_error& e) {
            CHECK(std::string(e.what()).find("inkling-memory-missing.bin") != std::string::npos);
        }
    }
}

TEST_CASE("the memory available is known (what --load-weights auto weighs the files against)") {
    CHECK(inkling::platform::available_memory_bytes() > 0);
}

#ifndef _WIN32
TEST_CASE("a cgroup's memory limit bounds the memory available (a container's, which MemAvailable does not see)") {
    const fs::path root = fs::temp_directory_path() / "inkling-memory-cgroup";
    fs::remove_all(root);
    auto put = [&](const fs::path& rel, const std::string& text) {
        fs::create_directories((root / rel).parent_path());
        std::ofstream(root / rel) << text;
    };
    using inkling::platform::cgroup_memory_left;
    // v2: limit less usage, the inactive file pages counted as free.
    put("pod/app/memory.max", "1000000\n");
    put("pod/app/memory.current", "700000\n");
    put("pod/app/memory.stat", "anon 500000\nfile 200000\ninactive_file 100000\nactive_file 100000\n");
    CHECK(cgroup_memory_left(root, "0::/pod/app\n") == 1000000 - (700000 - 100000));
    // v2 without a limit, and a group whose files are absent.
    put("free/memory.max", "max\n");
    put("free/memory.current", "5\n");
    CHECK(cgroup_memory_left(root, "0::/free\n") == 0);
    CHECK(cgroup_memory_left(root, "0::/\n") == 0);
    // v1, the memory controller named alone or among others; its "no limit" value.
    put("memory/job/memory.limit_in_bytes", "4096000\n");
    put("memory/job/memory.usage_in_bytes", "1096000\n");
    put("memory/job/memory.stat", "cache 5\ntotal_inactive_file 96000\n");
    CHECK(cgroup_memory_left(root, "12:pids:/\n4:memory:/job\n0::/\n") == 4096000 - (1096000 - 96000));
    CHECK(cgroup_memory_left(root, "3:cpu,memory:/job\n") == 4096000 - (1096000 - 96000));
    put("memory/host/memory.limit_in_bytes", "9223372036854771712\n");
    put("memory/host/memory.usage_in_bytes", "7605002240\n");
    CHECK(cgroup_memory_left(root, "4:memory:/host\n") == 0);
    // At the limit: something (1), so that the caller sees a limit and no room under it.
    put("full/memory.max", "1000\n");
    put("full/memory.current", "5000\n");
    CHECK(cgroup_memory_left(root, "0::/full\n") == 1);
    fs::remove_all(root);
}
#endif
