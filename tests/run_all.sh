#!/usr/bin/env bash
# Runs every test of a build folder and ends with the plain line
# "N passed, N failed, N skipped", counting test cases (doctest) and checks (conformance
# suites, end-to-end scripts); skipped counts suites that could not run here and the
# checks and test cases that said they skipped. Under CI=true a suite that cannot run is
# a failure: CI is meant to run every suite below.
# Every suite runs under a deadline (SUITE_DEADLINE seconds, 900 unless the call says
# otherwise): past it the suite is killed, counts as failed and its log's last lines are shown.
set -uo pipefail
build="${1:-build}"
root="$(cd "$(dirname "$0")/.." && pwd)"
passed=0
failed=0
skipped=0
log_dir="$build/test-logs"
mkdir -p "$log_dir"

# `timed LIMIT LOG CMD...`: CMD with its output in LOG, killed (its whole process group:
# GNU timeout signals the group it leads) LIMIT seconds on, SIGKILL 30 s after the SIGTERM.
# Returns CMD's status; 124 or 137 when the deadline hit.
timed() {
    local limit="$1" log="$2"
    shift 2
    timeout --kill-after=30 "$limit" "$@" </dev/null >"$log" 2>&1
}
# Says why a suite ran past its deadline: its log's last lines.
deadline_fail() {
    local name="$1" limit="$2" log="$3"
    echo "FAIL $name: killed at its deadline of $limit s; the last lines of $log:"
    tail -20 "$log"
}

