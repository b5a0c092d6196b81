#include "tools/coli/line_input.h"

#include <iostream>

namespace coli {

void start_line_history() {}

std::optional<std::string> read_terminal_line(const char* prompt) {
    std::cout << prompt << std::flush;
    std::string line;
    if (!std::getline(std::cin, line)) return std::nullopt;
    return line;
}

}  // namespace coli
