// The one exception of grammar/: a grammar or schema it cannot take, with a message
// naming the construct and where it is (a JSON pointer into the request's schema). The
// scheduler answers it with ERROR BAD_REQUEST; the gateway turns that into an HTTP 400.
#pragma once

#include <stdexcept>
#include <string>

namespace inkling::grammar {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace inkling::grammar
