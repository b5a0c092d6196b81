#!/usr/bin/env bash
# tokenizer_parity.sh [BUILD]: the engine tokenizer against tiktoken (node) on a seeded set
# of ≥ 5,000 strings, for the generated Inkling tokenizer.json both without merges
# (rank-BPE) and with merges. Prints PASS/FAIL lines and a summary; exit 0 when all pass.
# Needs BUILD/tokenize-cli, node, and the npm packages of tools/make-tokenizer (installed
# here by its install.sh; the registry is only needed the first time).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
cli="$build/tokenize-cli"
if [[ ! -x "$cli" ]]; then
    echo "FAIL tokenizer parity: $cli is missing (cmake --build $build --target tokenize-cli)"
    exit 1
fi
gen="$root/tools/make-tokenizer"
"$gen/ensure.sh" "$build/o200k-inkling"
merges="$build/o200k-inkling-merges/tokenizer.json"
if [[ ! -f "$merges" || "$gen/make_tokenizer.mjs" -nt "$merges" || "$gen/package-lock.json" -nt "$merges" ]]; then
    mkdir -p "$(dirname "$merges")"
    node "$gen/make_tokenizer.mjs" "$merges" --merges
fi
exec node "$root/tests/engine/tokenizer_parity.mjs" --cli "$cli" \
    --tokenizer "$build/o200k-inkling/tokenizer.json" --tokenizer "$merges"
