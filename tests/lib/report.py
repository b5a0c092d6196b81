"""PASS/FAIL reporting. tests/run_all.sh counts the lines that start with "PASS " and "FAIL "
and treats a non-zero exit without a FAIL line as one failure.

    checks = Checks("gateway e2e")
    checks.report("a request succeeds", status == 200, (status, body[:200]))
    sys.exit(checks.finish())       # "gateway e2e: 7 passed, 0 failed"; 1 when any failed
"""
# A failure's explanation keeps its last characters: logs and bodies end with the news.
WHY_LIMIT = 2000


class Checks:
    def __init__(self, suite):
        self.suite = suite
        self.passed = 0
        self.failed = 0

    def report(self, name, ok, why=""):
        """One line: `PASS name`, or `FAIL name: why` (why only when given). Returns ok."""
        ok = bool(ok)
        line = ("PASS " if ok else "FAIL ") + name
        if not ok and why is not None and why != "":
            line += ": " + str(why)[-WHY_LIMIT:]
        print(line, flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        return ok

    def finish(self):
        """Prints the closing count (not a PASS/FAIL line); returns the exit status."""
        print(f"{self.suite}: {self.passed} passed, {self.failed} failed", flush=True)
        return 1 if self.failed else 0
