// coli in front of a running gateway: the OpenAI chat API over HTTP with streaming, via
// Boost.Beast. Ctrl-C closes the stream; the gateway then cancels the request.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tools/coli/backend.h"

namespace coli {

struct Url {
    std::string host, port;
};
// "http://host:port" (path ignored); nullopt if it is not one.
std::optional<Url> parse_url(const std::string& text);

class Attached : public Backend {
public:
    // Asks /health (status ok) and /v1/models (the model id), each within `timeout_ms`;
    // nullopt when no ready gateway answers.
    static std::optional<std::string> probe(const Url& url, const std::string& api_key, int timeout_ms);

    Attached(Url url, std::string api_key, std::string model_id);
    std::string describe() const override;
    TurnResult turn(const std::vector<inkling::protocol::tml::Message>& history, const std::vector<Clip>& clips,
                    const TurnSettings& settings, const Output& out, const std::function<bool()>& interrupted) override;
    std::string stats() override;

private:
    Url url_;
    std::string key_, model_;
};

}  // namespace coli
