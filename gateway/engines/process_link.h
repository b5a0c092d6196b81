// The gateway's EngineLink: `inkling serve` as a child process on three pipes (Boost.Process
// on the gateway's io_context). Its stdout and stderr bytes and its exit go to the Reports
// in order; the exit comes once per child, after its stdout ended and its stderr did (or
// 2 s passed: a grandchild may hold the pipe open).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/engines/engine_link.h"

namespace boost::asio {
class io_context;
}

namespace inkling::gateway {

class ProcessLink : public EngineLink {
public:
    struct Reports {
        std::function<void(std::string_view)> output, errors;
        std::function<void(EngineExit)> exit;
    };
    ProcessLink(boost::asio::io_context& io, std::vector<std::string> argv, Reports reports);
    ~ProcessLink() override;  // terminates a child still running

    bool spawn(std::string& error) override;
    void write(std::string bytes) override;
    void close_input() override;
    void kill() override;
    long pid() const override;

    struct Child;  // one started engine (process_link.cpp)

private:
    boost::asio::io_context& io_;
    std::vector<std::string> argv_;
    Reports reports_;
    std::shared_ptr<Child> child_;  // the latest one
};

}  // namespace inkling::gateway
