// The one error type of the audio path (WAV parsing, resampling, DMel): the input was not
// audio we can encode. what() says what is wrong, naming the field or chunk, so that the
// gateway can pass it on as a 400 and a CLI can print it as is.
#pragma once

#include <stdexcept>

namespace inkling::protocol::audio {

class AudioError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

}  // namespace inkling::protocol::audio
