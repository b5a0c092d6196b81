// The Inkling tokenizer that tools/make-tokenizer builds, loaded once per test binary:
// $INKLING_TOKENIZER_JSON, else build/o200k-inkling/tokenizer.json (made by
// tools/make-tokenizer/ensure.sh build/o200k-inkling). A test FAILs when it is missing.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include "engine/model/tokenizer.h"

namespace test_support {

inline const inkling::model::Tokenizer& inkling_tokenizer() {
    static const inkling::model::Tokenizer tok = [] {
        const char* env = std::getenv("INKLING_TOKENIZER_JSON");
        std::filesystem::path path = env && *env ? std::filesystem::path(env)
                                                 : std::filesystem::path(INKLING_SOURCE_DIR) / "build/o200k-inkling/tokenizer.json";
        if (!std::filesystem::exists(path)) {
            FAIL("no Inkling tokenizer.json at " << path.string()
                 << "; run tools/make-tokenizer/ensure.sh build/o200k-inkling or set INKLING_TOKENIZER_JSON");
        }
        return inkling::model::Tokenizer::load(path);
    }();
    return tok;
}

}  // namespace test_support
