# Sourced by tests/run_all.sh (its run_unit, run_suite, skip_suite, timed, $build, $root,
# $log_dir): the ARM64 build of `make arm64` (ARM64_BUILD, default build-arm64) under QEMU's
# user-mode emulator (Debian's qemu-user-static), on three CPU models, so that each kernel
# level runs (engine/cpu/arm64/; the engine picks it from the CPU's HWCAP bits):
#   max         QEMU's everything: SDOT, SMMLA, BF16 — the i8mm kernels ("smmla+sdot")
#   cortex-a76  SDOT, no SMMLA — the dotprod kernels ("sdot"), i8mm's fallback
#   cortex-a72  plain ARMv8.0 NEON — the neon kernels, dotprod's fallback
# The unit tests run on `max` (but for three slow cases of pure logic); on the other two, the
# kernel cases (each ISA level the CPU has, bitwise against the scalar reference; the missing
# levels are MESSAGEd as skipped) and the reference-golden forward cases. tests/arm64/arm64_e2e.py: the banner and
# `inkling info` name the expected kernels per CPU model, the oracle fixtures' tokens, int8
# and int4 models bitwise equal across the models and --isa scalar. conformance-arm64-engine:
# the Linux conformance suite through real pipes to `qemu-aarch64-static inkling serve`.
arm_suites=(arm64-unit-tests-max arm64-unit-tests-cortex-a76 arm64-unit-tests-cortex-a72 arm64-e2e
            conformance-arm64-engine)
arm="${ARM64_BUILD:-$root/build-arm64}"
qemu="$(command -v qemu-aarch64-static || true)"
if [[ -z "$qemu" ]]; then
    for s in "${arm_suites[@]}"; do skip_suite "$s" "qemu-aarch64-static is not installed (make deps)"; done
elif [[ ! -f "$arm/inkling" || ! -f "$arm/unit-tests" ]]; then
    for s in "${arm_suites[@]}"; do skip_suite "$s" "no ARM64 build in $arm (make arm64)"; done
else
    # The unit tests read their fixtures from $arm/fixtures (INKLING_FIXTURE_DIR): the host
    # build's, generated above, are the same files.
    ln -sfn "$(realpath "$build")/fixtures" "$arm/fixtures"
    # Left out under emulation (10-20x slower): the slow cases of pure logic — the grammar's
    # integer spans and brute-force masks, the demo model's perplexity (the forward runs in
    # the fixtures' cases), resample's length formula over every rate (the resampler's
    # signal cases stay) — 30 s of the native run, several minutes here; they run natively in
    # unit-tests. -nss: doctest counts the cases a filter leaves out as skipped, which would
    # read as checks this machine could not make.
    slow_cases='*json schema: integer bounds*,*mask equals brute force*,*demo model*perplexity*,*resample: the length*'
    # Also left out: the Ctrl-C-during-a-blocked-write case, which waits for the child to sit in
    # write(2) by reading /proc/PID/syscall: under QEMU's user mode that shows the host's
    # syscall numbers (x86-64's 1), not ARM64's 64, so it can never see the block here.
    slow_cases+=',*Ctrl-C during a blocked write*'
    # And the sampler's statistical draws (tens of thousands of draws over rows of up to
    # 100,000 ids): 16 s natively, 620 s of the 670 under QEMU, pure logic over the bits that
    # the fast sampling cases pin here (exp, the weights' lanes, their sum's tree, top-k).
    slow_cases+=',*draws over a large vocabulary*,*top-p draws*,*top-p over near-equal logits*'
    kernel_cases='*matmul*,*ISA*,*scalar kernels agree*,*row_f32*'
    run_unit arm64-unit-tests-max "$qemu" -cpu max "$arm/unit-tests" -nss "-tce=$slow_cases"
    run_unit arm64-unit-tests-cortex-a76 "$qemu" -cpu cortex-a76 "$arm/unit-tests" -nss "-tc=$kernel_cases"
    run_unit arm64-unit-tests-cortex-a72 "$qemu" -cpu cortex-a72 "$arm/unit-tests" -nss "-tc=$kernel_cases"
    run_suite arm64-e2e /usr/bin/python3 "$root/tests/arm64/arm64_e2e.py" "$build" "$arm"
    # A shorter random stream than the native suites' 2,000 frames: each frame is a forward
    # step under emulation.
    run_suite conformance-arm64-engine "$build/protocol-conformance" --prompt "1 2 3 4 5" --keys ids=1 \
        --stress 500 --scratch "$log_dir" -- "$qemu" -cpu max "$arm/inkling" serve --model "$build/fixtures/base-hf-f32" \
        --slots 1 --ctx 256 --threads 2
fi
