"""The processes the suites start: an engine behind its pipes (READY read), a gateway on a free
port waited for until GET /health answers 200, and raw HTTP reads on a socket.

    eng = Engine([os.path.join(BUILD, "inkling"), "serve", "--model", MODEL, "--slots", "1"])
    eng.send(wire.submit("r1", 0, b"1 2 3", 4, ids=1))
    while eng.frame().kind not in ("DONE", "ERROR"): ...
    eng.close()

    g = Gateway([os.path.join(BUILD, "inkling-gateway"), "--model", MODEL])   # --port is added
    status, body, headers = g.request("GET", "/v1/models")
    g.stop()

Each process logs to its own temporary file (stderr for an engine, stdout and stderr for a
gateway), removed when it is stopped; errors quote the log's end.

Every blocking call has a deadline: an engine that sends no READY, no next frame, or reads
no stdin within it is killed (that ends the blocked read or write) and TimeoutError says so.
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time

from lib import wire


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Logged:
    """A child process whose output goes to a temporary file read by name (so the child's
    writes and our reads never share a file offset)."""

    def _start(self, argv, prefix, stdout, **popen):
        """stdout: a Popen stdout, or "log" for the log file (with stderr)."""
        fd, self.log_path = tempfile.mkstemp(prefix=prefix, suffix=".log")
        with os.fdopen(fd, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log if stdout == "log" else stdout, stderr=log, **popen)

    def log_tail(self, n=2000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def _kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._remove_log()

    def _remove_log(self):
        try:
            os.unlink(self.log_path)
        except OSError:
            pass


class _Deadline:
    """Kills `proc` unless the block ends within `seconds`: a blocked pipe read then sees
    EOF, a blocked write EPIPE, and the block's exception becomes TimeoutError(`what`)."""

    def __init__(self, engine, seconds, what):
        self.engine, self.seconds, self.what = engine, seconds, what
        self.expired = False

    def _expire(self):
        self.expired = True
        if self.engine.proc.poll() is None:
            self.engine.proc.kill()

    def __enter__(self):
        self.timer = threading.Timer(self.seconds, self._expire)
        self.timer.daemon = True
        self.timer.start()
        return self

    def __exit__(self, kind, value, tb):
        self.timer.cancel()
        if self.expired:
            raise TimeoutError(f"{' '.join(self.engine.argv[:3])}: {self.what} within {self.seconds} s "
                               f"(killed it); stderr: {self.engine.log_tail()}") from None
        return False


class Engine(_Logged):
    """An engine (`inkling serve …`, `echo-engine`) driven over its stdin/stdout. The
    constructor returns once READY has been read (PROTOCOL.md §4); the STATS info frame that
    follows is the first frame() (engines send it; a peer need not). `timeout`: the
    deadline in seconds of each blocking call (READY, a frame, a write)."""

    def __init__(self, argv, env=None, timeout=120):
        self.argv = list(argv)
        self.timeout = timeout
        self._start(self.argv, "engine-", stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        try:
            with _Deadline(self, timeout, "no READY"):
                wire.read_ready(self.proc.stdout)
        except (wire.WireError, TimeoutError) as e:
            why = str(e) if isinstance(e, TimeoutError) else f"{' '.join(self.argv)}: {e}; stderr: {self.log_tail()}"
            self._kill()
            raise RuntimeError(why) from None

    def send(self, data):
        with _Deadline(self, self.timeout, f"stdin not read ({len(data)} bytes to write)"):
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def submit(self, rid, slot, prompt, max_tokens, **kw):
        self.send(wire.submit(rid, slot, prompt, max_tokens, **kw))

    def frame(self, timeout=None):
        """The next frame (wire.read_frame) within `timeout` s (the engine's deadline unless
        given); at EOF the error quotes the engine's stderr."""
        try:
            with _Deadline(self, timeout or self.timeout, "no frame"):
                return wire.read_frame(self.proc.stdout)
        except EOFError as e:
            raise EOFError(f"{e}; stderr: {self.log_tail()}") from None

    def close(self, timeout=60):
        """EOF on stdin: the engine finishes what is in flight and exits (§11)."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=timeout)
        finally:
            self._kill()
            self.proc.stdout.close()
        return self.proc.returncode


class Gateway(_Logged):
    """A gateway (`inkling-gateway …`, `coli serve …`) on a free port: `argv` without --port.
    The constructor waits until GET /health answers 200 (wait=False: it returns at once).
    `key`, when set, is sent as a Bearer token by request(); `env`, when given, is the
    gateway's whole environment."""

    def __init__(self, argv, key=None, ready_timeout=60, wait=True, env=None):
        self.port = free_port()
        self.key = key
        self.argv = list(argv) + ["--port", str(self.port)]
        self._start(self.argv, "gateway-", stdout="log", env=env)
        if wait:
            try:
                self.wait_ready(ready_timeout)
            except RuntimeError:
                self._kill()
                raise

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the gateway exited with status {self.proc.returncode} before /health "
                                   f"answered 200; log: {self.log_tail()}")
            try:
                if self.request("GET", "/health", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the gateway's /health did not answer 200 within {timeout} s; log: {self.log_tail()}")

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, body bytes, headers dict). A dict body is sent as JSON."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            h = {"Content-Type": "application/json"}
            if self.key:
                h["Authorization"] = "Bearer " + self.key
            h.update(headers or {})
            c.request(method, path, body=json.dumps(body) if isinstance(body, dict) else body, headers=h)
            r = c.getresponse()
            return r.status, r.read(), dict(r.getheaders())
        finally:
            c.close()

    def stop(self, timeout=30):
        """SIGTERM (the gateway drains), then SIGKILL after `timeout` seconds."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self._kill()


def read_until(s, marker, timeout=60):
    """Bytes from socket `s` until `marker` is among them or the peer closes."""
    s.settimeout(timeout)
    data = b""
    while marker not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def read_all(s, timeout=60):
    """Bytes from socket `s` until the peer closes."""
    s.settimeout(timeout)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
