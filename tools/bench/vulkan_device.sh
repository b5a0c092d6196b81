#!/usr/bin/env bash
# The Vulkan chain on a real GPU (docs/performance.md, "Vulkan"): run on the GPU machine
# through the device tool, with the engine binary and the Vulkan loader carried in .gl/:
#   mkdir -p .gl && (cd .gl && apt-get download libvulkan1 vulkan-tools libegl1 libglvnd0 libopengl0 \
#                               libgl1 libglx0 libgles2)   # NVIDIA's ICD needs libglvnd
#   strip -o .gl/inkling build/inkling
#   device run (carry .gl): bash tools/bench/vulkan_device.sh .gl/inkling $OUT
# 1. the chain against the CPU on every tiny fixture (tokens and last logits),
# 2. the device's copy bandwidth and the GEMV against it,
# 3. decode and prefill on the mid-size model: CPU only, the chain with the routed experts
#    on the host (--vk-experts off), the chain with every expert resident (the default),
#    prompt steps only; with OLD=path/to/an/older/inkling, that binary's CPU and chain runs
#    beside them (before/after figures from the same minutes),
# 4. the mid model converted to int8 and int4 experts: CPU vs the chain, experts resident,
# 5. Inkling-Small's width (make-tiny's `small` geometry, SMALL_EXPERTS experts a layer, 32 by
#    default: decode reads the same bytes a token whatever the count, 6 routed + 2 shared;
#    docs/performance.md): bf16 dense layers, int4 routed experts through the converter — the
#    CPU vs the chain with the experts on the host vs a tier holding about half of them (its
#    misses with 8 rows or more streamed to the device, and with none: --vk-stream-rows 0) vs
#    every expert resident, and the bf16 model resident.
# STEPS="1 2 3 4 5" picks steps (default 1-4); GEN=dir keeps generated models between calls
# (default /tmp); GEMM_ROWS="8 32" adds mid-model prefill runs through the tiled GEMM.
set -uo pipefail
bin="${1:?engine binary}"
out="${2:-/tmp/vk-out}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$out"
for f in "$root"/.gl/*.deb; do dpkg -x "$f" /; done
ldconfig
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
           /etc/vulkan/icd.d/nvidia_icd.json; do
    [[ -f "$icd" ]] && export VK_DRIVER_FILES="$icd" && break
done
echo "ICD: ${VK_DRIVER_FILES:-none found}"
vulkaninfo --summary 2>/dev/null | grep -E "deviceName|deviceType|apiVersion" | head -3

steps=" ${STEPS:-1 2 3 4} "
gen="${GEN:-/tmp}"
mkdir -p "$gen"
want() { [[ "$steps" == *" $1 "* ]]; }
threads=$(nproc)

if want 1; then
python3 "$root/tools/make-tiny/make_tiny.py" --all /tmp/fx >/dev/null
python3 - "$bin" /tmp/fx <<'PY' | tee "$out/fixtures.txt"
import json, os, subprocess, sys
bin, fx = sys.argv[1], sys.argv[2]
ids = "1,5,9,13,17,21,25,29,33,37,41,45,2,6,10,14,18,22"
for name in sorted(os.listdir(fx)):
    if not os.path.exists(f"{fx}/{name}/config.json"):
        continue
    runs = {}
    for v in ("off", "on"):
        p = subprocess.run([bin, "run", "--model", f"{fx}/{name}", "--ids", ids, "-n", "16", "--json",
                            "--vulkan", v], capture_output=True, text=True)
        if p.returncode:
            print(name, v, "failed:", p.stderr[-300:]); break
        runs[v] = json.loads(p.stdout)
    if len(runs) == 2:
        a, b = runs["off"], runs["on"]
        d = max(abs(x - y) for x, y in zip(a["last_logits"], b["last_logits"]))
        print(f"{name}: tokens equal {a['tokens'] == b['tokens']}, prompt argmax equal "
              f"{a['prompt_argmax'] == b['prompt_argmax']}, max |dlogit| {d:.2e}")
PY
fi

want 2 && "$bin" bench --device-kernels --kernel-mb 1024 >"$out/device_kernels.json"
if want 3 || want 4; then
[[ -f "$gen/mid/config.json" ]] || python3 "$root/tools/make-tiny/make_tiny.py" "$gen/mid" --geometry mid --layout release --dtype bf16 >/dev/null
fi
if want 3; then
[[ -n "${SKIP_CPU:-}" ]] || "$bin" bench --model "$gen/mid" --vulkan off --threads "$threads" --prompt-tokens 256 --decode-tokens 64 >"$out/mid_cpu.json"
"$bin" bench --model "$gen/mid" --vulkan on --vk-experts off --threads "$threads" --prompt-tokens 256 --decode-tokens 64 >"$out/mid_vulkan_host_experts.json"
"$bin" bench --model "$gen/mid" --vulkan on --threads "$threads" --prompt-tokens 256 --decode-tokens 64 >"$out/mid_vulkan.json"
"$bin" bench --model "$gen/mid" --vulkan prompts --threads "$threads" --prompt-tokens 256 --decode-tokens 64 >"$out/mid_prompts.json"
for g in ${GEMM_ROWS:-}; do
    "$bin" bench --model "$gen/mid" --vulkan on --vk-gemm-rows "$g" --threads "$threads" --prompt-tokens 256 --decode-tokens 16 >"$out/mid_vulkan_gemm$g.json"
done
fi
if want 4; then
# 4. the mid model converted (int8 and int4 routed experts): CPU vs the chain with the
#    quantized experts resident (docs/vulkan.md, "Quantized experts"), and the tokens of each.
for fmt in int8 int4; do
    [[ -f "$gen/mid-$fmt/experts.inkx" ]] || "$bin" convert "$gen/mid" "$gen/mid-$fmt" --experts "$fmt" >/dev/null 2>&1
    [[ -n "${SKIP_CPU:-}" ]] || "$bin" bench --model "$gen/mid-$fmt" --vulkan off --threads "$threads" --prompt-tokens 256 --decode-tokens 64 >"$out/mid_${fmt}_cpu.json"
    "$bin" bench --model "$gen/mid-$fmt" --vulkan on --threads "$threads" --prompt-tokens 256 --decode-tokens 64 >"$out/mid_${fmt}_vulkan.json"
    for v in off on; do
        "$bin" run --model "$gen/mid-$fmt" --ids 1,5,9,13,17,21 -n 32 --json --vulkan "$v" >"$out/mid_${fmt}_tokens_$v.json"
    done
done
if [[ -n "${OLD:-}" ]]; then
    "$OLD" bench --model "$gen/mid" --vulkan off --threads "$threads" --prompt-tokens 256 --decode-tokens 64 >"$out/old_mid_cpu.json"
    "$OLD" bench --model "$gen/mid" --vulkan on --threads "$threads" --prompt-tokens 256 --decode-tokens 64 >"$out/old_mid_vulkan.json"
    "$bin" bench --model "$gen/mid" --vulkan off --threads "$threads" --prompt-tokens 256 --decode-tokens 64 >"$out/mid_cpu_again.json"
fi
fi

if want 5; then
e="${SMALL_EXPERTS:-32}"
src="$gen/small-e$e-bf16" int4="$gen/small-e$e-int4"
[[ -f "$src/config.json" ]] || python3 "$root/tools/make-tiny/make_tiny.py" "$src" --geometry small --layout release --dtype bf16 --set "E=$e" >/dev/null
[[ -f "$int4/experts.inkx" ]] || "$bin" convert "$src" "$int4" --experts int4 >/dev/null 2>&1
# A tier of about half the routed experts: the device weights (every matrix but the
# embedding) plus two thirds of the experts' bytes (the chain keeps a quarter of what is free
# after the weights for the sessions and scratch).
tier_mb=$(python3 - "$int4" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
with open(f"{d}/model.safetensors", "rb") as f:
    h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
dense = sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in h.items()
            if k != "__metadata__" and "embed_tokens" not in k)
print(int((dense + os.path.getsize(f"{d}/experts.inkx") * 2 / 3) / 2**20))
PY
)
sb() { local name=$1 model=$2; shift 2
    "$bin" bench --model "$model" --threads "$threads" --cap "$e" --pin-experts 0 --usage-file off \
        --prompt-tokens 512 --decode-tokens 32 "$@" >"$out/small_$name.json" 2>"$out/small_$name.err"; }
sb int4_cpu "$int4" --vulkan off
sb int4_host_experts "$int4" --vulkan on --vk-experts off
sb int4_tier "$int4" --vulkan on --vk-budget-mb "$tier_mb"
sb int4_tier_nostream "$int4" --vulkan on --vk-budget-mb "$tier_mb" --vk-stream-rows 0
sb int4_resident "$int4" --vulkan on
sb bf16_cpu "$src" --vulkan off
sb bf16_resident "$src" --vulkan on
for v in off on; do
    "$bin" run --model "$src" --ids 1,5,9,13,17,21 -n 16 --json --vulkan "$v" >"$out/small_bf16_tokens_$v.json" 2>/dev/null
done
fi
