#include "gateway/api/anthropic/anthropic_request.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "gateway/api/api_error.h"
#include "gateway/api/json_fields.h"
#include "gateway/engines/affinity_map.h"
#include "gateway/generation/tool_constraint.h"
#include "gateway/generation/tool_render.h"
#include "protocol/limits.h"
#include "protocol/tml_render.h"

namespace inkling::gateway {

using nlohmann::json;
namespace tml = protocol::tml;

namespace {

enum class Mode { Create, Count };

// The body fields each endpoint takes (count_tokens: the prompt's fields only, as Anthropic's
// count_tokens). Anything else is a 400 naming it: a field this server does not know may ask
// for something it does not do.
struct KnownField {
    std::string_view name;
    bool count;  // count_tokens takes it too
};
constexpr std::array kFields{
    KnownField{"model", true},         KnownField{"messages", true},      KnownField{"system", true},
    KnownField{"thinking", true},      KnownField{"output_config", true}, KnownField{"tools", true},
    KnownField{"tool_choice", true},   KnownField{"max_tokens", false},   KnownField{"stream", false},
    KnownField{"stop_sequences", false}, KnownField{"temperature", false}, KnownField{"top_p", false},
    KnownField{"top_k", false},        KnownField{"metadata", false},
    // Accepted with no effect here (docs/gateway.md says why for each).
    KnownField{"cache_control", true}, KnownField{"context_management", true}, KnownField{"speed", true},
    KnownField{"service_tier", false}, KnownField{"container", false},    KnownField{"inference_geo", false},
    KnownField{"diagnostics", false},
};

// More stop sequences than this cost every token a scan of each; no agent sends so many.
constexpr std::size_t kMaxStopSequences = 64;

void check_fields(const json& body, Mode mode) {
    for (const auto& item : body.items()) {
        // A named variable, not a structured binding: clang 14 cannot capture one in a lambda.
        const std::string& key = item.key();
        const auto known = std::find_if(kFields.begin(), kFields.end(), [&](const KnownField& f) { return f.name == key; });
        if (known == kFields.end())
            throw bad_request("'" + key + "' is not a field this server's Messages API takes", key);
        if (mode == Mode::Count && !known->count)
            throw bad_request("'" + key + "' is not a count_tokens field (it takes the prompt's fields only)", key);
    }
}

const std::string& string_field(const json& object, const char* key, const std::string& p) {
    const json* v = field(object, key);
    if (!v || !v->is_string()) throw bad_request(p + "." + key + " must be a string", p + "." + key);
    return v->get_ref<const std::string&>();
}

// Why a block type is refused, by type; "" for one this server reads.
std::string refusal(const std::string& type) {
    if (type == "image") return "image blocks are not supported: Inkling reads text (and audio, on /v1/chat/completions)";
    if (type == "document") return "document blocks are not supported: send the document's text as a text block";
    if (type == "redacted_thinking")
        return "redacted_thinking blocks are not supported: this server never redacts thinking, so it has none to take back";
    return "'" + type + "' blocks are not supported (text; tool_result in user messages; thinking and tool_use in "
           "assistant messages)";
}

// Whether a part renders anything (empty text renders nothing; a tool result always does).
bool renders(const tml::Message& turn, const tml::Part& part) {
    return part.kind == tml::Part::Kind::ToolCall || !part.text.empty() || turn.role == tml::Role::Tool;
}

// A tool result's content: a string, or text blocks (an image in a result is refused).
std::string result_text(const json& block, const std::string& pb) {
    const json* content = field(block, "content");
    if (!content) return {};
    if (content->is_string()) return content->get<std::string>();
    if (!content->is_array()) throw bad_request(pb + ".content must be a string or an array of text blocks", pb + ".content");
    std::string text;
    for (std::size_t k = 0; k < content->size(); ++k) {
        const json& part = (*content)[k];
        const std::string pp = pb + ".content[" + std::to_string(k) + "]";
        if (!part.is_object()) throw bad_request(pp + " must be a content block (an object)", pp);
        const std::string& type = string_field(part, "type", pp);
        if (type != "text") throw bad_request(pp + ": " + refusal(type), pp + ".type");
        text += string_field(part, "text", pp);
    }
    return text;
}

// The conversation as TMLv0 messages. Consecutive turns of one role are one turn (as in
// Anthropic's API); a user turn's tool_result blocks are tool messages of their own (TMLv0
// names a result by its function), in place.
class History {
public:
    std::vector<tml::Message> turns;

