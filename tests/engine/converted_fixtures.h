// Converted copies of the tiny fixtures, as `inkling convert SRC DST --experts int8|int4`
// writes them: each made once per test run, on first use, into one scratch directory that
// is removed at the run's end — every test that needs a converted model shares them.
//
//   auto model = model::load_model(test_paths::converted("mixed-hf-f32", experts::Format::Int4));
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "engine/convert/convert.h"
#include "tests/engine/fixture_paths.h"
#include "tests/support/scratch_dir.h"

namespace test_paths {

inline std::filesystem::path converted(const std::string& fixture, inkling::experts::Format format) {
    static test_support::ScratchDir root("converted");
    static std::map<std::string, std::filesystem::path> done;
    const std::string name = fixture + "-" + inkling::experts::format_name(format);
    if (auto it = done.find(name); it != done.end()) return it->second;
    inkling::convert::Options o;
    o.src = fixtures() / fixture;
    o.dst = root.dir / name;
    o.experts = format;
    o.threads = 2;
    inkling::convert::convert(o);
    return done[name] = o.dst;
}

}  // namespace test_paths
