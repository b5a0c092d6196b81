#!/usr/bin/env bash
# `make bench`: the constrained-decoding mask time per schema; prefill and decode speed of
# the engine on a tiny and a mid-size synthetic model (D=1024, 12 layers, 32 experts, bf16), each against the memory bandwidth the
# same binary measures in the same run, the mid one in both numerics (exact, bf16); then a converted model streaming its experts from
# disk through the expert cache; then a model at Inkling-Small's width, each layer's cost and
# the extrapolation to Inkling-Small; the matmul kernels and the sampler alone. Prints one
# summary line per model and leaves the JSON in BUILD/bench/*.json.
set -euo pipefail
build="${1:-build}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$build/bench"
mkdir -p "$out"
# Constrained decoding: the grammar mask over Inkling's 200k-token vocabulary, median and p99
# per test schema against the 1 ms budget (docs/engine.md "Constrained decoding").
"$root/tools/make-tokenizer/ensure.sh" "$build/o200k-inkling"
"$build/grammar-bench" "$build/o200k-inkling/tokenizer.json" >"$out/grammar.json"
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
    # --reuse-tokens: time to first token of a 2,000-token follow-up turn and of a regenerated
    # last turn (from its turn-boundary snapshot), each against a cold prefill in the same run.
    if [[ "$name" == mid ]]; then extra=(--sessions 1,2,4,8 --reuse-tokens 2000); fi
    "$build/inkling" bench --model "$model" --prompt-tokens 128 --decode-tokens 32 "${extra[@]}" >"$out/$name.json"
done
# The mid model again with --numerics bf16 (activations rounded to bf16: transformers' bf16
# mode; AVX-512 BF16's vdpbf16ps where the CPU has it): prefill, decode and the sessions.
"$build/inkling" bench --model "$mid" --numerics bf16 --prompt-tokens 128 --decode-tokens 32 --sessions 1,2,4,8 \
    >"$out/mid-bf16.json"
# The expert cache (docs/engine.md): a model whose int8 experts (2.2 GB in experts.inkx)
# stream from disk, decoded with the cache at about 0 %, 50 % and 100 % hits (cap 1, 4 and
# all 64 experts a layer, nothing pinned), each against a sequential O_DIRECT read of the
# same file measured in the same run.
disk="$out/disk"
if [[ ! -f "$disk/.stamp" || "$root/tools/make-tiny/make_tiny.py" -nt "$disk/.stamp" ]]; then
    echo "bench: writing the disk model (about 4.5 GB bf16, once)"
    /usr/bin/python3 "$root/tools/make-tiny/make_tiny.py" "$disk" --geometry disk --layout hf --dtype bf16
    touch "$disk/.stamp"
fi
if [[ ! -f "$disk-int8/.stamp" || "$disk/.stamp" -nt "$disk-int8/.stamp" ]]; then
    "$build/inkling" convert "$disk" "$disk-int8" --experts int8 --restart >/dev/null
    touch "$disk-int8/.stamp"
fi
for cap in 1 4 64; do
    "$build/inkling" bench --model "$disk-int8" --cap "$cap" --pin-experts 0 --usage-file off --prompt-tokens 32 \
        --decode-tokens 32 >"$out/disk-int8-cap$cap.json"
done
# Inkling-Small's real width (`make-tiny --geometry small`: its layer shapes, 6 of its 42
# layers, 128 of its 256 experts; docs/performance.md): converted with int4 experts (bf16
# dense), every expert resident, then each layer's decode and prefill cost and the
# extrapolation to the 42 layers (tools/bench/small.py). Built once, cached under a key of
# the geometry (make_tiny.py --describe); the 31 GB bf16 source is deleted once converted.
small_desc="$(/usr/bin/python3 "$root/tools/make-tiny/make_tiny.py" --describe --geometry small --layout release --dtype bf16)"
small_key="$(echo "$small_desc" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')"
small_experts="$(echo "$small_desc" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["experts"])')"
small="$out/small-$small_key-int4"
if [[ ! -f "$small/.stamp" ]]; then
    src="$out/small-$small_key-bf16"
    need_gb="$(echo "$small_desc" | /usr/bin/python3 -c 'import json,sys; print(int(json.load(sys.stdin)["weight_bytes"] * 1.45 / 1e9) + 2)')"
    have_gb="$(df -P -BG "$out" | awk 'NR == 2 { sub("G", "", $4); print $4 }')"
    if (( have_gb < need_gb )); then
        echo "bench: the Inkling-Small-width model needs ${need_gb} GB free under $out while it is built (${have_gb} GB there): skipped" >&2
    else
        rm -rf "$out"/small-*   # a cache of another geometry or generator version
        echo "bench: writing the Inkling-Small-width model (31 GB bf16, then 12 GB with int4 experts; once)"
        /usr/bin/python3 "$root/tools/make-tiny/make_tiny.py" "$src" --geometry small --layout release --dtype bf16
        "$build/inkling" convert "$src" "$small" --experts int4 --restart >/dev/null
        rm -rf "$src"
        touch "$small/.stamp"
    fi
fi
if [[ -f "$small/.stamp" ]]; then
    "$build/inkling" bench --model "$small" --cap "$small_experts" --pin-experts 0 --usage-file off \
        --prompt-tokens 512 --decode-tokens 16 >"$out/small.json"
    /usr/bin/python3 "$root/tools/bench/small.py" "$out/small.json" "$small" "$out/small-extrapolation.json"
fi
# The matmul kernels alone, at ggml's benchmark shape ([14336 x 4096]): bf16 (exact
# activations; bf16 activations through FMA and, where the CPU has it, through vdpbf16ps),
# int8 and int4 weights at one activation row over 1 GiB of distinct matrices (GB/s, and its
# ratio to the pinned AVX-512 read loop measured in the same run) and at 64 and 512 rows
# (GFLOP/s), ggml's figures (docs/performance.md, "ggml for orientation") beside them; and
# each at one row on one core over weights held in its L2 (the kernel's own ceiling, against
# one core's share of the read loop).
"$build/inkling" bench --kernels --kernel-mb 1024 >"$out/kernels.json"
# The sampler alone on a 201,024-entry vocabulary (greedy, temperature, top-p, top-k): ms a
# token, which every decoded token adds on the engine's thread.
"$build/inkling" bench --sampling >"$out/sampling.json"
# Gateway overhead against talking to the engine directly (demo model).
"$root/tools/make-tiny/ensure_demo.sh" "$build"
python3 "$root/tools/bench/gateway_bench.py" "$build" "$build/demo-model" 200 >"$out/gateway.json"
# What nginx adds in front of a gateway (docs/scale-out.md; the sample nginx-inkling.conf), when
# Debian's nginx is installed.
if command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]]; then
    python3 "$root/tools/bench/nginx_latency.py" "$build" 1000 >"$out/nginx.json"
fi
