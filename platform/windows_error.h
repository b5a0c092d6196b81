// Windows only: the text of a GetLastError() code, kept per thread for last_error().
#pragma once

#include <windows.h>

#include <string>

namespace inkling::platform {

std::string error_text(DWORD code);
// The calling thread's last remembered error. (One definition in windows_error.cpp: an
// inline thread_local in this header gave every user its own TLS init function, which
// mingw-w64's linker refuses as multiply defined.)
void remember_error(DWORD code);
std::string remembered_error();

}  // namespace inkling::platform
