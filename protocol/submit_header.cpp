#include "protocol/submit_header.h"

#include <set>

#include "protocol/fields.h"

namespace inkling::protocol {
namespace {

constexpr std::size_t kFixedFields = 7;  // "SUBMIT" and six values

bool is_extension_key(std::string_view token) {
    return token.find('=') != std::string_view::npos;
}

// One key=value token into `options`; returns an empty string or the reason it is bad.
std::string apply_key(std::string_view token, const Limits& limits, SubmitOptions& options,
                      std::uint64_t& grammar_bytes, std::set<std::string, std::less<>>& seen) {
    auto eq = token.find('=');
    std::string_view key = token.substr(0, eq);
    std::string_view value = token.substr(eq + 1);
    if (key.empty()) return "empty key in '" + printable(token) + "'";
    if (!seen.insert(std::string(key)).second)
        return "duplicate key '" + printable(key) + "'";
    auto bad_value = [&](std::string_view expected) {
        return "key " + std::string(key) + ": expected " + std::string(expected) + ", got '" +
               printable(value) + "'";
    };
    auto flag = [&](bool& out) -> std::string {
        if (value == "0") out = false;
        else if (value == "1") out = true;
        else return bad_value("0 or 1");
        return {};
    };
    if (key == "seed") {
        auto v = parse_u64(value);
        if (!v) return bad_value("an unsigned 64-bit integer");
        options.seed = *v;
    } else if (key == "top_k") {
        auto v = parse_u64(value);
        if (!v || *v > limits.max_top_k)
            return bad_value("an integer in 0.." + std::to_string(limits.max_top_k));
        options.top_k = static_cast<std::uint32_t>(*v);
    } else if (key == "repetition_penalty") {
        auto v = parse_finite_double(value);
        if (!v || *v <= 0.0 || *v > limits.max_repetition_penalty)
            return bad_value("a number in (0, " + format_double(limits.max_repetition_penalty) +
                             "]");
        options.repetition_penalty = *v;
    } else if (key == "ids") {
        return flag(options.ids);
    } else if (key == "logprobs") {
        auto v = parse_u64(value);
        if (!v || *v > limits.max_logprobs)
            return bad_value("an integer in 0.." + std::to_string(limits.max_logprobs));
        options.logprobs = static_cast<std::uint32_t>(*v);
    } else if (key == "data_logprobs") {
        auto v = parse_u64(value);
        if (!v || *v > limits.max_logprobs)
            return bad_value("an integer in 0.." + std::to_string(limits.max_logprobs));
        options.data_logprobs = static_cast<std::uint32_t>(*v);
    } else if (key == "pin") {
        return flag(options.pin);
    } else if (key == "reset") {
        return flag(options.reset);
    } else if (key == "grammar") {
        auto v = parse_u64(value);
        if (!v || *v > limits.max_grammar_bytes)
            return bad_value("a byte count in 0.." + std::to_string(limits.max_grammar_bytes));
        grammar_bytes = *v;
    } else {
        return "unknown key '" + printable(key) + "'";
    }
    return {};
}

}  // namespace

SubmitHeader parse_submit_header(const std::vector<std::string_view>& fields,
                                 const Limits& limits) {
    SubmitHeader out;
    // Lengths and id first, so the payload can be skipped whatever else is wrong.
    if (fields.size() > 1 && is_valid_id(fields[1], limits.max_id_chars))
        out.id = std::string(fields[1]);
    if (fields.size() > 3) out.prompt_bytes = parse_u64(fields[3]);
    bool has_xbytes = fields.size() > kFixedFields && !is_extension_key(fields[kFixedFields]);
    std::optional<std::uint64_t> xbytes = has_xbytes ? parse_u64(fields[kFixedFields])
                                                      : std::optional<std::uint64_t>{0};
    if (xbytes) out.extension_bytes = *xbytes;

    auto fail = [&](std::string why) {
        out.problem = std::move(why);
        return out;
    };
    if (fields.size() < kFixedFields)
        return fail("SUBMIT needs <id> <slot> <bytes> <max_tokens> <temperature> <top_p>; got " +
                    std::to_string(fields.size() - 1) + " field(s)");
    if (out.id == kUnknownId)
        return fail("id '" + printable(fields[1]) + "' is not 1.." +
                    std::to_string(limits.max_id_chars) +
                    " characters of [A-Za-z0-9._:-] (and not 0)");
    Submit submit;
    submit.id = out.id;
    auto slot = parse_u64(fields[2]);
    if (!slot || *slot > limits.max_slot)
        return fail("slot '" + printable(fields[2]) + "' is not an integer in 0.." +
                    std::to_string(limits.max_slot));
    submit.slot = static_cast<std::uint32_t>(*slot);
    if (!out.prompt_bytes)
        return fail("bytes '" + printable(fields[3]) + "' is not an unsigned integer");
    if (*out.prompt_bytes > limits.max_prompt_bytes)
        return fail("prompt is " + std::to_string(*out.prompt_bytes) + " bytes; the limit is " +
                    std::to_string(limits.max_prompt_bytes));
    if (!xbytes)
        return fail("xbytes '" + printable(fields[kFixedFields]) +
                    "' is not an unsigned integer");
    if (*xbytes > limits.max_extension_bytes)
        return fail("extension is " + std::to_string(*xbytes) + " bytes; the limit is " +
                    std::to_string(limits.max_extension_bytes));
    auto max_tokens = parse_u64(fields[4]);
    if (!max_tokens || *max_tokens > limits.max_tokens)
        return fail("max_tokens '" + printable(fields[4]) + "' is not an integer in 0.." +
                    std::to_string(limits.max_tokens));
    submit.max_tokens = *max_tokens;
    auto temperature = parse_finite_double(fields[5]);
    if (!temperature || *temperature < 0.0 || *temperature > limits.max_temperature)
        return fail("temperature '" + printable(fields[5]) + "' is not a number in [0, " +
                    format_double(limits.max_temperature) + "]");
    submit.temperature = *temperature;
    auto top_p = parse_finite_double(fields[6]);
    if (!top_p || *top_p <= 0.0 || *top_p > 1.0)
        return fail("top_p '" + printable(fields[6]) + "' is not a number in (0, 1]");
    submit.top_p = *top_p;

    std::set<std::string, std::less<>> seen;
    for (std::size_t i = has_xbytes ? kFixedFields + 1 : kFixedFields; i < fields.size(); ++i) {
        if (!is_extension_key(fields[i]))
            return fail("unexpected field '" + printable(fields[i]) +
                        "' (extensions are key=value)");
        if (auto why = apply_key(fields[i], limits, submit.options, out.grammar_bytes, seen); !why.empty())
            return fail(why);
    }
    if (out.grammar_bytes > *xbytes)
        return fail("key grammar: " + std::to_string(out.grammar_bytes) + " bytes, more than the extension's " +
                    std::to_string(*xbytes));
    if (submit.max_tokens == 0 && submit.options.logprobs == 0)
        return fail("max_tokens 0 is only allowed with logprobs=K (score the prompt)");
    if (submit.options.logprobs != 0 && submit.options.data_logprobs != 0)
        return fail("logprobs and data_logprobs exclude each other (data_logprobs is logprobs without ECHO)");
    out.request = std::move(submit);
    return out;
}

std::string format_submit_header(const Submit& s) {
    std::string line = "SUBMIT " + s.id + " " + std::to_string(s.slot) + " " +
                       std::to_string(s.prompt.size()) + " " + std::to_string(s.max_tokens) +
                       " " + format_double(s.temperature) + " " + format_double(s.top_p);
    const SubmitOptions& o = s.options;
    // Field 7 is written whenever keys follow, as colibri-era engines require.
    if (!s.extension.empty() || !s.grammar.empty() || !o.is_default())
        line += " " + std::to_string(s.extension.size() + s.grammar.size());
    if (o.seed) line += " seed=" + std::to_string(*o.seed);
    if (o.top_k != 0) line += " top_k=" + std::to_string(o.top_k);
    if (o.repetition_penalty != 1.0)
        line += " repetition_penalty=" + format_double(o.repetition_penalty);
    if (o.ids) line += " ids=1";
    if (o.logprobs != 0) line += " logprobs=" + std::to_string(o.logprobs);
    if (o.data_logprobs != 0) line += " data_logprobs=" + std::to_string(o.data_logprobs);
    if (o.pin) line += " pin=1";
    if (o.reset) line += " reset=1";
    if (!s.grammar.empty()) line += " grammar=" + std::to_string(s.grammar.size());
    return line;
}

}  // namespace inkling::protocol
