// coli without a gateway: starts `inkling serve` as a child and speaks the wire protocol
// to it through protocol/ (the same library the gateway uses). Every turn goes to slot 0,
// so the engine reuses the conversation's prefix.
#pragma once

#include <memory>
#include <string>

#include "protocol/engine_process.h"
#include "tools/coli/backend.h"

namespace coli {

class PrivateEngine : public Backend {
public:
    // Starts the engine and waits for READY; throws std::runtime_error with the engine's
    // exit status and last stderr lines when it cannot start.
    PrivateEngine(const std::string& engine_binary, const std::string& model_dir, int ctx);
    ~PrivateEngine() override;
    std::string describe() const override;
    TurnResult turn(const std::vector<inkling::protocol::tml::Message>& history, const std::vector<Clip>& clips,
                    const TurnSettings& settings, const Output& out, const std::function<bool()>& interrupted) override;
    std::string stats() override;

private:
    std::string engine_failure(const std::string& what);
    std::unique_ptr<inkling::protocol::EngineProcess> engine_;
    std::string model_dir_, stderr_path_, info_;
    long next_id_ = 1;
    bool keep_log_ = false;
};

}  // namespace coli
