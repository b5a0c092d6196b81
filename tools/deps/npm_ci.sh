#!/usr/bin/env bash
# npm_ci.sh DIR: installs DIR's pinned npm packages (package-lock.json) into DIR/node_modules.
# Idempotent and fast: when node_modules is at least as new as the lock file it only
# compares timestamps. Needs node and npm (Debian: nodejs, npm) and, the first time, the
# npm registry. Never downloads browsers (the tests use Debian's chromium).
set -euo pipefail
dir="$(cd "${1:?usage: npm_ci.sh DIR}" && pwd)"
stamp="$dir/node_modules/.package-lock.json"   # npm writes it on every install
if [[ -f "$stamp" && ! "$dir/package-lock.json" -nt "$stamp" && ! "$dir/package.json" -nt "$stamp" ]]; then
    exit 0
fi
for tool in node npm; do
    if ! command -v "$tool" >/dev/null; then
        echo "npm_ci: '$tool' is not installed (Debian packages: nodejs npm)" >&2
        exit 1
    fi
done
echo "npm_ci: npm ci in $dir" >&2
(cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >&2)
touch "$stamp"
