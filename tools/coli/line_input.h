// coli's prompt on a terminal: line editing and history. POSIX: libedit's readline.
// Windows: the console's own line editing (arrows, F7 history) through std::getline, as
// libedit is not built for mingw-w64.
#pragma once

#include <optional>
#include <string>

namespace coli {

void start_line_history();
// The next line typed after `prompt`, or nullopt at end of input (Ctrl-D / Ctrl-Z).
std::optional<std::string> read_terminal_line(const char* prompt);

}  // namespace coli
