// The message of the exception `f()` throws, or "(no error)": for checking what an error
// names.
#pragma once

#include <exception>
#include <string>

namespace test_errors {

template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace test_errors
