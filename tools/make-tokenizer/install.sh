#!/usr/bin/env bash
# Installs the pinned npm packages of this tool (tiktoken, see package-lock.json) into
# node_modules/ here. Idempotent: when node_modules matches the lock file it only compares
# two timestamps. Needs node and npm (Debian: nodejs, npm) and, the first time, the npm
# registry.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
stamp="$here/node_modules/.package-lock.json"   # npm writes it on every install
if [[ -f "$stamp" && ! "$here/package-lock.json" -nt "$stamp" && ! "$here/package.json" -nt "$stamp" ]]; then
    exit 0
fi
for tool in node npm; do
    if ! command -v "$tool" >/dev/null; then
        echo "make-tokenizer: '$tool' is not installed (Debian packages: nodejs npm)" >&2
        exit 1
    fi
done
echo "make-tokenizer: npm ci in $here" >&2
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2)
touch "$stamp"
