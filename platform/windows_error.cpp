#include "platform/windows_error.h"

namespace inkling::platform {
namespace {

thread_local std::string g_last_error;

}  // namespace

std::string error_text(DWORD code) {
    char* text = nullptr;
    const DWORD n = FormatMessageA(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM |
                                       FORMAT_MESSAGE_IGNORE_INSERTS,
                                   nullptr, code, 0, reinterpret_cast<char*>(&text), 0, nullptr);
    std::string s = n && text ? std::string(text, n) : "Windows error " + std::to_string(code);
    if (text) LocalFree(text);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '.')) s.pop_back();
    return s;
}

void remember_error(DWORD code) { g_last_error = error_text(code); }
std::string remembered_error() { return g_last_error; }

}  // namespace inkling::platform
