#!/usr/bin/env bash
# `inkling convert` end to end on the tiny fixtures: both layouts, int4/int8 experts, every
# --dense mode, the audio tower, resume after a kill, and each refusal (bad source, DST in
# the way, no space, a write failing half-way) with its message and nothing left behind.
# Prints one PASS/FAIL line a check.   usage: convert_e2e.sh BUILD_DIR
set -uo pipefail
build="$(cd "${1:-build}" && pwd)"
root="$(cd "$(dirname "$0")/../.." && pwd)"
fx="$build/fixtures"
bin="$build/inkling"
check="$root/tests/convert/check_convert.py"
py=/usr/bin/python3
scratch="$(mktemp -d /tmp/inkling-convert-e2e.XXXXXX)"
trap 'umount "$scratch/tiny" 2>/dev/null; rm -rf "$scratch"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; shift; for line in "$@"; do echo "    $line"; done; }

# convert NAME ARGS…: runs the converter, keeps stdout/stderr in $scratch/NAME.{out,err}.
convert() {
    local name="$1"
    shift
    "$bin" convert "$@" >"$scratch/$name.out" 2>"$scratch/$name.err"
}

# A converted fixture that the spec checker accepts.
converts_ok() {
    local fixture="$1" name="$2"
    shift 2
    local check_args=("$@")
    convert "$name" "$fx/$fixture" "$scratch/$name" "$@"
    local rc=$?
    local verdict
    verdict="$("$py" "$check" "$fx/$fixture" "$scratch/$name" "${check_args[@]}" 2>&1)"
    if [[ $rc -eq 0 && "$verdict" == ok ]]; then
        pass "converts $fixture ${*:-(defaults)}"
    else
        fail "converts $fixture ${*:-(defaults)}" "exit $rc" "$(tail -3 "$scratch/$name.err")" "$verdict"
    fi
}

converts_ok base-release-bf16 rel-int4
converts_ok base-hf-f32 hf-int8 --experts int8 --dense int8
converts_ok base-hf-bf16 hf-g64 --dense int4g64
converts_ok mixed-release-bf16 mixed-int8 --dense int8
converts_ok ring-release-bf16 ring-int8 --experts int8
converts_ok dense-hf-f32 dense-g64 --dense int4g64
converts_ok audio-release-bf16 audio-kept --keep-audio
converts_ok audio-hf-f32 audio-dropped

# The engine loads what the converter wrote and decodes from it.
engine_ok=ok
for dst in rel-int4 hf-int8 hf-g64 mixed-int8 ring-int8 dense-g64 audio-kept; do
    if ! "$bin" run --model "$scratch/$dst" --ids 1,2,3 -n 3 --threads 1 >"$scratch/run-$dst.log" 2>&1; then
        engine_ok="$dst: $(tail -2 "$scratch/run-$dst.log")"
    fi
done
if [[ "$engine_ok" == ok ]]; then
    pass "inkling run loads and decodes every converted fixture"
else
    fail "inkling run loads and decodes every converted fixture" "$engine_ok"
fi

if grep -q "dropped the audio tower (2 tensors" "$scratch/audio-dropped.out"; then
    pass "the summary says the audio tower was dropped"
else
    fail "the summary says the audio tower was dropped" "$(cat "$scratch/audio-dropped.out")"
fi

if [[ ! -e "$scratch/dense-g64/experts.inkx" ]] && grep -q '"attn.q"' "$scratch/dense-g64/convert-report.json"; then
    pass "a dense-only model gets no experts.inkx"
else
    fail "a dense-only model gets no experts.inkx"
fi

# Tokenizer and template files travel byte for byte; other files stay behind.
cp -r "$fx/base-hf-f32" "$scratch/with-tok"
printf '{"model": {"type": "BPE"}}' >"$scratch/with-tok/tokenizer.json"
printf '{"chat_template": null}' >"$scratch/with-tok/tokenizer_config.json"
printf '{}' >"$scratch/with-tok/special_tokens_map.json"
printf '{{ messages }}' >"$scratch/with-tok/chat_template.jinja"
printf '{"eos_token_id": 1}' >"$scratch/with-tok/generation_config.json"
printf 'notes' >"$scratch/with-tok/README.md"
convert with-tok "$scratch/with-tok" "$scratch/with-tok-out"
copied=ok
for f in config.json tokenizer.json tokenizer_config.json special_tokens_map.json chat_template.jinja generation_config.json; do
    cmp -s "$scratch/with-tok/$f" "$scratch/with-tok-out/$f" || copied="$f differs or is missing"
