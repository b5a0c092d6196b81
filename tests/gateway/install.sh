#!/usr/bin/env bash
# Installs the gateway tests' pinned npm packages (the official openai client and
# playwright-core, see package-lock.json); the browser is Debian's /usr/bin/chromium.
exec "$(cd "$(dirname "$0")/../../tools/deps" && pwd)/npm_ci.sh" "$(dirname "$0")"
