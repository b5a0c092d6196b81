// Standard base64 (RFC 4648): coli sends WAV clips this way, the gateway reads them back out
// of a request's JSON (OpenAI's input_audio.data).
//
//   std::string b64 = encode_base64(wav);   // with padding
//   std::string wav = decode_base64(b64);   // padding optional; throws on a bad byte or length
#pragma once

#include <string>
#include <string_view>

namespace inkling::protocol::text {

// The bytes `text` encodes, with or without padding. Throws std::invalid_argument saying
// what is wrong: "bad byte at offset N" or "bad length".
std::string decode_base64(std::string_view text);
// Standard base64 with padding.
std::string encode_base64(std::string_view bytes);

}  // namespace inkling::protocol::text