done
[[ -e "$scratch/with-tok-out/README.md" || -e "$scratch/with-tok-out/make_tiny.json" ]] && copied="other files were copied"
if [[ "$copied" == ok ]]; then
    pass "config, tokenizer, template and generation files are copied byte for byte, nothing else"
else
    fail "config, tokenizer, template and generation files are copied byte for byte, nothing else" "$copied"
fi

# One model in both layouts converts to the same bytes (the container's "source" aside).
convert hf-int4 "$fx/base-hf-bf16" "$scratch/hf-int4"
same="$("$py" - "$scratch/rel-int4" "$scratch/hf-int4" <<'PY'
import json, struct, sys
a, b = sys.argv[1:]
def records(d):
    data = open(d + "/experts.inkx", "rb").read()
    (n,) = struct.unpack("<I", data[8:12])
    h = json.loads(data[16:16 + n])
    return data[h["data_offset"]:]
print(records(a) == records(b) and open(a + "/model.safetensors", "rb").read() == open(b + "/model.safetensors", "rb").read())
PY
)"
if [[ "$same" == True ]]; then
    pass "release and transformers layouts of one model convert to the same tensors and records"
else
    fail "release and transformers layouts of one model convert to the same tensors and records" "$same"
fi

# The checker itself notices a flipped bit.
cp -r "$scratch/rel-int4" "$scratch/flipped"
"$py" -c "
f = open('$scratch/flipped/experts.inkx', 'r+b'); f.seek(8192 + 100); b = f.read(1)
f.seek(8192 + 100); f.write(bytes([b[0] ^ 1]))"
verdict="$("$py" "$check" "$fx/base-release-bf16" "$scratch/flipped")"
if grep -q "record 1 (layer 2, expert 1) fails its CRC" <<<"$verdict"; then
    pass "the checker catches a flipped bit in a record"
else
    fail "the checker catches a flipped bit in a record" "$verdict"
fi

lines="$(grep -c '^\[convert\] *[0-9]*%' "$scratch/rel-int4.err")"
if [[ $lines -ge 10 && $lines -le 21 ]]; then
    pass "progress off a terminal: a plain line every 5 % ($lines lines)"
else
    fail "progress off a terminal: a plain line every 5 % ($lines lines)" "$(head -5 "$scratch/rel-int4.err")"
fi

# Resume: killed after 5 records (with a torn sixth), then the same command again.
convert full "$fx/base-release-f32" "$scratch/full"
convert killed "$fx/base-release-f32" "$scratch/resumed" --fault-stop-after-records 5
rc=$?
if [[ $rc -eq 137 && -f "$scratch/resumed/experts.inkx.state" && -f "$scratch/resumed/experts.inkx.partial" &&
      ! -e "$scratch/resumed/experts.inkx" && ! -e "$scratch/resumed/convert-report.json" ]]; then
    pass "a killed run leaves the resume state and the partial container, no finished output"
else
    fail "a killed run leaves the resume state and the partial container, no finished output" "exit $rc" \
        "$(ls "$scratch/resumed" 2>&1)"
fi
convert resume "$fx/base-release-f32" "$scratch/resumed"
rc=$?
errors_equal="$("$py" -c "
import json, sys
a = json.load(open('$scratch/full/convert-report.json'))['quantization_error']
b = json.load(open('$scratch/resumed/convert-report.json'))['quantization_error']
print(a == b)" 2>&1)"
if [[ $rc -eq 0 ]] && grep -q "resumed after record 5 of 32" "$scratch/resume.out" &&
    cmp -s "$scratch/full/experts.inkx" "$scratch/resumed/experts.inkx" &&
    cmp -s "$scratch/full/model.safetensors" "$scratch/resumed/model.safetensors" && [[ "$errors_equal" == True ]]; then
    pass "the rerun resumes after record 5: experts.inkx byte-identical, same error figures"
