#!/usr/bin/python3
"""docs/deployment.md's recipes are valid, and the gateway exits as the page says.

  deployment_docs_test.py BUILD_DIR

- Every fenced block whose info string is `LANG deployment:NAME` is extracted. The systemd
  units pass `systemd-analyze verify` (with ExecStart pointed at this build's gateway, the
  one path verify checks; SKIP where systemd-analyze is missing) and restart on failure but
  not on exit status 2; the Kubernetes YAML parses (PyYAML) into a Deployment and a
  Service whose startup, readiness and liveness probes all GET /health on the container's
  port with Host: localhost, the startup probe allowing at least 10 minutes of loading and
  the liveness probe longer than the readiness one, with one GPU a replica.
- The gateway's exit statuses in the page's table: 2 for an unknown flag and for ports
  outside 0..65535, 1 for a value out of range, a missing model directory, a port in use
  and a non-loopback --host without a key. Each run has a generous deadline (a gateway that does not exit
  fails the check); nothing depends on timing.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "deployment.md")
DEADLINE_S = 60

failures = 0


def report(name, ok, detail=""):
    global failures
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail and not ok else ""))
    failures += 0 if ok else 1


def blocks():
    """{NAME: text} of the page's ```LANG deployment:NAME blocks."""
    text = open(DOC, encoding="utf-8").read()
    return {m.group(1): m.group(2) for m in re.finditer(r"^```\w+ deployment:(\S+)\n(.*?)^```$", text, re.M | re.S)}


def unit_settings(text):
    """[(section, key, value)] of a unit file, continuation lines joined."""
    out, section = [], None
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        k, _, v = line.partition("=")
        out.append((section, k.strip(), v.strip()))
    return out


def check_unit(name, text, gateway):
    s = unit_settings(text)
    get = {(sec, k): v for sec, k, v in s}
    report(f"{name}: Restart=on-failure, not for exit 2, KillMode=mixed",
           get.get(("Service", "Restart")) == "on-failure" and get.get(("Service", "RestartPreventExitStatus")) == "2"
           and get.get(("Service", "KillMode")) == "mixed", str(get))
    exec_start = get.get(("Service", "ExecStart"), "")
    report(f"{name}: ExecStart runs inkling-gateway", exec_start.split()[0].endswith("/inkling-gateway"), exec_start)
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        print(f"SKIP {name}: systemd-analyze verify (not installed)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        # verify checks that ExecStart's binary exists: point it at this build's gateway.
        unit_name = name.replace("@.", "@0.")
        path = os.path.join(tmp, unit_name)
        with open(path, "w") as f:
            f.write(text.replace(exec_start.split()[0], os.path.abspath(gateway)))
        r = subprocess.run([analyze, "verify", "--man=no", path], capture_output=True, text=True, timeout=DEADLINE_S)
        # Only lines about our unit count: verify also reports on units of the machine
        # that ours names (network-online.target, multi-user.target) in containers.
        ours = [line for line in (r.stdout + r.stderr).splitlines() if unit_name in line]
        report(f"{name}: systemd-analyze verify", r.returncode == 0 and not ours,
               f"rc {r.returncode}: {(r.stdout + r.stderr)[-600:]}")


def probe_ok(p, port_name):
    get = p.get("httpGet", {})
    headers = {h["name"]: h["value"] for h in get.get("httpHeaders", [])}
    return get.get("path") == "/health" and get.get("port") == port_name and headers.get("Host") == "localhost"


def check_kubernetes(text):
    docs = [d for d in yaml.safe_load_all(text) if d]
    kinds = {d["kind"]: d for d in docs}
    report("kubernetes.yaml: a Deployment and a Service", set(kinds) == {"Deployment", "Service"}, str(list(kinds)))
    if set(kinds) != {"Deployment", "Service"}:
        return
    dep, svc = kinds["Deployment"], kinds["Service"]
    c = dep["spec"]["template"]["spec"]["containers"][0]
    port_name = c["ports"][0]["name"]
    probes = {k: c.get(k, {}) for k in ("startupProbe", "readinessProbe", "livenessProbe")}
    report("kubernetes.yaml: startup, readiness and liveness GET /health with Host: localhost",
           all(probe_ok(p, port_name) for p in probes.values()), str(probes))
    span = {k: p.get("periodSeconds", 10) * p.get("failureThreshold", 3) for k, p in probes.items()}
    report("kubernetes.yaml: loading may take 10 minutes before anything kills the pod; liveness outlasts readiness",
           span["startupProbe"] >= 600 and span["livenessProbe"] > span["readinessProbe"]
           and probes["readinessProbe"].get("failureThreshold") == 1, str(span))
    report("kubernetes.yaml: one GPU a replica", str(c["resources"]["limits"].get("nvidia.com/gpu")) == "1",
           str(c["resources"]))
    report("kubernetes.yaml: the Service targets the pods' port",
           svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
           and svc["spec"]["ports"][0]["targetPort"] == port_name, str(svc["spec"]))
    args = c["args"]
    report("kubernetes.yaml: --host 0.0.0.0 with the key from a Secret, the Service's names allowed",
           "--host=0.0.0.0" in args and any(e["name"] == "INKLING_API_KEY" and "secretKeyRef" in e["valueFrom"]
                                              for e in c["env"])
           and f"--allowed-host={svc['metadata']['name']}" in args, str(args))


def exit_status(gateway, args, env=None):
    r = subprocess.run([gateway] + args, capture_output=True, text=True, timeout=DEADLINE_S, env=env)
    return r.returncode, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""


def check_exits(build):
    gateway = os.path.join(build, "inkling-gateway")
    model = os.path.join(ROOT, "models", "inkling-demo")
    env = {k: v for k, v in os.environ.items() if k != "INKLING_API_KEY"}
    for args, want, what in [
        (["--model", model, "--no-such-flag"], 2, "an unknown flag"),
        (["--model", model, "--port", "99999"], 2, "--port 99999"),
        (["--model", model, "--port", "-1"], 2, "--port -1"),
        (["--model", model, "--port", "80x"], 2, "--port 80x"),
        (["--model", model, "--slots", "0"], 1, "--slots 0"),
        (["--model", "/nonexistent/inkling-model"], 1, "a missing model directory"),
        (["--model", model, "--host", "0.0.0.0", "--port", "0"], 1, "a non-loopback --host without a key"),
    ]:
        rc, last = exit_status(gateway, args, env)
        report(f"gateway exits {want} on {what} ({last})", rc == want, f"exit {rc}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc, last = exit_status(gateway, ["--model", model, "--port", str(port)], env)
        report(f"gateway exits 1 on a port in use ({last})", rc == 1, f"exit {rc}")


def main(build):
    b = blocks()
    want = {"inkling-gateway.service", "inkling-gateway@.service", "kubernetes.yaml"}
    report("docs/deployment.md has the unit, the template unit and the Kubernetes YAML", set(b) == want,
           str(sorted(b)))
    gateway = os.path.join(build, "inkling-gateway")
    for name in sorted(b):
        if name.endswith(".service"):
            check_unit(name, b[name], gateway)
    if "kubernetes.yaml" in b:
        check_kubernetes(b["kubernetes.yaml"])
    check_exits(build)
    print(f"{'FAIL' if failures else 'OK'}: {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build"))
