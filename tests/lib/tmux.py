"""A terminal program under tmux, for the interactive tests (coli's line editing, Ctrl-C,
Ctrl-D): keys in, the screen out, waits on what the screen shows (never on time alone).

    with Pane("coli chat --no-attach", width=160) as p:
        p.wait_for(r"you>")
        p.keys("Hello", "Enter")
        text = p.wait_for(r"tokens, .*\\]")       # None after the deadline
        p.keys("C-d")

The command runs in `sh -c 'trap : INT; …; echo "[exit $?]"; sleep 600'`, so its exit status
stays on the screen (exit_status()) until the session is killed.
"""
import os
import re
import shlex
import subprocess
import time


def _tmux(*args):
    return subprocess.run(["tmux", *args], capture_output=True, text=True)


class Pane:
    def __init__(self, command, width=160, height=50):
        self.name = f"inkling-test-{os.getpid()}-{id(self)}"
        # The shell traps SIGINT (Ctrl-C reaches the whole foreground group) so that it lives
        # on to print the status; a trap, unlike an ignore, is not inherited by the command.
        wrapped = f"trap : INT; {command}; echo \"[exit $?]\"; sleep 600"
        r = _tmux("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
                  "sh -c " + shlex.quote(wrapped))
        if r.returncode != 0:
            raise RuntimeError(f"tmux new-session failed: {r.stderr.strip()}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        _tmux("kill-session", "-t", self.name)

    def keys(self, *keys):
        _tmux("send-keys", "-t", self.name, *keys)

    def text(self, history=2000):
        return _tmux("capture-pane", "-p", "-J", "-t", self.name, "-S", f"-{history}").stdout

    def wait_for(self, pattern, seconds=60, after=""):
        """The screen once `pattern` matches what follows the last `after` on it (the whole
        screen when empty); None when the deadline passes first."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            text = self.text()
            tail = text.rsplit(after, 1)[-1] if after else text
            if (after == "" or after in text) and re.search(pattern, tail):
                return text
            time.sleep(0.05)
        return None

    def exit_status(self, seconds=60):
        """The command's exit status once it has ended, else None after the deadline."""
        text = self.wait_for(r"\[exit \d+\]", seconds)
        return int(re.findall(r"\[exit (\d+)\]", text)[-1]) if text else None
