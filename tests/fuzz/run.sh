#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time from its seed corpus (tests/fuzz/corpus/).
# A crash leaves its input in the build folder and fails the run.
set -euo pipefail
build="$1"
seconds="${2:-20}"
root="$(cd "$(dirname "$0")" && pwd)"
# fuzz-serve loads the tiny audio fixture once (tools/make-tiny).
"$root/../../tools/make-tiny/ensure.sh" "$build/fixtures"
for target in fuzz-frame-reader fuzz-submit-header fuzz-wav fuzz-openai-request fuzz-serve; do
    corpus="$build/corpus-$target"
    mkdir -p "$corpus"
    seeds="$root/corpus/${target#fuzz-}"
    extra=()
    # The engine logs every malformed frame to stderr: closed (libFuzzer's own report and a
    # crash's stack still print), an input taking seconds is a hang.
    if [[ $target == fuzz-serve ]]; then extra=(-close_fd_mask=2 -timeout=30 -dict="$root/serve.dict"); fi
    echo "== $target for ${seconds}s"
    "$build/$target" -max_total_time="$seconds" -print_final_stats=1 "${extra[@]}" \
        -artifact_prefix="$build/$target-" "$corpus" "$seeds" 2>&1 | tail -5
done
echo "fuzz: no crashes"
