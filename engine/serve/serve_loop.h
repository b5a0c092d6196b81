// `inkling serve`: the thin adapter between the wire (stdin/stdout, protocol/) and the
// Scheduler. Binary stdio first; READY once the model is loaded, then an info STATS
// frame; between rounds it reads whatever frames have arrived, so STOP and CANCEL take
// effect within one token. EOF or SIGTERM: no new input, in-flight requests finish,
// exit 0.
#pragma once

#include "engine/serve/scheduler.h"

namespace inkling::serve {

// Runs until EOF/SIGTERM and drained. Returns the process exit status.
int serve_stdio(Scheduler& scheduler);

}  // namespace inkling::serve
