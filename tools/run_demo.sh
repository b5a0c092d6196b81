#!/usr/bin/env bash
# `make run`: starts what the project serves today. Until the Inkling engine lands this
# is the protocol demo: the echo engine driven over real pipes, the exchange printed.
set -euo pipefail
build="${1:-build}"
echo "== a SUBMIT to the echo engine over real pipes (frames as they cross the wire)"
"$build/protocol-conformance" -v --scratch "$build" -- "$build/echo-engine" | sed -n '1,12p'
echo "== the full conformance suite against it"
"$build/protocol-conformance" --scratch "$build" -- "$build/echo-engine" | tail -1
