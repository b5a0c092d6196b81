#include "tools/coli/line_input.h"

#include <editline/readline.h>

#include <cstdlib>

namespace coli {

void start_line_history() { using_history(); }

std::optional<std::string> read_terminal_line(const char* prompt) {
    char* l = readline(prompt);
    if (!l) return std::nullopt;
    std::string line = l;
    if (!line.empty()) add_history(l);
    std::free(l);
    return line;
}

}  // namespace coli
