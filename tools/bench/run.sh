#!/usr/bin/env bash
# `make bench`: prefill and decode speed of the engine on a tiny and a mid-size synthetic
# model (D=1024, 12 layers, 32 experts, bf16), each against the memory bandwidth the
# same binary measures in the same run. Prints one summary line per model and leaves
# the JSON in BUILD/bench/*.json.
set -euo pipefail
build="${1:-build}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$build/bench"
mkdir -p "$out"
"$root/tools/make-tiny/ensure.sh" "$build/fixtures"
mid="$out/mid"
if [[ ! -f "$mid/.stamp" || "$root/tools/make-tiny/make_tiny.py" -nt "$mid/.stamp" ]]; then
    echo "bench: writing the mid-size model (about 1.3 GB, once)"
    /usr/bin/python3 "$root/tools/make-tiny/make_tiny.py" "$mid" --geometry mid --layout release --dtype bf16
    touch "$mid/.stamp"
fi
for model in "$build/fixtures/base-release-bf16" "$mid"; do
    name="$(basename "$model")"
    extra=()
    if [[ "$name" == mid ]]; then extra=(--sessions 1,2,4,8 --reuse-tokens 2000); fi
    "$build/inkling" bench --model "$model" --prompt-tokens 128 --decode-tokens 32 "${extra[@]}" >"$out/$name.json"
done
# Gateway overhead against talking to the engine directly (demo model).
"$root/tools/make-tiny/ensure_demo.sh" "$build"
python3 "$root/tools/bench/gateway_bench.py" "$build" "$build/demo-model" 200 >"$out/gateway.json"
