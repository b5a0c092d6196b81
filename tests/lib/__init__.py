"""The Python test library: what the Python suites (tests/*/…py) and benches (tools/bench/*.py)
share, written once. Standard library only.

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from lib import Checks, Engine, Gateway, free_port

- lib.report   `Checks`: the PASS/FAIL lines tests/run_all.sh counts, and the exit status
- lib.wire     the engine wire protocol (protocol/PROTOCOL.md): READY, reading frames, SUBMIT …
- lib.servers  an engine behind its pipes, a gateway waited for on a free port, raw HTTP reads
"""
from lib.report import Checks
from lib.servers import Engine, Gateway, free_port, read_all, read_until
from lib.wire import READY, Frame

__all__ = ["Checks", "Engine", "Gateway", "free_port", "read_all", "read_until", "READY", "Frame"]
