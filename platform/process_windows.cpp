#include "platform/process.h"

#include <windows.h>
#include <io.h>

#include <filesystem>
#include <random>

#include "platform/file_io.h"

namespace inkling::platform {

std::filesystem::path executable_path() {
    std::wstring buf(32768, L'\0');
    const DWORD n = GetModuleFileNameW(nullptr, buf.data(), static_cast<DWORD>(buf.size()));
    if (n == 0 || n >= buf.size()) return {};
    buf.resize(n);
    return buf;
}

bool is_terminal(std::FILE* stream) { return _isatty(_fileno(stream)) != 0; }

bool stdin_is_terminal() { return _isatty(0) != 0; }

void die_now() {
    TerminateProcess(GetCurrentProcess(), 137);
    std::abort();  // not reached
}

void ignore_broken_pipe_signal() {}

void ignore_file_size_signal() {}

File create_private_file(std::string& path_template, int suffix_len) {
    const std::size_t at = path_template.size() - static_cast<std::size_t>(suffix_len) - 6;
    if (path_template.compare(at, 6, "XXXXXX") != 0) return kNoFile;
    std::random_device rd;
    static const char* letters = "abcdefghijklmnopqrstuvwxyz0123456789";
    for (int attempt = 0; attempt < 100; ++attempt) {
        for (int i = 0; i < 6; ++i) path_template[at + static_cast<std::size_t>(i)] = letters[rd() % 36];
        const File f = open_file(path_template, Open::CreateNew);  // CREATE_NEW: never an existing name
        if (f != kNoFile) return f;
        std::error_code ec;
        if (!std::filesystem::exists(path_template, ec)) return kNoFile;  // failed for another reason
    }
    return kNoFile;
}

}  // namespace inkling::platform
