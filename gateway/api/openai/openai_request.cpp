#include "gateway/api/openai/openai_request.h"

#include <stdexcept>

#include "gateway/api/api_error.h"
#include "gateway/api/json_fields.h"
#include "gateway/api/openai/openai_tools.h"
#include "gateway/api/openai/response_format.h"
#include "gateway/engines/affinity_map.h"
#include "gateway/generation/schema_check.h"
#include "gateway/generation/tool_constraint.h"
#include "protocol/audio/audio_error.h"
#include "protocol/audio/dmel.h"
#include "protocol/fields.h"
#include "protocol/limits.h"
#include "protocol/text/base64.h"
#include "protocol/tml_render.h"

namespace inkling::gateway {

using nlohmann::json;
namespace tml = protocol::tml;

namespace {

// Fields every generation request shares.
void common(const json& body, const GatewayLimits& limits, GenerationRequest& r) {
    if (!body.is_object()) throw bad_request("the request body must be a JSON object");
    r.model = require_model(body, limits.model_ids);
    if (const json* n = field(body, "n")) {
        if (!n->is_number_integer()) throw bad_request("'n' must be an integer", "n");
        if (n->get<long long>() != 1) throw bad_request("only n=1 is supported", "n");
    }
    r.stream = flag(body, "stream", false);
    if (const json* so = field(body, "stream_options")) {
        if (!so->is_object()) throw bad_request("'stream_options' must be an object", "stream_options");
        if (!r.stream) throw bad_request("'stream_options' is only allowed with stream=true", "stream_options");
        r.include_usage = flag(*so, "include_usage", false);
    }
    r.temperature = number_in(body, "temperature", 1.0, 0.0, 2.0, false);
    r.top_p = number_in(body, "top_p", 1.0, 0.0, 1.0, true);
    for (const char* penalty : {"frequency_penalty", "presence_penalty"}) {
        double v = number_in(body, penalty, 0.0, -2.0, 2.0, false);
        if (v != 0.0) throw bad_request(std::string("'") + penalty + "' is not supported (only 0)", penalty);
    }
    if (const json* s = field(body, "seed")) {
        if (!s->is_number_integer()) throw bad_request("'seed' must be an integer", "seed");
        r.seed = static_cast<std::uint64_t>(s->get<long long>());
    }
    // max_completion_tokens wins over the older max_tokens; both clamp to the server cap.
    const char* mt_key = field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    r.max_tokens = limits.max_tokens_cap;
    if (const json* mt = field(body, mt_key)) {
        if (!mt->is_number_integer() || mt->get<long long>() < 1)
            throw bad_request(std::string("'") + mt_key + "' must be a positive integer", mt_key);
        r.max_tokens = std::min<std::uint64_t>(mt->get<std::uint64_t>(), limits.max_tokens_cap);
    }
    if (const json* stop = field(body, "stop")) {
        if (stop->is_string()) r.stop.push_back(stop->get<std::string>());
        else if (stop->is_array()) {
            if (stop->size() > 4) throw bad_request("'stop' takes at most 4 sequences", "stop");
            for (const auto& s : *stop) {
                if (!s.is_string()) throw bad_request("'stop' entries must be strings", "stop");
                r.stop.push_back(s.get<std::string>());
            }
        } else {
            throw bad_request("'stop' must be a string or an array of strings", "stop");
        }
        for (const auto& s : r.stop)
            if (s.empty()) throw bad_request("'stop' sequences must not be empty", "stop");
    }
    if (const json* u = field(body, "user")) {
        if (!u->is_string()) throw bad_request("'user' must be a string", "user");
        r.user = u->get<std::string>();
    }
    if (const json* slot = field(body, "cache_slot")) {
        // Checked in its own width: get<int>() took 2^32 for slot 0.
        const bool in_range = slot->is_number_unsigned()  ? slot->get<std::uint64_t>() <= protocol::kDefaultLimits.max_slot
                              : slot->is_number_integer() ? slot->get<std::int64_t>() >= 0 &&
                                                                slot->get<std::int64_t>() <= static_cast<std::int64_t>(protocol::kDefaultLimits.max_slot)
                                                          : false;
        if (!in_range)
            throw bad_request("'cache_slot' must be an integer in 0.." + std::to_string(protocol::kDefaultLimits.max_slot),
                              "cache_slot");
        r.slot_hint = static_cast<int>(slot->get<std::int64_t>());
    }
}

// The engine's constraint for a chat turn. `required` or a named function: the call (or
// calls), arguments valid against the schema — never left to the model; such a turn has no
// text, so a response_format has nothing to shape and both are honoured. Else a JSON
// response_format: the answer is that JSON, then the end of the message; with `auto` tools
// the turn is that answer or calls (held to their schemas as forced calls are).
std::string chat_constraint(const GenerationRequest& r) {
    if (r.tools.choice == ToolChoice::Required || r.tools.choice == ToolChoice::Named) return forced_call_constraint(r.tools);
    if (!r.format.json()) return {};
    using oj = nlohmann::ordered_json;
    const oj end_message = {{"type", "token"}, {"token", std::string(tml::marker::kEndMessage)}};
    if (!r.tools.callable())  // the prompt opened the answer (<|content_text|> at effort 0)
        return oj{{"type", "sequence"}, {"items", oj::array({answer_value_node(r.format), end_message})}}.dump();
    // A bare <|message_model|>: unmarked text is the answer at effort 0, or the model opens it.
    const oj opened = {{"type", "any_of"},
                       {"items", oj::array({oj{{"type", "token"}, {"token", std::string(tml::marker::kContentText)}},
                                            oj{{"type", "sequence"}, {"items", oj::array()}}})}};
    const oj answer = {{"type", "sequence"}, {"items", oj::array({opened, answer_value_node(r.format), end_message})}};
    return oj{{"type", "any_of"}, {"items", oj::array({answer, oj(any_calls_node(r.tools))})}}.dump();
}

// Every schema chat_constraint will send, checked before the request takes a slot: a
// construct the engine cannot enforce is a 400 naming the field that carried it.
void check_constraint_schemas(const GenerationRequest& r) {
    const bool forced = r.tools.choice == ToolChoice::Required || r.tools.choice == ToolChoice::Named;
    if (r.format.kind == ResponseFormat::Kind::JsonSchema && !forced)
        check_schema(r.format.schema, "response_format.json_schema.schema", false);
    if (!forced && !(r.format.json() && r.tools.callable())) return;
    for (std::size_t i = 0; i < r.tools.tools.size(); ++i) {
        const ToolSpec& t = r.tools.tools[i];
        if (t.parameters.empty() || (r.tools.choice == ToolChoice::Named && t.name != r.tools.name)) continue;
        check_schema(nlohmann::ordered_json(t.parameters), "tools[" + std::to_string(i) + "].function.parameters", true);
    }
}

tml::Role role_of(const std::string& role, const std::string& param) {
    if (role == "system") return tml::Role::System;
    if (role == "developer") return tml::Role::Developer;
    if (role == "user") return tml::Role::User;
    if (role == "assistant") return tml::Role::Assistant;
    if (role == "tool") return tml::Role::Tool;
    throw bad_request("'" + role + "' is not a role (system, developer, user, assistant, tool)", param);
}

// An input_audio part (`pp` names it): its WAV clip as DMel frames appended to `audio`,
// within what is left of the request's max_audio_seconds (`audio_seconds`, the clips read so
// far); returns the part that stands for them in the prompt.
tml::Part audio_part(const json& part, const std::string& pp, const GatewayLimits& limits, double& audio_seconds,
                     std::string& audio) {
    const json* ia = field(part, "input_audio");
    const json* data = ia && ia->is_object() ? field(*ia, "data") : nullptr;
    if (!data || !data->is_string())
        throw bad_request(pp + ".input_audio.data must be a base64 string", pp + ".input_audio.data");
    if (const json* fmt = field(*ia, "format"); fmt && (!fmt->is_string() || fmt->get<std::string>() != "wav"))
        throw bad_request(pp + ".input_audio.format must be \"wav\"", pp + ".input_audio.format");
    std::string wav = decode_base64(data->get_ref<const std::string&>(), pp + ".input_audio.data");
    const std::span bytes(reinterpret_cast<const std::uint8_t*>(wav.data()), wav.size());
    protocol::audio::EncodedAudio enc;
    try {
        // The duration from the header, before a sample is decoded: the
        // request's clips together may last max_audio_seconds.
        const auto head = protocol::audio::read_wav_header(bytes);
        const double seconds = static_cast<double>(head.frames) / head.format.sample_rate;
        const double left = static_cast<double>(limits.max_audio_seconds) - audio_seconds;
        if (seconds > left)
            throw bad_request(pp + ": the clip lasts " + protocol::format_fixed(seconds, 1) +
                                  " s; a request's audio may last " +
                                  std::to_string(limits.max_audio_seconds) + " s in all" +
                                  (audio_seconds > 0 ? " (" + protocol::format_fixed(left, 1) + " s left)" : ""),
                              pp + ".input_audio.data", "invalid_audio");
        protocol::audio::EncodeOptions opt;
        opt.dmel.rms_boost = limits.dmel_boost;
        opt.max_seconds = left;  // bounds the resampler's output too
        enc = protocol::audio::encode_wav_to_dmel(bytes, opt);
        audio_seconds += static_cast<double>(enc.samples_16k) / protocol::audio::kTargetRate;
    } catch (const protocol::audio::AudioError& e) {
        throw bad_request(pp + ": " + e.what(), pp + ".input_audio.data", "invalid_audio");
    }
    if (enc.n_frames == 0) throw bad_request(pp + ": the clip is empty", pp + ".input_audio.data", "invalid_audio");
    audio.append(enc.frames.begin(), enc.frames.end());
    return tml::Part::audio(enc.n_frames);
}

}  // namespace

std::string decode_base64(const std::string& text, const std::string& param) {
    try {
        return protocol::text::decode_base64(text);
    } catch (const std::invalid_argument& e) {
        throw bad_request("'" + param + "' is not valid base64 (" + e.what() + ")", param);
    }
}

GenerationRequest parse_chat_request(const json& body, const GatewayLimits& limits) {
    GenerationRequest r;
    common(body, limits, r);
    r.tools = parse_openai_tools(body);
    r.format = parse_response_format(body);
    if (flag(body, "logprobs", false)) {
        const json* top = field(body, "top_logprobs");
        if (top && (!top->is_number_integer() || top->get<long long>() < 0 || top->get<long long>() > 20))
            throw bad_request("'top_logprobs' must be an integer in 0..20", "top_logprobs");
        r.logprobs = top ? static_cast<std::uint32_t>(top->get<long long>()) : 0;
    } else if (field(body, "top_logprobs")) {
        throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    }
    tml::RenderOptions render_options;
    if (r.tools.callable()) render_options.tools = tool_declarations(r.tools.tools);
    double effort = 0.0;
    if (const json* e = field(body, "reasoning_effort")) {
        if (!e->is_string()) throw bad_request("'reasoning_effort' must be a string", "reasoning_effort");
        auto v = tml::effort_for_level(e->get<std::string>());
        if (!v) throw bad_request("'reasoning_effort' must be one of " + tml::effort_level_names(), "reasoning_effort");
        effort = *v;
    }
    render_options.effort = effort;
    if (r.format.json() && effort != 0.0 && r.tools.choice != ToolChoice::Required && r.tools.choice != ToolChoice::Named)
        throw bad_request("response_format " + std::string(r.format.kind == ResponseFormat::Kind::JsonObject ? "json_object" : "json_schema") +
                              " needs reasoning_effort 'none' (the default): the reasoning before the answer cannot be "
                              "constrained, and an unconstrained answer would not be the JSON asked for",
                          "reasoning_effort");
    check_constraint_schemas(r);
    r.constraint = chat_constraint(r);
    const json* messages = field(body, "messages");
    if (!messages || !messages->is_array() || messages->empty())
        throw bad_request("'messages' must be a non-empty array", "messages");
    std::vector<tml::Message> chat;
    std::map<std::string, std::string> call_names;  // tool_call_id → function, for the results
    double audio_seconds = 0;  // of the clips read so far
    bool have_affinity = false;
    for (std::size_t i = 0; i < messages->size(); ++i) {
        const json& m = (*messages)[i];
        const std::string p = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) throw bad_request(p + " must be an object", p);
        const json* role = field(m, "role");
        if (!role || !role->is_string()) throw bad_request(p + ".role must be a string", p + ".role");
        tml::Message msg{role_of(role->get<std::string>(), p + ".role"), {}, {}};
        if (const json* name = field(m, "name")) {
            if (!name->is_string()) throw bad_request(p + ".name must be a string", p + ".name");
        }
        if (msg.role == tml::Role::Tool) msg.name = openai_tool_result_name(m, p, call_names);
        if (const json* reasoning = field(m, "reasoning_content"); reasoning && msg.role == tml::Role::Assistant) {
            if (!reasoning->is_string()) throw bad_request(p + ".reasoning_content must be a string", p + ".reasoning_content");
            msg.parts.push_back(tml::Part::thinking(reasoning->get<std::string>()));
        }
        const json* content = field(m, "content");
        if (!content) {
            // Only an assistant turn may lack content (it rendered nothing, e.g. tool calls).
            if (msg.role != tml::Role::Assistant) throw bad_request(p + ".content is required", p + ".content");
        } else if (content->is_string()) {
            msg.parts.push_back(tml::Part::text_part(content->get<std::string>()));
        } else if (content->is_array()) {
            for (std::size_t k = 0; k < content->size(); ++k) {
                const json& part = (*content)[k];
                const std::string pp = p + ".content[" + std::to_string(k) + "]";
                const json* type = part.is_object() ? field(part, "type") : nullptr;
                if (!type || !type->is_string()) throw bad_request(pp + ".type must be a string", pp + ".type");
                const std::string t = type->get<std::string>();
                if (t == "text") {
                    const json* text = field(part, "text");
                    if (!text || !text->is_string()) throw bad_request(pp + ".text must be a string", pp + ".text");
                    msg.parts.push_back(tml::Part::text_part(text->get<std::string>()));
                } else if (t == "input_audio") {
                    if (msg.role != tml::Role::User) throw bad_request("audio is only accepted in user messages", pp);
                    msg.parts.push_back(audio_part(part, pp, limits, audio_seconds, r.audio));
                } else {
                    throw bad_request(pp + ": content part type '" + t + "' is not supported (text, input_audio)", pp + ".type");
                }
            }
        } else {
            throw bad_request(p + ".content must be a string, an array of parts or null", p + ".content");
        }
        append_openai_tool_calls(m, p, msg, call_names);  // after its text (docs/model.md, "Tools")
        chat.push_back(std::move(msg));
        // The conversation's identity for slot affinity: its system messages and first user turn.
        if (!have_affinity && chat.back().role == tml::Role::User) {
            r.affinity = AffinityMap::key_of(tml::render(chat, render_options));
            have_affinity = true;
        }
    }
    try {
        r.prompt = tml::render(chat, render_options);
    } catch (const std::invalid_argument& e) {
        throw bad_request(e.what(), "messages");
    }
    // Text before any content-kind marker is the answer at effort 0: the prompt opened it, or
    // (with tools, whose generation prompt stays bare) the model answers without thinking.
    r.start_in_content = effort == 0.0;
    return r;
}

