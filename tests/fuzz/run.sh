#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time from its seed corpus (tests/fuzz/corpus/).
# A crash leaves its input in the build folder and fails the run.
set -euo pipefail
build="$1"
seconds="${2:-20}"
root="$(cd "$(dirname "$0")" && pwd)"
for target in fuzz-frame-reader fuzz-submit-header fuzz-wav fuzz-openai-request; do
    corpus="$build/corpus-$target"
    mkdir -p "$corpus"
    seeds="$root/corpus/${target#fuzz-}"
    echo "== $target for ${seconds}s"
    "$build/$target" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="$build/$target-" "$corpus" "$seeds" 2>&1 | tail -5
done
echo "fuzz: no crashes"
