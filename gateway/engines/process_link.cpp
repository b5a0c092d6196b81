#include "gateway/engines/process_link.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <deque>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>

#include "gateway/asio.h"
#include "platform/child_stdio.h"

namespace inkling::gateway {

namespace bp = boost::process;
using Clock = std::chrono::steady_clock;

struct ProcessLink::Child {
    Child(asio::io_context& io, const std::vector<std::string>& argv)
        : in(io), out(io), err(io), wake_writer(io.get_executor()), stderr_closed(io.get_executor()) {
        std::vector<std::string> args(argv.begin() + 1, argv.end());
        // The engine gets its own process group: a Ctrl-C at the gateway's terminal drains
        // through the gateway (which then closes the engine's stdin) instead of killing it.
        // It inherits stdin, stdout and stderr only (Asio's sockets are not close-on-exec:
        // the listening one kept the port bound after the gateway died).
        process = bp::child(bp::exe = argv[0], bp::args = args, bp::std_in < in, bp::std_out > out, bp::std_err > err,
                            bp::extend::on_exec_setup = [](auto&) {
                                ::setpgid(0, 0);
                                platform::close_on_exec_beyond_stdio();
                            });
        pid = static_cast<long>(process.id());
    }
    bp::async_pipe in, out, err;
    bp::child process;
    long pid = 0;
    std::deque<std::string> outbox;  // encoded frames waiting for the pipe
    Signal wake_writer;
    Signal stderr_closed;  // stderr_done became true
    bool stderr_done = false, dead = false, reported = false;
    bool close_requested = false;  // EOF once the outbox is empty
};

namespace {

awaitable<void> write_loop(std::shared_ptr<ProcessLink::Child> child);

}  // namespace

ProcessLink::ProcessLink(asio::io_context& io, std::vector<std::string> argv, Reports reports)
    : io_(io), argv_(std::move(argv)), reports_(std::move(reports)) {}

ProcessLink::~ProcessLink() {
    if (child_ && !child_->dead && child_->process.valid() && child_->process.running()) {
        std::error_code ec;
        child_->process.terminate(ec);
    }
}

bool ProcessLink::spawn(std::string& error) {
    std::shared_ptr<Child> child;
    try {
        child = std::make_shared<Child>(io_, argv_);
    } catch (const std::exception& e) {
        error = e.what();
        return false;
    }
    child_ = child;

    // stdout until EOF, then the exit: reaped, its stderr read to the end (bounded).
    asio::co_spawn(io_, [this, child]() -> awaitable<void> {
        std::array<char, 65536> buf;
        while (true) {
            boost::system::error_code ec;
            const std::size_t n = co_await child->out.async_read_some(asio::buffer(buf), asio::redirect_error(use_awaitable, ec));
            if (ec || n == 0) break;
            reports_.output(std::string_view(buf.data(), n));
        }
        child->dead = true;
        child->wake_writer.notify();
        std::error_code ec;
        child->process.wait(ec);
        const auto words_deadline = Clock::now() + std::chrono::seconds(2);
        while (!child->stderr_done && Clock::now() < words_deadline) co_await child->stderr_closed.wait(words_deadline);
        const int native = child->process.native_exit_code();
        child->reported = true;
        reports_.exit(WIFSIGNALED(native) ? EngineExit{true, WTERMSIG(native)} : EngineExit{false, child->process.exit_code()});
    }, asio::detached);

    asio::co_spawn(io_, [this, child]() -> awaitable<void> {
        std::array<char, 16384> buf;
        while (true) {
            boost::system::error_code ec;
            const std::size_t n = co_await child->err.async_read_some(asio::buffer(buf), asio::redirect_error(use_awaitable, ec));
            if (ec || n == 0) break;
            // A grandchild's words after this engine's exit was reported are not its own.
            if (!child->reported) reports_.errors(std::string_view(buf.data(), n));
        }
        child->stderr_done = true;
        child->stderr_closed.notify();
    }, asio::detached);

    asio::co_spawn(io_, write_loop(child), asio::detached);
    return true;
}

namespace {

awaitable<void> write_loop(std::shared_ptr<ProcessLink::Child> child) {
    while (!child->dead) {
        if (child->outbox.empty()) {
            if (child->close_requested) {
                boost::system::error_code ec;
                child->in.close(ec);
                co_return;
            }
            co_await child->wake_writer.wait();
            continue;
        }
        std::string bytes = std::move(child->outbox.front());
        child->outbox.pop_front();
        boost::system::error_code ec;
        co_await asio::async_write(child->in, asio::buffer(bytes), asio::redirect_error(use_awaitable, ec));
        if (ec) break;  // the reader sees the death and reports it
    }
}

}  // namespace

void ProcessLink::write(std::string bytes) {
    if (!child_ || child_->dead || child_->close_requested || !child_->in.is_open()) return;
    child_->outbox.push_back(std::move(bytes));
    child_->wake_writer.notify();
}

void ProcessLink::close_input() {
    if (!child_) return;
    child_->close_requested = true;  // the writer sends what is queued, then EOF
    child_->wake_writer.notify();
}

void ProcessLink::kill() {
    if (child_ && !child_->dead) ::kill(static_cast<pid_t>(child_->pid), SIGKILL);
}

long ProcessLink::pid() const { return child_ ? child_->pid : 0; }

}  // namespace inkling::gateway
