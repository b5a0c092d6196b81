#!/usr/bin/env bash
# Long fuzz runs on the GPU machine (docs/building.md, "Long runs"): run from a carried folder
# DIR holding stripped fuzz binaries (`strip -g -o DIR/fuzz-serve build-fuzz/fuzz-serve`, …),
# the libraries they need that the machine lacks (DIR/lib: libsamplerate, libpcre2-8), the
# fixture fuzz-serve loads (DIR/fixtures/audio-hf-f32) and the corpora to start from
# (DIR/TARGET-in.tgz, a tar of one folder of inputs), all under the device tool's 64 MiB:
#   device run (carry DIR): bash tests/fuzz/device_run.sh DIR serve 570 -close_fd_mask=2 \
#       -timeout=30 -max_len=512 -dict=$(pwd)/tests/fuzz/serve.dict
# The log, the merged corpus (TARGET-out.tgz) and any crash inputs come back under $OUT.
set -u
d="$(cd "$1" && pwd)"
t="$2"; secs="$3"; shift 3
export LD_LIBRARY_PATH="$d/lib" INKLING_FUZZ_FIXTURES="$d/fixtures" ASAN_OPTIONS=malloc_context_size=0
w=/tmp/fz-$t; mkdir -p $w/in $w/out
[ -f "$d/$t-in.tgz" ] && tar xzf "$d/$t-in.tgz" -C $w/in
bin=fuzz-$t
cd $w
# -entropic=0: the entropic schedule's per-feature bookkeeping took 45 % of fuzz-serve's time.
"$d/$bin" -fork="$(nproc)" -entropic=0 -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$OUT/$t-" "$@" \
    $w/out $w/in/* > "$OUT/$t.log" 2>&1
echo "$t rc=$?"
grep -E '^#[0-9]+: cov' "$OUT/$t.log" | tail -2
tail -4 "$OUT/$t.log"
tar czf "$OUT/$t-out.tgz" -C $w out
