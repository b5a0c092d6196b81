// The C++ tests' scratch directories: one of the test's own under the system's temporary
// directory, empty or a copy of another directory (a fixture to damage freely), removed with
// everything in it when the object goes out of scope.
//
//   test_support::ScratchDir t("experts");                                          // empty
//   test_support::ScratchDir s("loader", test_paths::fixtures() / "base-hf-f32");   // a copy
//   write_container(t.dir / "experts.inkx", …);
//   fs::path p = t.write("tokenizer.json", text);
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace test_support {

class ScratchDir {
public:
    // <tmp>/inkling-<tag>-<pid>-<n>: n counts this process's scratch directories, so two
    // alive at once never share one, whatever their tags.
    explicit ScratchDir(std::string_view tag, const std::filesystem::path& copy_of = {})
        : dir(std::filesystem::temp_directory_path() / ("inkling-" + std::string(tag) + "-" +
                                                         std::to_string(::getpid()) + "-" + std::to_string(next()))) {
        std::filesystem::remove_all(dir);
        if (copy_of.empty())
            std::filesystem::create_directories(dir);
        else
            std::filesystem::copy(copy_of, dir, std::filesystem::copy_options::recursive);
    }
    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    // Writes `bytes` to the file `name` in it; returns the file's path.
    std::filesystem::path write(const std::string& name, std::string_view bytes) const {
        const std::filesystem::path p = dir / name;
        std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        return p;
    }

    const std::filesystem::path dir;

private:
    static int next() {
        static std::atomic<int> n{0};
        return n++;
    }
};

}  // namespace test_support