else
    fail "the rerun resumes after record 5: experts.inkx byte-identical, same error figures" "exit $rc" \
        "$(cat "$scratch/resume.out" "$scratch/resume.err" | grep -v '%')" "errors equal: $errors_equal"
fi

convert threads "$fx/base-release-f32" "$scratch/threads3" --threads 3
if cmp -s "$scratch/full/experts.inkx" "$scratch/threads3/experts.inkx" &&
    [[ "$("$py" -c "
import json
a, b = (json.load(open(d + '/convert-report.json'))['quantization_error'] for d in ('$scratch/full', '$scratch/threads3'))
print(a == b)")" == True ]]; then
    pass "--threads 3 writes the same bytes and error figures as one thread a core"
else
    fail "--threads 3 writes the same bytes and error figures as one thread a core"
fi

convert killed2 "$fx/base-release-f32" "$scratch/other" --fault-stop-after-records 3
convert other-options "$fx/base-release-f32" "$scratch/other" --experts int8
rc=$?
if [[ $rc -ne 0 ]] && grep -q "unfinished conversion with other options.*--restart" "$scratch/other-options.err" &&
    [[ -f "$scratch/other/experts.inkx.state" ]]; then
    pass "resuming with other options is refused (state kept, --restart named)"
else
    fail "resuming with other options is refused (state kept, --restart named)" "exit $rc" "$(cat "$scratch/other-options.err")"
fi
convert other-source "$fx/base-hf-f32" "$scratch/other"
if [[ $? -ne 0 ]] && grep -q "unfinished conversion of another source" "$scratch/other-source.err"; then
    pass "resuming from another source is refused"
else
    fail "resuming from another source is refused" "$(cat "$scratch/other-source.err")"
fi
convert restart "$fx/base-release-f32" "$scratch/other" --experts int8 --restart
if [[ $? -eq 0 ]] && [[ "$("$py" "$check" "$fx/base-release-f32" "$scratch/other" --experts int8)" == ok ]]; then
    pass "--restart discards the unfinished run and converts"
else
    fail "--restart discards the unfinished run and converts" "$(tail -3 "$scratch/restart.err")"
fi

convert again "$fx/base-release-bf16" "$scratch/rel-int4"
if [[ $? -ne 0 ]] && grep -q "holds a finished conversion.*--restart" "$scratch/again.err"; then
    pass "converting into a finished conversion needs --restart"
else
    fail "converting into a finished conversion needs --restart" "$(cat "$scratch/again.err")"
fi

mkdir -p "$scratch/foreign" && echo keep >"$scratch/foreign/notes.txt"
convert foreign "$fx/base-release-bf16" "$scratch/foreign"
if [[ $? -ne 0 ]] && grep -q "is not an \`inkling convert\` output (it holds 'notes.txt')" "$scratch/foreign.err" &&
    [[ "$(ls "$scratch/foreign")" == notes.txt ]]; then
    pass "a directory of other files is refused and left alone"
else
    fail "a directory of other files is refused and left alone" "$(cat "$scratch/foreign.err")" "$(ls "$scratch/foreign")"
fi

cp -r "$fx/base-hf-f32" "$scratch/self"
convert self "$scratch/self" "$scratch/self"
if [[ $? -ne 0 ]] && diff -r "$fx/base-hf-f32" "$scratch/self" >/dev/null; then
    pass "converting a checkpoint onto itself is refused, the checkpoint untouched"
else
    fail "converting a checkpoint onto itself is refused, the checkpoint untouched" "$(cat "$scratch/self.err")"
fi

# Bad sources: the loader's message, prefixed; DST never created.
cp -r "$fx/base-release-bf16" "$scratch/no-shard" && rm "$scratch/no-shard/model-00002-of-00002.safetensors"
convert no-shard "$scratch/no-shard" "$scratch/no-shard-out"
if [[ $? -ne 0 ]] && grep -q "source checkpoint does not load: .*shard model-00002-of-00002.safetensors .* is missing" \
    "$scratch/no-shard.err" && [[ ! -e "$scratch/no-shard-out" ]]; then
    pass "a missing shard is refused by name, nothing written"