# Unit tests: doctest prints "[doctest] test cases: T | P passed | F failed | S skipped".
# `run_unit [NAME CMD...]`: NAME's log and line (default unit-tests), CMD the doctest binary
# and its arguments (default $build/unit-tests; tests/arm64/suites.sh runs it under QEMU).
run_unit() {
    local name="${1:-unit-tests}"
    [[ $# -gt 0 ]] && shift
    local cmd=("$@")
    [[ ${#cmd[@]} -gt 0 ]] || cmd=("$build/unit-tests")
    local log="$log_dir/$name.log" limit="${SUITE_DEADLINE:-900}"
    timed "$limit" "$log" "${cmd[@]}" --no-intro=false
    local rc=$?
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        deadline_fail "$name" "$limit" "$log"
        failed=$((failed + 1))
        return
    fi
    local line
    line="$(grep -E '^\[doctest\] test cases:' "$log" | tail -1)"
    local p f s
    p="$(sed -E 's/.*\| *([0-9]+) passed.*/\1/' <<<"$line")"
    f="$(sed -E 's/.*\| *([0-9]+) failed.*/\1/' <<<"$line")"
    s="$(sed -E 's/.*\| *([0-9]+) skipped.*/\1/' <<<"$line")"
    [[ "$s" =~ ^[0-9]+$ ]] || s=0
    # A run filtered with -tc counts the cases it left out as skipped: none of them is a skip.
    [[ -n "${UNIT_FILTERED:-}" ]] && s=0
    if [[ -z "$line" || ! "$p" =~ ^[0-9]+$ ]]; then
        echo "FAIL $name: no doctest summary (exit $rc); see $log"
        tail -20 "$log"
        failed=$((failed + 1))
        return
    fi
    if [[ $rc -ne 0 && $f -eq 0 ]]; then f=1; fi
    echo "$name: $p passed, $f failed, $s skipped"
    [[ $f -ne 0 ]] && grep -E 'ERROR|FATAL|TEST CASE|CHECK' "$log" | head -60
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
}

# A suite that prints PASS/FAIL lines (and SKIP lines for checks it could not make here).
run_suite() {
    local name="$1" limit="${SUITE_DEADLINE:-900}"
    shift
    local log="$log_dir/$name.log"
    timed "$limit" "$log" "$@"
    local rc=$?
    local p f s
    p="$(grep -c '^PASS ' "$log")"
    f="$(grep -c '^FAIL ' "$log")"
    s="$(grep -c '^SKIP ' "$log")"
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        deadline_fail "$name" "$limit" "$log"
        f=$((f + 1))
    elif [[ $rc -ne 0 && $f -eq 0 ]]; then
        echo "FAIL $name: exit status $rc without a FAIL line; see $log"
        tail -20 "$log"
        f=1
    fi
    echo "$name: $p passed, $f failed, $s skipped"
    [[ $f -ne 0 ]] && grep -A8 '^FAIL ' "$log" | head -80
    [[ $s -ne 0 ]] && grep '^SKIP ' "$log" | head -20
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
}

# A suite that cannot run here: counted as skipped, and as failed under CI=true (CI
# installs everything a suite needs, tools/deps/packages.txt: a skip there is a lost guard).
skip_suite() {
    local name="$1" why="$2"
    if [[ "${CI:-}" == "true" ]]; then
        echo "FAIL $name: cannot run under CI=true: $why"
        failed=$((failed + 1))
    else
        echo "$name: skipped ($why)"
        skipped=$((skipped + 1))
    fi
}

# Generated inputs: the tiny checkpoints (deterministic, numpy) the engine tests load.
if ! timed 900 "$log_dir/fixtures.log" "$root/tools/make-tiny/ensure.sh" "$build/fixtures"; then
    echo "FAIL fixtures: tools/make-tiny/ensure.sh failed; see $log_dir/fixtures.log"
    tail -5 "$log_dir/fixtures.log"
    failed=$((failed + 1))
fi

# The Inkling tokenizer.json built from tiktoken's o200k ranks (npm) plus TMLv0 specials.
if ! timed 900 "$log_dir/make-tokenizer.log" "$root/tools/make-tokenizer/ensure.sh" "$build/o200k-inkling"; then
    echo "FAIL make-tokenizer: see $log_dir/make-tokenizer.log"
    tail -5 "$log_dir/make-tokenizer.log"
    failed=$((failed + 1))
fi
export INKLING_TOKENIZER_JSON="$build/o200k-inkling/tokenizer.json"

run_unit
# The cases that compare the CPU's numerics with the Vulkan chain's (and the ones that pin the
# CPU's own bits per ISA) once more under each ISA this x86 CPU has below its best, chosen by
# INKLING_TEST_ISA (tests/unit_main.cpp): a difference that depends on the ISA then fails on
# whichever machine runs this, not only where the CPU happens to differ.
lower_isas=()
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    lower_isas=(avx2 scalar)
elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    lower_isas=(scalar)
fi
for isa in "${lower_isas[@]}"; do
    UNIT_FILTERED=1 run_unit "unit-tests-isa-$isa" env INKLING_TEST_ISA="$isa" "$build/unit-tests" \
        -tc='vulkan*,backend-ops*,*every ISA*'
done
# Text that stands on its own: no pointer outside the repository, no work session cited by
# number, every relative Markdown link and #anchor reaching its target (about a second).
run_suite docs python3 "$root/tests/docs/docs_test.py" "$root"
# The include graph against the layers: each folder includes only those below it (platform/,
# protocol/, grammar/, then engine/ beside gateway/; coli on protocol/ and platform/ only).
run_suite layering python3 "$root/tests/layering/check_layers.py" "$root"
# docs/configuration.md against the four binaries' declarations and their --help.
run_suite options-doc python3 "$root/tests/options_doc/options_doc_test.py" "$build"
run_suite tokenizer-parity "$root/tests/engine/tokenizer_parity.sh" "$build"
# The committed DMel goldens against a live run of the numpy reference DSP.
run_suite audio-goldens "$root/tools/reference/make_audio_goldens.sh" --check
# The committed goldens against a live run of the PyTorch reference, where torch exists.
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    run_suite reference-goldens /usr/bin/python3 "$root/tools/reference/make_goldens.py" \
        "$build/fixtures" "$root/tests/fixtures/golden" --check
else
    skip_suite reference-goldens "python3-torch is not installed (make deps); the committed goldens still ran"
fi
# The trained demo model (models/inkling-demo): engine vs the reference's golden, and, with
# torch, the golden against a live run of the reference.
run_suite demo-model python3 "$root/tests/engine/demo_model_test.py" "$build"
# make-tiny streams every tensor: same bytes as in memory, bounded memory at Inkling-Small's vocabulary.
run_suite make-tiny-stream /usr/bin/python3 "$root/tests/engine/make_tiny_stream_test.py" "$build"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    run_suite demo-model-reference /usr/bin/python3 "$root/tools/train-tiny/demo_goldens.py" --check
else
    skip_suite demo-model-reference "python3-torch is not installed (make deps); the committed golden still ran"
fi
if timed 900 "$log_dir/demo-model-ensure.log" "$root/tools/make-tiny/ensure_demo.sh" "$build"; then
    run_suite conformance-engine-text "$build/protocol-conformance" --scratch "$log_dir" -- \
        "$build/inkling" serve --model "$build/demo-model" --slots 2 --ctx 512 --threads 2
    # Hostile frames against the real engine: each answered by an ERROR, the engine serves on.
    run_suite engine-serve-e2e python3 "$root/tests/serve/serve_e2e.py" "$build"
    # info, run --prompt/--chat/--effort/--audio, --isa, serve --prefill-chunk against oracles.
    run_suite engine-cli-e2e /usr/bin/python3 "$root/tests/engine/engine_cli_e2e.py" "$build"
    # grammar=N: schema outputs on 50 seeds validate, a forced tool call, refusals (PROTOCOL.md §12.3).
    run_suite constrained-e2e /usr/bin/python3 "$root/tests/grammar/constrained_e2e.py" "$build"
else
    echo "FAIL demo-model: tools/make-tiny/ensure_demo.sh failed; see $log_dir/demo-model-ensure.log"
    failed=$((failed + 1))
fi
run_suite conformance-engine-ids "$build/protocol-conformance" --prompt "1 2 3 4 5" --keys ids=1 \
    --scratch "$log_dir" -- "$build/inkling" serve --model "$build/fixtures/base-hf-f32" --slots 1 --ctx 256 --threads 2
# The same suite against the Vulkan chain (lavapipe), and a device lost mid-request.
run_suite conformance-engine-vulkan "$build/protocol-conformance" --prompt "1 2 3 4 5" --keys ids=1 \
    --scratch "$log_dir" -- "$build/inkling" serve --model "$build/fixtures/base-hf-f32" --slots 1 --ctx 256 \
    --threads 2 --vulkan on
run_suite vulkan-serve python3 "$root/tests/vulkan/serve_device_test.py" "$build"
# serve --load-events: progress EVENTs before READY (what the gateway's start-up deadline resets on).
run_suite engine-load-events python3 "$root/tests/serve/load_events.py" "$build"
# Turn-boundary snapshots (#15 item 7): regenerate/edit/branch reuse the shared prefix exactly.
run_suite engine-turn-reuse python3 "$root/tests/serve/turn_reuse_e2e.py" "$build"
# Integer weights in the lane order (--lane-order): the same NLL and tokens packed or not, mapped or
# copied, and with the experts uploaded to the Vulkan device.
run_suite lane-order /usr/bin/python3 "$root/tests/engine/lane_order_e2e.py" "$build"
# --vulkan auto/prompts, --vk-device/-budget-mb/-layers, the declines, a converted model's
# int8/int4 experts on the device and through the cache.
run_suite vulkan-flags /usr/bin/python3 "$root/tests/vulkan/vulkan_flags_e2e.py" "$build"
# The gateway's /metrics carries the device's STATS figures (#14 item 5).
run_suite vulkan-gateway-metrics /usr/bin/python3 "$root/tests/vulkan/gateway_device_metrics_e2e.py" "$build"
# The web UI's Device card over such a gateway in headless Chromium, against /metrics; the
# CPU's "CPU only"; an older engine's missing figures as "—" (#14 item 5).
if timed 600 "$log_dir/vulkan-gateway-web-ui-npm.log" "$root/tests/gateway/install.sh"; then
    run_suite vulkan-gateway-web-ui node "$root/tests/gateway/web_device.test.mjs" --build "$build"
else
    echo "FAIL vulkan-gateway-web-ui: tests/gateway/install.sh failed; see $log_dir/vulkan-gateway-web-ui-npm.log"
    failed=$((failed + 1))
fi
# inkling convert on every fixture layout, resume after a kill, refusals (docs/convert.md).
run_suite convert-e2e "$root/tests/convert/convert_e2e.sh" "$build"
# tools/audio-sidecar: only the audio tower, from a directory or by HTTP ranges, into a converted model.
run_suite audio-sidecar /usr/bin/python3 "$root/tests/engine/audio_sidecar_test.py" "$build"
# A converted model's expert cache: usage history saves, a CRC error while serving, no O_DIRECT.
run_suite expert-cache-e2e /usr/bin/python3 "$root/tests/experts/expert_cache_e2e.py" "$build"
run_suite gateway-e2e python3 "$root/tests/gateway/gateway_e2e.py" "$build"
run_suite gateway-hostile python3 "$root/tests/gateway/gateway_hostile.py" "$build"
run_suite gateway-supervisor python3 "$root/tests/gateway/supervisor_e2e.py" "$build"
# Seven streaming clients while the engine is kill -9'd every ~7 s, ten times (#20).
run_suite gateway-load-faults python3 "$root/tests/gateway/load_faults_e2e.py" "$build"
# Draining after a device loss: under continuous load, and past --engine-drain-deadline.
run_suite gateway-drain python3 "$root/tests/gateway/drain_e2e.py" "$build"
# docs/gateway.md's promises no other suite pinned: against the scripted engine, then real models.
run_suite gateway-documented python3 "$root/tests/gateway/documented_features.py" "$build"
run_suite gateway-documented-models python3 "$root/tests/gateway/documented_model_features.py" "$build"
# Several models behind one gateway (#17 item 1), and three gateways behind nginx with
# conversation affinity (#17 item 2; docs/scale-out.md).
run_suite gateway-models python3 "$root/tests/gateway/models_e2e.py" "$build"
run_suite gateway-scale-out python3 "$root/tests/gateway/scale_out_e2e.py" "$build"
# Regenerate/edit/branch through HTTP reuse up to the last turn boundary (#15 item 7): cached_tokens.
run_suite gateway-turn-reuse python3 "$root/tests/gateway/turn_reuse_e2e.py" "$build"
# docs/deployment.md: the systemd units verify, the Kubernetes probes, the gateway's exit statuses.
run_suite deployment-docs /usr/bin/python3 "$root/tests/deploy/deployment_docs_test.py" "$build"
# Five node suites with deadlines of their own (tests/gateway/run.sh), up to 32 min in all.
SUITE_DEADLINE=2400 run_suite gateway-clients "$root/tests/gateway/run.sh" "$build"
run_suite coli-e2e python3 "$root/tests/coli/coli_e2e.py" "$build"
# The default model, --system/--effort/--audio on the wire, :help, Ctrl-C/Ctrl-D under tmux.
run_suite coli-features /usr/bin/python3 "$root/tests/coli/coli_features_e2e.py" "$build"
run_suite conformance-echo "$build/protocol-conformance" --scratch "$log_dir" -- "$build/echo-engine"
run_suite conformance-echo-1slot "$build/protocol-conformance" --scratch "$log_dir" -- "$build/echo-engine" --slots 1

# The Windows build under Wine: conformance through real pipes, the negative control, oracles, coli.exe.
source "$root/tests/windows/suites.sh"
# The ARM64 build under QEMU: unit tests and oracle fixtures on three CPU models, conformance.
source "$root/tests/arm64/suites.sh"

echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
