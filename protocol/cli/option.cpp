#include "protocol/cli/option.h"

#include <algorithm>

namespace inkling::cli {
namespace {

// "run, serve" → {"run", "serve"}.
std::vector<std::string_view> split_list(std::string_view list) {
    std::vector<std::string_view> out;
    while (!list.empty()) {
        const auto comma = list.find(',');
        std::string_view item = list.substr(0, comma);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        if (!item.empty()) out.push_back(item);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return out;
}

bool all_of(std::string_view s, bool (*ok)(char)) {
    return !s.empty() && std::all_of(s.begin(), s.end(), ok);
}
bool kebab(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }
bool upper(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

std::string label(const Program& p, const Option& o) {
    const char* prefix = o.kind == Kind::Flag ? "--" : "";
    return std::string(p.name) + " " + prefix + std::string(o.name);
}

}  // namespace

bool applies(const Option& o, std::string_view command) {
    if (o.commands == "all" || command.empty()) return true;
    const auto list = split_list(o.commands);
    return std::find(list.begin(), list.end(), command) != list.end();
}

std::vector<std::string_view> commands_of(const Program& p, const Option& o) {
    if (o.commands != "all") return split_list(o.commands);
    std::vector<std::string_view> out;
    for (const auto& c : p.commands) out.push_back(c.name);
    return out;
}

bool has_command(const Program& p, std::string_view command) {
    return std::any_of(p.commands.begin(), p.commands.end(), [&](const Command& c) { return c.name == command; });
}

const Option* find(const Program& p, Kind kind, std::string_view name, std::string_view command) {
    for (const auto& o : p.options)
        if (o.kind == kind && o.name == name && applies(o, command)) return &o;
    return nullptr;
}

std::vector<std::string> problems(const Program& p) {
    std::vector<std::string> out;
    for (const auto& o : p.options) {
        const std::string what = label(p, o);
        const bool name_ok = o.kind == Kind::Env ? all_of(o.name, upper) : all_of(o.name, kebab);
        if (!name_ok) out.push_back(what + ": a flag or positional is kebab-case, a variable UPPER_CASE");
        if (o.doc.empty() || o.doc.find('\n') != std::string_view::npos) out.push_back(what + ": the doc is one line");
        if ((o.type == Type::Bool) != o.value_name.empty())
            out.push_back(what + ": a value name exactly when it takes a value");
        if (p.commands.empty() && o.commands != "all") out.push_back(what + ": " + std::string(p.name) + " has no commands");
        if (o.commands != "all" && split_list(o.commands).empty()) out.push_back(what + ": no commands");
        for (auto c : commands_of(p, o))
            if (!p.commands.empty() && !has_command(p, c))
                out.push_back(what + ": unknown command '" + std::string(c) + "'");
        const bool hook = o.kind == Kind::Flag && o.name.starts_with("fault-");
        if (hook != !o.used_by.empty()) out.push_back(what + ": a fault hook is a --fault-* flag that names its tests");
        if (!o.flag_of.empty() && (o.kind != Kind::Env || !find(p, Kind::Flag, o.flag_of)))
            out.push_back(what + ": stands in for --" + std::string(o.flag_of) + ", which is no flag");
        // One name, one value type: every command's table registers it the same way.
        for (const auto& other : p.options) {
            if (&other == &o || other.kind != o.kind || other.name != o.name) continue;
            if (other.type != o.type) out.push_back(what + ": declared twice with different types");
            if (&other > &o)
                for (auto c : commands_of(p, o))
                    if (applies(other, c)) out.push_back(what + ": declared twice for " + std::string(c));
        }
    }
    return out;
}

}  // namespace inkling::cli
