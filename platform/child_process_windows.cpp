#include "platform/child_process.h"

#include <windows.h>
#include <fcntl.h>
#include <io.h>

#include <csignal>
#include <cstdlib>
#include <stdexcept>

#include "platform/pipe_io.h"
#include "platform/windows_error.h"

namespace inkling::platform {

std::string ExitStatus::describe() const {
    if (signal == 0) return "exited with status " + std::to_string(code);
    return "was killed by signal " + std::to_string(signal);
}

namespace {

// One argument as CommandLineToArgvW and the CRT's argv parser read it back: quoted when
// it has blanks or quotes, backslashes doubled only before a quote.
std::wstring quote(const std::wstring& arg) {
    if (!arg.empty() && arg.find_first_of(L" \t\n\v\"") == std::wstring::npos) return arg;
    std::wstring q = L"\"";
    for (std::size_t i = 0;; ++i) {
        std::size_t backslashes = 0;
        while (i < arg.size() && arg[i] == L'\\') {
            ++i;
            ++backslashes;
        }
        if (i == arg.size()) {
            q.append(backslashes * 2, L'\\');
            break;
        }
        if (arg[i] == L'"') q.append(backslashes * 2 + 1, L'\\');
        else q.append(backslashes, L'\\');
        q += arg[i];
    }
    return q + L"\"";
}

std::wstring wide(const std::string& s) {
    if (s.empty()) return {};
    const int n = MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), nullptr, 0);
    std::wstring w(static_cast<std::size_t>(n), L'\0');
    MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), w.data(), n);
    return w;
}

std::wstring command_line(const std::vector<std::string>& argv) {
    std::wstring line;
    for (const auto& a : argv) line += (line.empty() ? L"" : L" ") + quote(wide(a));
    return line;
}

[[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + ": " + error_text(GetLastError()));
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& stderr_path) {
    SECURITY_ATTRIBUTES inherit{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
    HANDLE in_read, in_write, out_read, out_write;
    if (!CreatePipe(&in_read, &in_write, &inherit, 0)) fail("CreatePipe failed");
    if (!CreatePipe(&out_read, &out_write, &inherit, 0)) fail("CreatePipe failed");
    // The parent's ends stay here.
    SetHandleInformation(in_write, HANDLE_FLAG_INHERIT, 0);
    SetHandleInformation(out_read, HANDLE_FLAG_INHERIT, 0);
    HANDLE err = CreateFileW(wide(stderr_path).c_str(), GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, &inherit,
                             CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL, nullptr);
    if (err == INVALID_HANDLE_VALUE) fail(stderr_path + ": cannot create");

    // Only these three handles are inherited, whatever else is inheritable in this process.
    HANDLE handles[3] = {in_read, out_write, err};
    SIZE_T list_bytes = 0;
    InitializeProcThreadAttributeList(nullptr, 1, 0, &list_bytes);
    std::vector<char> list_buf(list_bytes);
    auto* list = reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(list_buf.data());
    if (!InitializeProcThreadAttributeList(list, 1, 0, &list_bytes)) fail("InitializeProcThreadAttributeList failed");
    UpdateProcThreadAttribute(list, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, handles, sizeof handles, nullptr, nullptr);
    STARTUPINFOEXW si{};
    si.StartupInfo.cb = sizeof si;
    si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    si.StartupInfo.hStdInput = in_read;
    si.StartupInfo.hStdOutput = out_write;
    si.StartupInfo.hStdError = err;
    si.lpAttributeList = list;
    PROCESS_INFORMATION pi{};
    std::wstring line = command_line(argv);
    const BOOL ok = CreateProcessW(nullptr, line.data(), nullptr, nullptr, TRUE,
                                   CREATE_NEW_PROCESS_GROUP | EXTENDED_STARTUPINFO_PRESENT, nullptr, nullptr,
                                   &si.StartupInfo, &pi);
    const DWORD create_error = GetLastError();
    DeleteProcThreadAttributeList(list);
    CloseHandle(in_read);
    CloseHandle(out_write);
    CloseHandle(err);
    if (!ok) {
        CloseHandle(in_write);
        CloseHandle(out_read);
        throw std::runtime_error("cannot start " + argv[0] + ": " + error_text(create_error));
    }
    CloseHandle(pi.hThread);
    pid_ = static_cast<long>(pi.dwProcessId);
    handle_ = reinterpret_cast<std::intptr_t>(pi.hProcess);
    // Binary descriptors: a text-mode read end would turn the child's CR LF into LF.
    in_fd_ = _open_osfhandle(reinterpret_cast<std::intptr_t>(in_write), _O_WRONLY | _O_BINARY);
    out_fd_ = _open_osfhandle(reinterpret_cast<std::intptr_t>(out_read), _O_RDONLY | _O_BINARY);
}

ChildProcess::~ChildProcess() {
    close_stdin();
    // The child first, so the reader thread on its stdout sees the end and lets go of it.
    if (handle_ != -1 && !status_) kill_and_wait();
    if (out_fd_ >= 0) {
        forget_fd(out_fd_, 5000);
        _close(out_fd_);
    }
    if (handle_ != -1) CloseHandle(reinterpret_cast<HANDLE>(handle_));
}

void ChildProcess::close_stdin() {
    if (in_fd_ >= 0) _close(in_fd_);
    in_fd_ = -1;
}

void ChildProcess::signal(int sig) {
    if (handle_ == -1 || status_) return;
    if (sig == SIGINT || sig == SIGTERM) GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, static_cast<DWORD>(pid_));
    else TerminateProcess(reinterpret_cast<HANDLE>(handle_), 137);
}

std::optional<ExitStatus> ChildProcess::try_wait() {
    if (status_) return status_;
    HANDLE h = reinterpret_cast<HANDLE>(handle_);
    if (WaitForSingleObject(h, 0) != WAIT_OBJECT_0) return std::nullopt;
    DWORD code = 0;
    GetExitCodeProcess(h, &code);
    status_ = ExitStatus{static_cast<int>(code), 0};
    return status_;
}

ExitStatus ChildProcess::kill_and_wait() {
    if (status_) return *status_;
    HANDLE h = reinterpret_cast<HANDLE>(handle_);
    TerminateProcess(h, 137);
    WaitForSingleObject(h, INFINITE);
    DWORD code = 0;
    GetExitCodeProcess(h, &code);
    status_ = ExitStatus{static_cast<int>(code), 0};
    return *status_;
}

void replace_process(const std::vector<std::string>& argv) {
    std::wstring line = command_line(argv);
    STARTUPINFOW si{};
    si.cb = sizeof si;
    PROCESS_INFORMATION pi{};
    if (!CreateProcessW(wide(argv[0]).c_str(), line.data(), nullptr, nullptr, TRUE, 0, nullptr, nullptr, &si, &pi))
        return;
    CloseHandle(pi.hThread);
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 1;
    GetExitCodeProcess(pi.hProcess, &code);
    std::exit(static_cast<int>(code));
}

}  // namespace inkling::platform
