#!/usr/bin/env bash
# Runs every test of a build folder and ends with the plain line "N passed, N failed",
# counting test cases (doctest) and checks (conformance suites, end-to-end scripts).
set -uo pipefail
build="${1:-build}"
root="$(cd "$(dirname "$0")/.." && pwd)"
passed=0
failed=0
log_dir="$build/test-logs"
mkdir -p "$log_dir"

# Unit tests: doctest prints "[doctest] test cases: T | P passed | F failed | S skipped".
run_unit() {
    local log="$log_dir/unit-tests.log"
    "$build/unit-tests" --no-intro=false >"$log" 2>&1
    local rc=$?
    local line
    line="$(grep -E '^\[doctest\] test cases:' "$log" | tail -1)"
    local p f
    p="$(sed -E 's/.*\| *([0-9]+) passed.*/\1/' <<<"$line")"
    f="$(sed -E 's/.*\| *([0-9]+) failed.*/\1/' <<<"$line")"
    if [[ -z "$line" || ! "$p" =~ ^[0-9]+$ ]]; then
        echo "FAIL unit-tests: no doctest summary (exit $rc); see $log"
        tail -20 "$log"
        failed=$((failed + 1))
        return
    fi
    if [[ $rc -ne 0 && $f -eq 0 ]]; then f=1; fi
    echo "unit-tests: $p passed, $f failed"
    [[ $f -ne 0 ]] && grep -E 'ERROR|FATAL|TEST CASE|CHECK' "$log" | head -60
    passed=$((passed + p))
    failed=$((failed + f))
}

# A suite that prints PASS/FAIL lines.
run_suite() {
    local name="$1"
    shift
    local log="$log_dir/$name.log"
    "$@" >"$log" 2>&1
    local rc=$?
    local p f
    p="$(grep -c '^PASS ' "$log")"
    f="$(grep -c '^FAIL ' "$log")"
    if [[ $rc -ne 0 && $f -eq 0 ]]; then
        echo "FAIL $name: exit status $rc without a FAIL line; see $log"
        tail -20 "$log"
        f=1
    fi
    echo "$name: $p passed, $f failed"
    [[ $f -ne 0 ]] && grep -A8 '^FAIL ' "$log" | head -80
    passed=$((passed + p))
    failed=$((failed + f))
}

# Generated inputs: the tiny checkpoints (deterministic, numpy) the engine tests load.
if ! "$root/tools/make-tiny/ensure.sh" "$build/fixtures" >"$log_dir/fixtures.log" 2>&1; then
    echo "FAIL fixtures: tools/make-tiny/ensure.sh failed; see $log_dir/fixtures.log"
    tail -5 "$log_dir/fixtures.log"
    failed=$((failed + 1))
fi

# The Inkling tokenizer.json built from tiktoken's o200k ranks (npm) plus TMLv0 specials.
if ! "$root/tools/make-tokenizer/ensure.sh" "$build/o200k-inkling" >"$log_dir/make-tokenizer.log" 2>&1; then
    echo "FAIL make-tokenizer: see $log_dir/make-tokenizer.log"
    tail -5 "$log_dir/make-tokenizer.log"
    failed=$((failed + 1))
fi
export INKLING_TOKENIZER_JSON="$build/o200k-inkling/tokenizer.json"

run_unit
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
    echo "reference-goldens: skipped (python3-torch not installed; the committed goldens still ran)"
fi
# The trained demo model (models/inkling-demo): engine vs the reference's golden, and, with
# torch, the golden against a live run of the reference.
run_suite demo-model python3 "$root/tests/engine/demo_model_test.py" "$build"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    run_suite demo-model-reference /usr/bin/python3 "$root/tools/train-tiny/demo_goldens.py" --check
else
    echo "demo-model-reference: skipped (python3-torch not installed; the committed golden still ran)"
fi
if "$root/tools/make-tiny/ensure_demo.sh" "$build" >"$log_dir/demo-model.log" 2>&1; then
    run_suite conformance-engine-text "$build/protocol-conformance" --scratch "$log_dir" -- \
        "$build/inkling" serve --model "$build/demo-model" --slots 2 --ctx 512 --threads 2
    # Hostile frames against the real engine: each answered by an ERROR, the engine serves on.
    run_suite engine-serve-e2e python3 "$root/tests/serve/serve_e2e.py" "$build"
else
    echo "FAIL demo-model: see $log_dir/demo-model.log"
    failed=$((failed + 1))
fi
run_suite conformance-engine-ids "$build/protocol-conformance" --prompt "1 2 3 4 5" --keys ids=1 \
    --scratch "$log_dir" -- "$build/inkling" serve --model "$build/fixtures/base-hf-f32" --slots 1 --ctx 256 --threads 2
# The same suite against the Vulkan chain (lavapipe), and a device lost mid-request.
run_suite conformance-engine-vulkan "$build/protocol-conformance" --prompt "1 2 3 4 5" --keys ids=1 \
    --scratch "$log_dir" -- "$build/inkling" serve --model "$build/fixtures/base-hf-f32" --slots 1 --ctx 256 \
    --threads 2 --vulkan on
run_suite vulkan-serve python3 "$root/tests/vulkan/serve_device_test.py" "$build"
# inkling convert on every fixture layout, resume after a kill, refusals (docs/convert.md).
run_suite convert-e2e "$root/tests/convert/convert_e2e.sh" "$build"
run_suite gateway-e2e python3 "$root/tests/gateway/gateway_e2e.py" "$build"
run_suite gateway-hostile python3 "$root/tests/gateway/gateway_hostile.py" "$build"
run_suite gateway-supervisor python3 "$root/tests/gateway/supervisor_e2e.py" "$build"
run_suite gateway-clients "$root/tests/gateway/run.sh" "$build"
run_suite coli-e2e python3 "$root/tests/coli/coli_e2e.py" "$build"
run_suite conformance-echo "$build/protocol-conformance" --scratch "$log_dir" -- "$build/echo-engine"
run_suite conformance-echo-1slot "$build/protocol-conformance" --scratch "$log_dir" -- "$build/echo-engine" --slots 1

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
