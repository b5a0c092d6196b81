#!/usr/bin/env bash
# Installs the pinned npm packages of the gateway tests (the official openai client and
# playwright-core, see package-lock.json) into node_modules/ here. Idempotent and fast: when
# node_modules is at least as new as the lock file it only compares timestamps. Needs node and
# npm (Debian: nodejs npm) and, the first time, the npm registry. The browser is Debian's
# chromium (/usr/bin/chromium); playwright-core never downloads one.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
stamp="$here/node_modules/.package-lock.json"   # npm writes it on every install
if [[ -f "$stamp" && ! "$here/package-lock.json" -nt "$stamp" && ! "$here/package.json" -nt "$stamp" ]]; then
    exit 0
fi
for tool in node npm; do
    if ! command -v "$tool" >/dev/null; then
        echo "gateway-tests: '$tool' is not installed (Debian packages: nodejs npm)" >&2
        exit 1
    fi
done
echo "gateway-tests: npm ci in $here" >&2
(cd "$here" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >&2)
touch "$stamp"
