"""The engine wire protocol from the client's side, as protocol/PROTOCOL.md (normative) states
it: the READY sentinel (§4), reading engine frames (§2, §6), writing client frames (§5).

    read_ready(proc.stdout)                         # the first 10 bytes, exactly
    proc.stdin.write(submit("r1", 0, b"1 2 3", 4, ids=1))
    f = read_frame(proc.stdout)                     # Frame("ACCEPT", ["ACCEPT", "r1", "3", …], None)
"""
import json
from dataclasses import dataclass

# §4: the engine's first stdout bytes, exactly these 10.
READY = b"\x01\x01READY\x01\x01\n"
# §6: the payload frames and the header field (0 = the kind) that holds the payload length.
PAYLOAD_LENGTH_FIELD = {"DATA": 2, "ECHO": 2, "STATS": 1, "EVENT": 1}


class WireError(Exception):
    """The engine broke the protocol (fail closed, §10)."""


@dataclass
class Frame:
    kind: str
    fields: list       # the header's fields, the kind first
    payload: bytes = None  # DATA, ECHO, STATS, EVENT: the payload without its trailing LF

    def json(self):
        """STATS and EVENT carry one JSON object."""
        return json.loads(self.payload)


def read_ready(stream):
    """Reads the handshake: exactly the 10 bytes of READY, nothing more (the STATS info frame
    that follows is an ordinary frame)."""
    got = stream.read(len(READY))
    if got != READY:
        raise WireError(f"expected the READY sentinel {READY!r}, read {got!r}")


def read_frame(stream):
    """The next engine frame. Blank lines between frames are skipped (§2); header fields are
    separated by runs of spaces. EOFError when the engine's stdout ends (a frame cut short
    included); WireError when a payload is not followed by LF."""
    while True:
        line = stream.readline()
        if not line:
            raise EOFError("the engine closed its stdout")
        if not line.endswith(b"\n"):
            raise EOFError(f"the engine's stdout ended inside a header line: {line[:200]!r}")
        fields = [f for f in line[:-1].decode(errors="replace").split(" ") if f]
        if fields:
            break
    kind = fields[0]
    at = PAYLOAD_LENGTH_FIELD.get(kind)
    if at is None:
        return Frame(kind, fields)
    if len(fields) <= at or not fields[at].isdigit():
        raise WireError(f"{kind} without a payload length: {' '.join(fields)}")
    n = int(fields[at])
    data = stream.read(n + 1)
    if len(data) < n + 1:
        raise EOFError(f"the engine's stdout ended inside a {kind} payload")
    if data[-1:] != b"\n":
        raise WireError(f"a {kind} payload of {n} bytes is not followed by LF")
    return Frame(kind, fields, data[:-1])


def _num(x):
    """A number as the protocol writes it: 1 not 1.0, 0.7, 1e-05."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def submit(rid, slot, prompt, max_tokens, temperature=0, top_p=1, ext=b"", **keys):
    """A SUBMIT frame (§5.1). `prompt` and `ext` are bytes (str prompts are UTF-8 encoded);
    keys are SUBMIT keys (`ids=1`, `reset=1`, `seed=42` …), written in the order given. Field 7
    (the extension's length) is written when there is an extension or a key, as our encoder does."""
    if isinstance(prompt, str):
        prompt = prompt.encode()
    head = f"SUBMIT {rid} {slot} {len(prompt)} {max_tokens} {_num(temperature)} {_num(top_p)}"
    if ext or keys:
        head += f" {len(ext)}" + "".join(f" {k}={int(v) if isinstance(v, bool) else v}" for k, v in keys.items())
    return head.encode() + b"\n" + prompt + ext + b"\n"


def stop(rid):
    return f"STOP {rid}\n".encode()


def cancel(rid):
    return f"CANCEL {rid}\n".encode()


def stats():
    return b"STATS\n"