    std::size_t rendering_parts() const {
        std::size_t n = 0;
        for (const auto& t : turns)
            for (const auto& part : t.parts) n += renders(t, part);
        return n;
    }

    void add(tml::Role role, tml::Part part) {
        if (turns.empty() || turns.back().role != role) turns.push_back({role, {}, {}});
        turns.back().parts.push_back(std::move(part));
    }

    // One message's or the system prompt's content: a string (one text block) or blocks.
    void content(const json& content, tml::Role role, const std::string& p) {
        if (content.is_string()) return add(role, tml::Part::text_part(content.get<std::string>()));
        if (!content.is_array()) throw bad_request(p + " must be a string or an array of content blocks", p);
        for (std::size_t k = 0; k < content.size(); ++k) block(content[k], role, p + "[" + std::to_string(k) + "]");
    }

private:
    void block(const json& block, tml::Role role, const std::string& pb) {
        if (!block.is_object()) throw bad_request(pb + " must be a content block (an object)", pb);
        const std::string& type = string_field(block, "type", pb);
        const bool assistant = role == tml::Role::Assistant;
        if (type == "text") {
            add(role, tml::Part::text_part(string_field(block, "text", pb)));
        } else if (type == "thinking" && assistant) {
            // Thinking sent back (with whatever signature: this server does not sign) is the
            // model's earlier reasoning, rendered as such.
            add(role, tml::Part::thinking(string_field(block, "thinking", pb)));
        } else if (type == "tool_use" && assistant) {
            const std::string& name = string_field(block, "name", pb);
            if (name.empty()) throw bad_request(pb + ".name is empty", pb + ".name");
            const json* input = field(block, "input");
            if (!input || !input->is_object()) throw bad_request(pb + ".input must be an object", pb + ".input");
            names_[string_field(block, "id", pb)] = name;
            add(role, tml::Part::tool_call(name, tool_call_envelope(name, *input)));
        } else if (type == "tool_result" && role == tml::Role::User) {
            const std::string& id = string_field(block, "tool_use_id", pb);
            const auto call = names_.find(id);
            if (call == names_.end())
                throw bad_request(pb + ".tool_use_id '" + id + "' names no tool_use block of an earlier assistant turn",
                                  pb + ".tool_use_id");
            if (const json* e = field(block, "is_error"); e && !e->is_boolean())
                throw bad_request(pb + ".is_error must be a boolean", pb + ".is_error");
            turns.push_back({tml::Role::Tool, {tml::Part::text_part(result_text(block, pb))}, call->second});
        } else if (type == "thinking" || type == "tool_use") {
            throw bad_request(pb + ": " + type + " blocks belong to assistant messages", pb + ".type");
        } else if (type == "tool_result") {
            throw bad_request(pb + ": tool_result blocks belong to user messages", pb + ".type");
        } else {
            throw bad_request(pb + ": " + refusal(type), pb + ".type");
        }
    }