GenerationRequest parse_completion_request(const json& body, const GatewayLimits& limits) {
    GenerationRequest r;
    common(body, limits, r);
    const json* prompt = field(body, "prompt");
    if (!prompt) throw bad_request("'prompt' is required", "prompt");
    if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) prompt = &(*prompt)[0];
    if (!prompt->is_string()) throw bad_request("'prompt' must be a string (batches are not supported)", "prompt");
    r.prompt = prompt->get<std::string>();
    if (r.prompt.empty()) throw bad_request("'prompt' is empty", "prompt");
    if (flag(body, "echo", false)) throw bad_request("'echo' is not supported", "echo");
    // OpenAI's legacy limit: the chosen token and up to 5 alternatives per position.
    if (const json* lp = field(body, "logprobs")) {
        if (!lp->is_number_integer() || lp->get<long long>() < 0 || lp->get<long long>() > 5)
            throw bad_request("'logprobs' must be an integer in 0..5 (or null)", "logprobs");
        r.logprobs = static_cast<std::uint32_t>(lp->get<long long>());
    }
    if (field(body, "suffix")) throw bad_request("'suffix' is not supported", "suffix");
    // OpenAI's legacy completions API has no response_format: refused, not ignored — a
    // client asking for JSON must not get free text.
    if (field(body, "response_format"))
        throw bad_request("'response_format' is not a field of /v1/completions (OpenAI's completions API has none); "
                          "use /v1/chat/completions for JSON output",
                          "response_format");
    r.start_in_content = true;
    r.affinity = AffinityMap::key_of(std::string_view(r.prompt).substr(0, 256));
    return r;
}

void keep_declared_key_order(GenerationRequest& g, std::string_view raw_body) {
    if (g.format.kind != ResponseFormat::Kind::JsonSchema) return;
    auto schema = declared_schema(raw_body);
    if (!schema) return;
    g.format.schema = std::move(*schema);
    g.constraint = chat_constraint(g);
}

}  // namespace inkling::gateway
