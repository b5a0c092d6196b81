"""One request through an engine (lib.servers.Engine) to its end, with what came with it.

    r = run_request(eng, "a", 0, "3 1 4 1 5", 12, ids=1)
    r.tokens   ["17", "402", …]   the DATA payloads (ids=1: the token ids), in order
    r.end      the DONE or ERROR frame
    r.events   EVENT payloads seen on the way (JSON)
    r.stats    STATS payloads seen on the way, and the one sent right after DONE (JSON)

Frames of other requests are skipped. The engine's STATS after DONE (PROTOCOL.md §6.7)
is read too, so the last entry of `stats` holds the figures after the request.
"""
from dataclasses import dataclass, field


@dataclass
class Result:
    tokens: list = field(default_factory=list)
    end: object = None
    events: list = field(default_factory=list)
    stats: list = field(default_factory=list)

    @property
    def done(self):
        return self.end is not None and self.end.kind == "DONE"

    @property
    def error_code(self):
        """The ERROR's code (BAD_REQUEST, INTERNAL …), or None after a DONE."""
        return self.end.fields[2] if self.end is not None and self.end.kind == "ERROR" else None

    def last_stats(self):
        return self.stats[-1] if self.stats else {}


def run_request(eng, rid, slot, prompt, n, **keys):
    eng.submit(rid, slot, prompt, n, **keys)
    r = Result()
    while r.end is None:
        f = eng.frame()
        if f.kind == "EVENT":
            r.events.append(f.json())
        elif f.kind == "STATS":
            r.stats.append(f.json())
        elif len(f.fields) > 1 and f.fields[1] == rid:
            if f.kind == "DATA":
                r.tokens.append(f.payload.decode(errors="replace").strip())
            elif f.kind in ("DONE", "ERROR"):
                r.end = f
    if r.done:
        f = eng.frame()
        if f.kind == "STATS":
            r.stats.append(f.json())
    return r