    std::map<std::string, std::string> names_;  // tool_use id → its function
};

struct Thinking {
    double effort = 0.0;
    bool omit = false;
};

Thinking parse_thinking(const json& body, std::optional<std::uint64_t> max_tokens) {
    Thinking t;
    const json* th = field(body, "thinking");
    if (th) {
        if (!th->is_object()) throw bad_request("'thinking' must be an object", "thinking");
        const std::string& type = string_field(*th, "type", "thinking");
        if (type == "enabled") {
            const json* b = field(*th, "budget_tokens");
            if (!b || !b->is_number_integer() || b->get<std::int64_t>() < 1024)
                throw bad_request("'thinking.budget_tokens' must be an integer of at least 1024", "thinking.budget_tokens");
            const auto budget = b->get<std::uint64_t>();
            if (max_tokens && budget >= *max_tokens)
                throw bad_request("'max_tokens' must be greater than 'thinking.budget_tokens' (" + std::to_string(budget) +
                                      ")",
                                  "max_tokens");
            t.effort = effort_for_budget(budget);
        } else if (type == "adaptive") {
            t.effort = kAdaptiveEffort;
        } else if (type != "disabled") {
            throw bad_request("'thinking.type' must be enabled, adaptive or disabled, not '" + type + "'", "thinking.type");
        }
        if (const json* d = field(*th, "display")) {
            if (!d->is_string() || (*d != "summarized" && *d != "omitted"))
                throw bad_request("'thinking.display' must be summarized or omitted", "thinking.display");
            t.omit = *d == "omitted";
        }
    }
    if (const json* oc = field(body, "output_config")) {
        if (!oc->is_object()) throw bad_request("'output_config' must be an object", "output_config");
        for (const auto& [key, value] : oc->items()) {
            if (value.is_null()) continue;
            if (key == "format")
                throw bad_request("'output_config.format' (structured outputs) is not supported", "output_config.format");
            if (key != "effort") throw bad_request("'output_config." + key + "' is not supported", "output_config." + key);
            static constexpr std::array<std::string_view, 5> kLevels{"low", "medium", "high", "xhigh", "max"};
            if (!value.is_string() ||
                std::find(kLevels.begin(), kLevels.end(), value.get<std::string>()) == kLevels.end())
                throw bad_request("'output_config.effort' must be low, medium, high, xhigh or max", "output_config.effort");
            // Inkling's effort is its thinking effort: it sets the level of thinking that is on.
            if (t.effort > 0) t.effort = *tml::effort_for_level(value.get<std::string>());
        }
    }
    return t;
}

// Anthropic's rule for tool names: 1-128 of a-z A-Z 0-9 _ -.
bool valid_tool_name(const std::string& n) {
    return !n.empty() && n.size() <= 128 && std::all_of(n.begin(), n.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
}

ToolUse parse_tools(const json& body) {
    ToolUse use;
    if (const json* tools = field(body, "tools")) {
        if (!tools->is_array()) throw bad_request("'tools' must be an array", "tools");
        std::set<std::string> seen;
        for (std::size_t i = 0; i < tools->size(); ++i) {
            const json& t = (*tools)[i];
            const std::string p = "tools[" + std::to_string(i) + "]";
            if (!t.is_object()) throw bad_request(p + " must be an object", p);
            // Server tools (web search, code execution, …) run at Anthropic; only client tools here.
            if (const json* type = field(t, "type"); type && (!type->is_string() || *type != "custom"))
                throw bad_request(p + ": tool type '" + (type->is_string() ? type->get<std::string>() : type_name(*type)) +
                                      "' is not supported (only client tools: name, description, input_schema)",
                                  p + ".type");
            ToolSpec spec;
            spec.name = string_field(t, "name", p);
            if (!valid_tool_name(spec.name))
                throw bad_request(p + ".name must be 1-128 characters of a-z, A-Z, 0-9, _ and -", p + ".name");
            if (!seen.insert(spec.name).second) throw bad_request(p + ": a second tool named '" + spec.name + "'", p + ".name");
            if (const json* d = field(t, "description")) {
                if (!d->is_string()) throw bad_request(p + ".description must be a string", p + ".description");
                spec.description = d->get<std::string>();
            }
            const json* schema = field(t, "input_schema");
            if (!schema || !schema->is_object())
                throw bad_request(p + ".input_schema must be a JSON Schema object", p + ".input_schema");
            spec.parameters = *schema;
            use.tools.push_back(std::move(spec));
        }
    }
    use.choice = use.tools.empty() ? ToolChoice::None : ToolChoice::Auto;
    if (const json* choice = field(body, "tool_choice")) {
        if (!choice->is_object()) throw bad_request("'tool_choice' must be an object", "tool_choice");
        const std::string& type = string_field(*choice, "type", "tool_choice");
        if (type == "none") use.choice = ToolChoice::None;
        else if (type == "auto") use.choice = use.tools.empty() ? ToolChoice::None : ToolChoice::Auto;
        else if (type == "any") use.choice = ToolChoice::Required;
        else if (type == "tool") use.choice = ToolChoice::Named;
        else throw bad_request("'tool_choice.type' must be auto, any, tool or none", "tool_choice.type");
        if ((type == "any" || type == "tool") && use.tools.empty())
            throw bad_request("'tool_choice' " + type + " needs tools, and 'tools' is empty", "tool_choice");
        if (type == "tool") {
            use.name = string_field(*choice, "name", "tool_choice");
            if (std::none_of(use.tools.begin(), use.tools.end(), [&](const ToolSpec& t) { return t.name == use.name; }))
                throw bad_request("'tool_choice' names '" + use.name + "', which is not among 'tools'", "tool_choice.name");
        }
        use.parallel = !flag(*choice, "disable_parallel_tool_use", false);
    }
    return use;
}

void parse_sampling(const json& body, const GatewayLimits& limits, GenerationRequest& r) {
    const json* mt = field(body, "max_tokens");
    if (!mt) throw bad_request("'max_tokens' is required", "max_tokens");
    if (!mt->is_number_integer() || mt->get<std::int64_t>() < 1)
        throw bad_request("'max_tokens' must be a positive integer", "max_tokens");
    // Clamped to the server's cap as on the OpenAI routes (agents ask for 32000 and more).
    r.max_tokens = std::min<std::uint64_t>(mt->get<std::uint64_t>(), limits.max_tokens_cap);
    r.stream = flag(body, "stream", false);
    r.temperature = number_in(body, "temperature", 1.0, 0.0, 1.0, false);
    r.top_p = number_in(body, "top_p", 1.0, 0.0, 1.0, true);
    if (const json* k = field(body, "top_k")) {
        const auto cap = protocol::kDefaultLimits.max_top_k;
        if (!k->is_number_integer() || k->get<std::int64_t>() < 1 || k->get<std::uint64_t>() > cap)
            throw bad_request("'top_k' must be an integer in 1.." + std::to_string(cap), "top_k");
        r.top_k = static_cast<std::uint32_t>(k->get<std::uint64_t>());
    }
    if (const json* stops = field(body, "stop_sequences")) {
        if (!stops->is_array()) throw bad_request("'stop_sequences' must be an array of strings", "stop_sequences");
        if (stops->size() > kMaxStopSequences)
            throw bad_request("'stop_sequences' takes at most " + std::to_string(kMaxStopSequences) + " sequences",
                              "stop_sequences");
        for (const auto& s : *stops) {
            if (!s.is_string() || s.get_ref<const std::string&>().empty())
                throw bad_request("'stop_sequences' entries must be non-empty strings", "stop_sequences");
            r.stop.push_back(s.get<std::string>());
        }
    }
    if (const json* m = field(body, "metadata")) {
        if (!m->is_object()) throw bad_request("'metadata' must be an object", "metadata");
        if (const json* u = field(*m, "user_id")) {
            if (!u->is_string()) throw bad_request("'metadata.user_id' must be a string", "metadata.user_id");
            r.user = u->get<std::string>();
        }
    }
}

GenerationRequest parse(const json& body, const GatewayLimits& limits, Mode mode) {
    if (!body.is_object()) throw bad_request("the request body must be a JSON object");
    check_fields(body, mode);
    const std::string model = require_model(body, limits.model_ids);
    GenerationRequest r;
    r.model = model;
    if (mode == Mode::Create) {
        parse_sampling(body, limits, r);
    } else {
        // Counting: the engine tokenizes the prompt and answers ACCEPT; nothing is generated.
        r.count_only = true;
        r.max_tokens = 1;
        r.temperature = 0.0;
    }
    const json* mt = field(body, "max_tokens");
    const Thinking thinking = parse_thinking(
        body, mt && mt->is_number_integer() ? std::optional(mt->get<std::uint64_t>()) : std::nullopt);
    r.omit_reasoning = thinking.omit;
    r.tools = parse_tools(body);
    const bool forced = r.tools.choice == ToolChoice::Required || r.tools.choice == ToolChoice::Named;
    // As at Anthropic, a forced call starts the turn: no thinking before it.
    if (forced && thinking.effort > 0)
        throw bad_request("'tool_choice' any or tool cannot be combined with thinking (the call starts the turn)",
                          "tool_choice");
    // any / tool: the engine's constrained decoding makes the output that call (or calls),
    // its input valid against the schema; never left to the model. Counting generates nothing.
    if (mode == Mode::Create) r.constraint = forced_call_constraint(r.tools);

    History history;
    if (const json* system = field(body, "system")) history.content(*system, tml::Role::System, "system");
    const json* messages = field(body, "messages");
    if (!messages || !messages->is_array() || messages->empty())
        throw bad_request("'messages' must be a non-empty array", "messages");
    for (std::size_t i = 0; i < messages->size(); ++i) {
        const json& m = (*messages)[i];
        const std::string p = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) throw bad_request(p + " must be an object", p);
        const std::string& role = string_field(m, "role", p);
        tml::Role r_role;
        // A system message inside `messages` applies at its place (newer agents send them
        // after the first user turn), rendered as TMLv0 renders any system message.
        if (role == "user") r_role = tml::Role::User;
        else if (role == "assistant") r_role = tml::Role::Assistant;
        else if (role == "system") r_role = tml::Role::System;
        else throw bad_request(p + ".role must be user, assistant or system, not '" + role + "'", p + ".role");
        const json* content = field(m, "content");
        if (!content) throw bad_request(p + ".content is required", p + ".content");
        const std::size_t before = history.rendering_parts();
        history.content(*content, r_role, p + ".content");
        const bool last = i + 1 == messages->size();
        if (history.rendering_parts() == before && !(last && r_role == tml::Role::Assistant))
            throw bad_request(p + ".content is empty (only a final assistant message may be)", p + ".content");
    }
    auto& turns = history.turns;
    // A final assistant turn is a prefill: the reply continues it (its text is not repeated
    // in the answer). One that renders nothing is no prefill.
    if (turns.back().role == tml::Role::Assistant &&
        std::none_of(turns.back().parts.begin(), turns.back().parts.end(),
                     [&](const tml::Part& part) { return renders(turns.back(), part); }))
        turns.pop_back();
    if (turns.empty()) throw bad_request("'messages' holds nothing to answer", "messages");
    const bool prefill = turns.back().role == tml::Role::Assistant;
    if (prefill && forced)
        throw bad_request("a final assistant turn (a prefill) cannot be combined with 'tool_choice' any or tool",
                          "tool_choice");
    if (prefill && turns.back().parts.back().kind == tml::Part::Kind::ToolCall)
        throw bad_request("a final assistant turn that ends in tool_use needs its tool_result in a user turn after it",
                          "messages");
    tml::RenderOptions options;
    options.effort = thinking.effort;
    options.add_generation_prompt = !prefill;
    if (r.tools.callable()) options.tools = tool_declarations(r.tools.tools);
    try {
        r.prompt = tml::render(turns, options);
        // The conversation's identity for slot affinity, as on /v1/chat/completions: its
        // system messages and first user turn (so either API finds the slot of the other).
        const auto first_user = std::find_if(turns.begin(), turns.end(), [](const tml::Message& t) {
            return t.role == tml::Role::User;
        });
        tml::RenderOptions identity = options;
        identity.add_generation_prompt = true;
        if (first_user != turns.end())
            r.affinity = AffinityMap::key_of(tml::render(std::vector(turns.begin(), first_user + 1), identity));
    } catch (const std::invalid_argument& e) {
        throw bad_request(e.what(), "messages");
    }
    if (prefill) {
        // The model goes on in the channel the prefill left open.
        const auto& parts = turns.back().parts;
        const auto open = std::find_if(parts.rbegin(), parts.rend(), [](const tml::Part& part) { return !part.text.empty(); });
        r.start_in_content = open->kind == tml::Part::Kind::Text;
    } else {
        // Text before any content-kind marker is the answer at effort 0: the prompt opened it,
        // or (with tools, whose generation prompt stays bare) the model answers without
        // thinking; as on /v1/chat/completions.
        r.start_in_content = thinking.effort == 0.0;
    }
    return r;
}

}  // namespace

double effort_for_budget(std::uint64_t budget_tokens) {
    if (budget_tokens < 4000) return *tml::effort_for_level("low");
    if (budget_tokens < 16000) return *tml::effort_for_level("medium");
    if (budget_tokens < 32000) return *tml::effort_for_level("high");
    return *tml::effort_for_level("max");
}

GenerationRequest parse_messages_request(const json& body, const GatewayLimits& limits) {
    return parse(body, limits, Mode::Create);
}

GenerationRequest parse_count_tokens_request(const json& body, const GatewayLimits& limits) {
    return parse(body, limits, Mode::Count);
}

}  // namespace inkling::gateway
