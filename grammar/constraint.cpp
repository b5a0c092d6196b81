#include "grammar/constraint.h"

#include <set>

#include "grammar/error.h"
#include "grammar/json_schema.h"

namespace inkling::grammar {
namespace {

constexpr int kMaxNodeDepth = 32;
constexpr std::int64_t kMaxRepeat = 64;

class NodeCompiler {
public:
    NodeCompiler(Nfa& n, std::vector<Frag>& rules, const std::function<std::int32_t(const std::string&)>& special,
                 std::int32_t eos)
        : n_(n), rules_(rules), special_(special), eos_(eos) {}

    Frag node(const Json& j, const std::string& at, int depth) {
        if (depth > kMaxNodeDepth) fail(at, "nodes nested deeper than " + std::to_string(kMaxNodeDepth));
        if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) fail(at, "a node is an object with a \"type\"");
        const std::string type = j["type"].get<std::string>();
        auto keys = [&](std::set<std::string> allowed) {
            allowed.insert("type");
            for (const auto& [k, _] : j.items())
                if (!allowed.count(k)) fail(at, "unknown key '" + k + "' in a " + type + " node");
        };
        if (type == "json_schema" || type == "json_object") {
            keys(type == "json_schema" ? std::set<std::string>{"schema", "whitespace", "key_order"}
                                       : std::set<std::string>{"whitespace"});
            JsonOptions o;
            if (j.contains("whitespace")) {
                const Json& w = j["whitespace"];
                if (w == "none") o.whitespace = Whitespace::None;
                else if (w == "flexible") o.whitespace = Whitespace::Flexible;
                else fail(at + "/whitespace", "whitespace is \"flexible\" or \"none\"");
            }
            if (j.contains("key_order")) {
                const Json& k = j["key_order"];
                if (k == "sorted") o.key_order = KeyOrder::Sorted;
                else if (k == "declared") o.key_order = KeyOrder::Declared;
                else fail(at + "/key_order", "key_order is \"declared\" or \"sorted\"");
            }
            if (type == "json_schema" && !j.contains("schema")) fail(at, "a json_schema node needs \"schema\"");
            const Json& schema = type == "json_schema" ? j["schema"] : j;
            SchemaCompiler c(n_, rules_, schema, o);
            Frag f = type == "json_schema" ? c.compile() : c.any_object();
            c.finish();
            return f;
        }
        if (type == "text") {
            keys({"text"});
            if (!j.contains("text") || !j["text"].is_string()) fail(at, "a text node needs \"text\", a string");
            return n_.literal(j["text"].get<std::string>());
        }
        if (type == "token") {
            keys({"token"});
            if (!j.contains("token") || !j["token"].is_string()) fail(at, "a token node needs \"token\", a string");
            const std::string text = j["token"].get<std::string>();
            const std::int32_t id = special_(text);
            if (id < 0) fail(at + "/token", "'" + text + "' is not a special token of this model's tokenizer");
            if (id == eos_) fail(at + "/token", "'" + text + "' is the end of the turn, which follows the grammar by itself");
            return n_.token(id);
        }
        if (type == "sequence" || type == "any_of") {
            keys({"items"});
            if (!j.contains("items") || !j["items"].is_array() || (type == "any_of" && j["items"].empty()))
                fail(at, "a " + type + " node needs \"items\", a" + (type == "any_of" ? " non-empty" : "n") + " array");
            std::vector<Frag> parts;
            for (std::size_t i = 0; i < j["items"].size(); ++i)
                parts.push_back(node(j["items"][i], at + "/items/" + std::to_string(i), depth + 1));
            return type == "sequence" ? n_.seq(parts) : n_.alt(parts);
        }
        if (type == "repeat") {
            keys({"item", "min", "max", "separator"});
            if (!j.contains("item")) fail(at, "a repeat node needs \"item\"");
            auto count = [&](const char* key, std::int64_t fallback) {
                if (!j.contains(key)) return fallback;
                const Json& v = j[key];
                if (!v.is_number_integer() && !v.is_number_unsigned()) fail(at + "/" + key, std::string(key) + " must be an integer");
                const auto c = v.get<std::int64_t>();
                if (c < 0 || c > kMaxRepeat)
                    fail(at + "/" + key, std::string(key) + " must be in 0.." + std::to_string(kMaxRepeat));
                return c;
            };
            const std::int64_t min = count("min", 0), max = count("max", -1);
            if (max >= 0 && min > max) fail(at, "min is above max");
            auto item = [&] { return node(j["item"], at + "/item", depth + 1); };
            std::function<Frag()> sep;
            if (j.contains("separator")) sep = [&] { return node(j["separator"], at + "/separator", depth + 1); };
            return n_.repeat(item, min, max, sep);
        }
        fail(at, "unknown node type '" + type + "'");
    }

private:
    [[noreturn]] static void fail(const std::string& at, const std::string& why) {
        throw Error("grammar at " + (at.empty() ? std::string("/") : at) + ": " + why);
    }
    Nfa& n_;
    std::vector<Frag>& rules_;
    const std::function<std::int32_t(const std::string&)>& special_;
    std::int32_t eos_;
};

}  // namespace

std::shared_ptr<const Grammar> compile_constraint(std::string_view payload,
                                                  const std::function<std::int32_t(const std::string&)>& special_id,
                                                  std::int32_t eos) {
    Json root;
    try {
        root = Json::parse(payload);
    } catch (const Json::exception& e) {
        throw Error(std::string("grammar: not JSON (") + e.what() + ")");
    }
    Nfa n;
    std::vector<Frag> rules(1);
    NodeCompiler c(n, rules, special_id, eos);
    rules[0] = c.node(root, "", 0);
    return std::make_shared<const Grammar>(Grammar::compile(n, rules));
}

}  // namespace inkling::grammar
