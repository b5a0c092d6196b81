#include "protocol/cli/cxxopts_bind.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "protocol/cli/sibling.h"

namespace inkling::cli {
namespace {

template <typename T>
std::shared_ptr<const cxxopts::Value> typed(const Option& o) {
    auto v = cxxopts::value<T>();
    if (!o.default_sibling.empty()) v->default_value(sibling_path(o.default_sibling));
    else if (!o.default_value.empty()) v->default_value(std::string(o.default_value));
    return v;
}

std::shared_ptr<const cxxopts::Value> value_of(const Option& o) {
    switch (o.type) {
    case Type::Bool: return typed<bool>(o);
    case Type::Int: return typed<int>(o);
    case Type::Unsigned: return typed<unsigned>(o);
    case Type::Int64: return typed<std::int64_t>(o);
    case Type::UInt64: return typed<std::uint64_t>(o);
    case Type::Size: return typed<std::size_t>(o);
    case Type::Port: return typed<unsigned short>(o);
    case Type::Double: return typed<double>(o);
    case Type::String: return typed<std::string>(o);
    case Type::Strings: return typed<std::vector<std::string>>(o);
    }
    return typed<std::string>(o);
}

bool selected(const Option& o, std::initializer_list<std::string_view> commands) {
    if (o.kind == Kind::Env) return false;
    if (commands.size() == 0) return true;
    return std::any_of(commands.begin(), commands.end(), [&](std::string_view c) { return applies(o, c); });
}

std::string spelled(const Option& o) {
    if (o.kind == Kind::Positional) return std::string(o.value_name);
    return (o.name.size() == 1 ? "-" : "--") + std::string(o.name);
}

std::string header(const Program& p, std::initializer_list<std::string_view> commands) {
    std::string h = std::string(p.summary) + "\n";
    auto add_usage = [&](std::string_view usage) {
        for (std::size_t at = 0; at < usage.size();) {
            const auto nl = std::min(usage.find('\n', at), usage.size());
            h += "  " + std::string(usage.substr(at, nl - at)) + "\n";
            at = nl + 1;
        }
    };
    if (p.commands.empty()) add_usage(p.usage);
    // One command: its usage; several: every usage, so the general help names them all.
    for (const auto& c : p.commands)
        if (commands.size() != 1 || c.name == *commands.begin()) add_usage(c.usage);
    if (!h.empty()) h.pop_back();  // cxxopts adds its own line break
    return h;
}

}  // namespace

void add_options(cxxopts::Options& options, const Program& p, std::initializer_list<std::string_view> commands) {
    std::set<std::string_view> seen;
    std::vector<std::string> positionals;
    std::string positional_help;
    auto adder = options.add_options();
    for (const auto& o : p.options) {
        if (!selected(o, commands) || !seen.insert(o.name).second) continue;
        std::string spec(o.name);
        if (o.short_name) spec = std::string(1, o.short_name) + "," + spec;
        adder(spec, std::string(o.doc), value_of(o), std::string(o.value_name));
        if (o.kind == Kind::Positional) {
            positionals.emplace_back(o.name);
            positional_help += (positional_help.empty() ? "" : " ") + std::string(o.value_name);
        }
    }
    if (!positionals.empty()) {
        options.parse_positional(positionals);
        options.positional_help(positional_help);
    }
}

void check_applies(const cxxopts::ParseResult& args, const Program& p, std::string_view command) {
    const std::string where = std::string(p.name) + (command.empty() ? "" : " " + std::string(command));
    for (const auto& kv : args.arguments()) {
        const Option* any = nullptr;
        bool ok = false;
        for (const auto& o : p.options) {
            if (o.kind == Kind::Env || o.name != kv.key()) continue;
            any = &o;
            ok = ok || applies(o, command);
        }
        // cxxopts reads a port into an unsigned short modulo 65536 (99999 became 34463).
        if (ok && any->type == Type::Port) {
            const std::string& v = kv.value();
            const bool digits = !v.empty() && v.size() <= 5 && std::all_of(v.begin(), v.end(), [](char ch) {
                return ch >= '0' && ch <= '9';
            });
            if (!digits || std::stoul(v) > 65535)
                throw cxxopts::exceptions::exception(spelled(*any) + " " + v + ": a port is 0..65535");
        }
        if (ok) continue;
        if (any && any->kind == Kind::Positional)
            throw cxxopts::exceptions::exception(where + " takes no " + std::string(any->value_name) + " ('" +
                                                 kv.value() + "')");
        std::string others;
        for (const auto& o : p.options)
            if (o.name == kv.key())
                for (auto c : commands_of(p, o)) others += (others.empty() ? "" : ", ") + std::string(c);
        throw cxxopts::exceptions::exception(spelled(any ? *any : Option{.name = kv.key()}) + " is not a flag of " +
                                             where + (others.empty() ? "" : " (it belongs to " + others + ")"));
    }
    if (!args.unmatched().empty())
        throw cxxopts::exceptions::exception("unexpected argument '" + args.unmatched().front() + "'");
}

std::string help(const Program& p, std::initializer_list<std::string_view> commands) {
    std::string name(p.name);
    if (commands.size() == 1) name += " " + std::string(*commands.begin());
    cxxopts::Options options(name, header(p, commands));
    add_options(options, p, commands);
    return options.help();
}

}  // namespace inkling::cli
