# The project's settings for the mingw-w64 build (cmake/mingw-w64-x86_64.cmake is the
# toolchain; tools/windows/build.sh runs both). Included by the top-level CMakeLists.txt.
#   PCRE2_STATIC: pcre2.h declares its functions dllimport unless told the library is static
#     (tools/windows/deps builds it so).
#   NOMINMAX, WIN32_LEAN_AND_MEAN: <windows.h> without min/max macros and the rarely used rest.
#   _WIN32_WINNT 0x0A00: Windows 10 APIs (PROC_THREAD_ATTRIBUTE_HANDLE_LIST, QueryWorkingSetEx).
add_compile_definitions(PCRE2_STATIC NOMINMAX WIN32_LEAN_AND_MEAN _WIN32_WINNT=0x0A00)
# Debian's libz-mingw-w64-dev has libz.a beside the DLL's import library: take the static one.
set(ZLIB_USE_STATIC_LIBS ON)
