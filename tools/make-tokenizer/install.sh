#!/usr/bin/env bash
# Installs this tool's pinned npm packages (tiktoken, see package-lock.json).
exec "$(cd "$(dirname "$0")/../deps" && pwd)/npm_ci.sh" "$(dirname "$0")"