else
    fail "a missing shard is refused by name, nothing written" "$(cat "$scratch/no-shard.err")"
fi

cp -r "$fx/base-hf-f32" "$scratch/bad-shape"
"$py" - "$scratch/bad-shape/model.safetensors" <<'PY'
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
(n,) = struct.unpack("<Q", data[:8])
h = json.loads(data[8:8 + n])
h["model.layers.0.self_attn.q_proj.weight"]["shape"] = [32, 128]   # same bytes, wrong shape
text = json.dumps(h, separators=(",", ":")).encode().ljust(n, b" ")
assert len(text) == n
open(sys.argv[1], "wb").write(bytes(data[:8]) + text + bytes(data[8 + n:]))
PY
convert bad-shape "$scratch/bad-shape" "$scratch/bad-shape-out"
if [[ $? -ne 0 ]] && grep -q "q_proj.weight: expected shape \[64, 64\], found \[32, 128\]" "$scratch/bad-shape.err" &&
    [[ ! -e "$scratch/bad-shape-out" ]]; then
    pass "a shape mismatch is refused naming the tensor and both shapes, nothing written"
else
    fail "a shape mismatch is refused naming the tensor and both shapes, nothing written" "$(cat "$scratch/bad-shape.err")"
fi

convert bad-flag "$fx/base-release-bf16" "$scratch/bad-flag" --experts int3
if [[ $? -ne 0 ]] && grep -q "unknown expert format 'int3'" "$scratch/bad-flag.err" && [[ ! -e "$scratch/bad-flag" ]]; then
    pass "an unknown --experts format is refused"
else
    fail "an unknown --experts format is refused" "$(cat "$scratch/bad-flag.err")"
fi

# DST too small: a 256 KiB tmpfs, refused up front (needed vs available).
mkdir -p "$scratch/tiny"
if mount -t tmpfs -o size=256k tmpfs "$scratch/tiny" 2>/dev/null; then
    convert full-disk "$fx/base-release-f32" "$scratch/tiny/out"
    if [[ $? -ne 0 ]] && grep -q "not enough free space for .*: the conversion writes [0-9]* bytes .* has [0-9]* (.*) available" \
        "$scratch/full-disk.err" && [[ -z "$(ls "$scratch/tiny")" ]]; then
        pass "a destination without the space is refused up front (needed vs available)"
    else
        fail "a destination without the space is refused up front (needed vs available)" "$(cat "$scratch/full-disk.err")"
    fi
    umount "$scratch/tiny"
else
    echo "SKIP no-space refusal: cannot mount a tmpfs here"
fi

# A write failing half-way (a 300 KiB file-size limit: the container fits, the dense
# file does not): a clear message, and nothing of the run left.
(ulimit -f 300; "$bin" convert "$fx/base-release-f32" "$scratch/efbig" >"$scratch/efbig.out" 2>"$scratch/efbig.err")
rc=$?
if [[ $rc -eq 1 ]] && grep -q "write .*model.safetensors.partial: .*File too large" "$scratch/efbig.err" &&
    [[ ! -e "$scratch/efbig" ]]; then
    pass "a write error half-way (EFBIG) is reported and leaves no output"
else
    fail "a write error half-way (EFBIG) is reported and leaves no output" "exit $rc" "$(cat "$scratch/efbig.err" | grep -v %)" \
        "$(ls "$scratch/efbig" 2>&1)"
fi
mkdir -p "$scratch/efbig-existing"
(ulimit -f 300; "$bin" convert "$fx/base-release-f32" "$scratch/efbig-existing" >/dev/null 2>"$scratch/efbig2.err")
if [[ $? -eq 1 && -d "$scratch/efbig-existing" && -z "$(ls -A "$scratch/efbig-existing")" ]]; then
    pass "a write error in an existing empty DST leaves it empty"
else
    fail "a write error in an existing empty DST leaves it empty" "$(ls -A "$scratch/efbig-existing")"
fi
