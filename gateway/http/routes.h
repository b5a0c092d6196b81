// The handler table's row (Server::Route) and one request being handled (Server::Call):
// shared by the guards (guards.cpp), which look a path up and call its handler, and the
// handlers (routes.cpp, health.cpp). Internal to gateway/http/.
#pragma once

#include <string>
#include <string_view>

#include "gateway/http/connection.h"
#include "gateway/http/server.h"

namespace inkling::gateway {

struct Server::Call {
    Connection& c;
    Request& req;
    const std::string& path;
    const Route& route;
};

struct Server::Route {
    enum Methods : unsigned { kGet = 1, kHead = 2, kPost = 4, kAny = 0 /* the handler decides */ };
    std::string_view path;
    bool prefix;     // every path under `path` (which ends in '/')
    bool needs_key;  // --api-key applies
    unsigned methods;
    const char* method_hint;  // the 405's message
    awaitable<bool> (Server::*handler)(Call&);
    const Dialect* dialect = nullptr;  // generation routes

    bool allows(http::verb v) const {
        return methods == kAny || ((methods & kGet) && v == http::verb::get) || ((methods & kHead) && v == http::verb::head) ||
               ((methods & kPost) && v == http::verb::post);
    }
};

}  // namespace inkling::gateway
