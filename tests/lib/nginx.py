"""nginx in front of gateways, as a user-level process for the tests and benches: its own
prefix, temp and log directories under a temporary folder, no system configuration, one
process (master_process off) on loopback ports.

    n = Nginx(os.path.join(ROOT, "docs", "nginx-inkling.conf"), [g1.port, g2.port, g3.port])
    status, body, headers = n.request("POST", "/v1/chat/completions", {...}, {"x-session-id": "c1"})
    n.stop()

The snippet (docs/nginx-inkling.conf) is used as written, but for its listen port and its
upstream's server lines, replaced by the given ports (each keeping the parameters of the first
server line).
"""
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

from lib.servers import free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def available():
    return os.access(NGINX, os.X_OK)


def version():
    """nginx's version line ("nginx/1.22.1"), which it prints on stderr."""
    p = subprocess.run([NGINX, "-v"], capture_output=True, text=True)
    return (p.stderr or p.stdout).strip().split(": ")[-1]


class Nginx:
    def __init__(self, snippet, upstream_ports, ready_timeout=30):
        self.dir = tempfile.mkdtemp(prefix="nginx-")
        self.port = free_port()
        text = open(snippet).read()
        pattern = re.compile(r"^(\s*)server 127\.0\.0\.1:\d+((?: [^;]*)?);$")
        out, replaced = [], False
        for line in text.splitlines():
            m = pattern.match(line)
            if not m:
                out.append(line)
            elif not replaced:  # the first server line stands for all, with its parameters
                out += [f"{m.group(1)}server 127.0.0.1:{p}{m.group(2)};" for p in upstream_ports]
                replaced = True
        if not replaced:
            raise RuntimeError(f"{snippet}: no 'server 127.0.0.1:PORT …;' line in its upstream")
        text = "\n".join(out) + "\n"
        text, n = re.subn(r"listen 127\.0\.0\.1:\d+;", f"listen 127.0.0.1:{self.port};", text)
        if n != 1:
            raise RuntimeError(f"{snippet}: expected one 'listen 127.0.0.1:PORT;' line")
        with open(os.path.join(self.dir, "inkling.conf"), "w") as f:
            f.write(text)
        d = self.dir
        temp = "\n".join(f"    {k}_temp_path {d}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(f"daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n"
                    f"error_log {d}/error.log warn;\nevents {{ worker_connections 1024; }}\n"
                    f"http {{\n    access_log off;\n{temp}\n    include {d}/inkling.conf;\n}}\n")
        self.log = open(os.path.join(d, "stderr.log"), "ab")
        self.proc = subprocess.Popen([NGINX, "-p", d, "-c", os.path.join(d, "nginx.conf"), "-e", f"{d}/error.log"],
                                     stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.time() + ready_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited with status {self.proc.returncode}: {self.log_tail()}")
            try:
                with socket_to(self.port):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nginx did not listen within {ready_timeout} s: {self.log_tail()}")

    def log_tail(self, n=2000):
        out = ""
        for name in ("stderr.log", "error.log"):
            try:
                with open(os.path.join(self.dir, name), "rb") as f:
                    out += f"[{name}] " + f.read()[-n:].decode(errors="replace")
            except OSError:
                pass
        return out

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, body bytes, headers dict with lower-case names). A dict body is sent as JSON."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            h = {"Content-Type": "application/json"}
            h.update(headers or {})
            c.request(method, path, body=json.dumps(body) if isinstance(body, dict) else body, headers=h)
            r = c.getresponse()
            return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class socket_to:
    """A TCP connection to 127.0.0.1:port, closed at the block's end (raises OSError if refused)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=2)

    def __enter__(self):
        return self.s

    def __exit__(self, *exc):
        self.s.close()
        return False
