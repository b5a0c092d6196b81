#!/usr/bin/env bash
# Black-box tests of build/inkling-gateway on the demo model: the official openai client (chat,
# tools, structured outputs), the official @anthropic-ai/sdk client (the Messages API), the
# SDKs' browser headers against a CORS preflight, a corpus of malformed HTTP requests, the
# web UI in headless Chromium, a bounded load test, and
# engine faults (kill -9 mid-stream, restart). Prints the suites' PASS/FAIL lines, then one
# summary line; exits non-zero when anything failed. Every wait has a deadline.
#
#   tests/gateway/run.sh BUILD            e.g. tests/gateway/run.sh build
#
# Needs node + npm (npm registry on the first run), Debian's chromium for the web UI suite.
# Logs: BUILD/test-logs/gateway-tests-*.log (one per suite, and the gateway's own); the web UI
# screenshot: BUILD/gateway-web-ui.png.
# Environment:
#   INKLING_GATEWAY_BODY_CAP   the request body cap given to the gateway (--max-body), in bytes (8 MiB)
#   INKLING_GATEWAY_SLOW_LIMIT seconds within which a stalled request must be cut off (default 40)
#   INKLING_GATEWAY_SUITES     suites to run, space-separated (default: openai anthropic logprobs tools tool-choice structured cors anthropic-tools corpus web load faults)
set -uo pipefail
build="${1:?usage: tests/gateway/run.sh BUILD}"

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "$build" 2>/dev/null && pwd)" || { echo "FAIL gateway-tests/build: no folder '$1'"; echo "gateway-tests: 0 passed, 1 failed"; exit 1; }
log_dir="$build/test-logs"
mkdir -p "$log_dir"
gateway_log="$log_dir/gateway-tests-gateway.log"
suites="${INKLING_GATEWAY_SUITES:-openai anthropic logprobs tools tool-choice structured cors anthropic-tools corpus web load faults}"
body_cap="${INKLING_GATEWAY_BODY_CAP:-8388608}"
slow_limit="${INKLING_GATEWAY_SLOW_LIMIT:-40}"
passed=0
failed=0
gw_pid=""

say() { echo "gateway-tests: $*"; }
# The HTTP status of GET URL (0 when there is no answer within TIMEOUT seconds). node, not curl:
# node is needed anyway, curl is not in tools/deps.
http_status() {
    node -e 'fetch(process.argv[1], { signal: AbortSignal.timeout(process.argv[2] * 1000) })
        .then((r) => console.log(r.status), () => console.log(0))' "$1" "${2:-2}"
}
fail_line() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
finish() {
    stop_gateway
    say "$passed passed, $failed failed"
    [[ $failed -eq 0 ]]
    exit
}
stop_gateway() {
    [[ -n "$gw_pid" ]] || return 0
    if kill -0 "$gw_pid" 2>/dev/null; then
        kill -TERM "$gw_pid" 2>/dev/null
        for _ in $(seq 1 100); do kill -0 "$gw_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$gw_pid" 2>/dev/null
    fi
    wait "$gw_pid" 2>/dev/null
    gw_pid=""
}
trap 'stop_gateway' EXIT
trap 'stop_gateway; exit 130' INT TERM

# ------------------------------------------------------------------ prerequisites
if ! timeout 600 "$here/install.sh" >"$log_dir/gateway-tests-npm.log" 2>&1; then
    fail_line gateway-tests/npm-install "tests/gateway/install.sh failed; see $log_dir/gateway-tests-npm.log"
    tail -5 "$log_dir/gateway-tests-npm.log"
    finish
fi
{
    if ! timeout 900 "$root/tools/make-tiny/ensure_demo.sh" "$build" >"$log_dir/gateway-tests-demo-model.log" 2>&1; then
        fail_line gateway-tests/demo-model "tools/make-tiny/ensure_demo.sh failed; see $log_dir/gateway-tests-demo-model.log"
        finish
    fi
    for bin in inkling-gateway inkling; do
        if [[ ! -x "$build/$bin" ]]; then
            fail_line gateway-tests/binaries "$build/$bin is not built"
            finish
        fi
    done
}

# ------------------------------------------------------------------ start the gateway
port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
key="gw-test-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
base="http://127.0.0.1:$port"
# `start_gateway [ARG...]`: the gateway on $port with the suites' settings and ARGs, waited
# for until /health answers 200 (120 s); on failure the run ends with a FAIL line.
start_gateway() {
    "$build/inkling-gateway" --model "$build/demo-model" --engine "${engine_bin:-$build/inkling}" --host 127.0.0.1 --port "$port" \
        --slots 2 --max-queue 4 --api-key "$key" --max-body "$body_cap" --threads 1 "$@" >>"$gateway_log" 2>&1 &
    gw_pid=$!
    local ready=0 deadline=$((SECONDS + 120)) why
    while [[ $SECONDS -lt $deadline ]]; do
        if ! kill -0 "$gw_pid" 2>/dev/null; then break; fi
        if [[ "$(http_status "$base/health" 2)" == "200" ]]; then ready=1; break; fi
        sleep 0.2
    done
    if [[ $ready -ne 1 ]]; then
        if kill -0 "$gw_pid" 2>/dev/null; then why="/health not 200 within 120 s"; else why="the gateway exited"; fi
        fail_line gateway-tests/start "$why; see $gateway_log"
        tail -20 "$gateway_log"
        finish
    fi
    say "gateway pid $gw_pid on $base${*:+ ($*)}"
}
: >"$gateway_log"
start_gateway

# ------------------------------------------------------------------ suites
# Runs one node suite with a deadline; its PASS/FAIL lines go to stdout and its log.
run_node() {
    local name="$1" limit="$2"
    shift 2
    local log="$log_dir/gateway-tests-$name.log"
    (cd "$here" && timeout -k 10 "$limit" node "$@" --base "$base" --api-key "$key") >"$log" 2>&1
    local rc=$?
    grep -E '^(PASS|FAIL) ' "$log"
    local p f
    p="$(grep -c '^PASS ' "$log")"
    f="$(grep -c '^FAIL ' "$log")"
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        echo "FAIL gateway-tests/$name: killed after $limit s; see $log"
        f=$((f + 1))
    elif [[ $rc -ne 0 && $f -eq 0 ]]; then
        echo "FAIL gateway-tests/$name: exit status $rc without a FAIL line; see $log"
        tail -5 "$log"
        f=$((f + 1))
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    # A suite must leave the gateway healthy for the next one: /health 200 within 30 s (an
    # engine the suite killed restarts meanwhile).
    local healthy=0 deadline=$((SECONDS + 30))
    while [[ $SECONDS -lt $deadline ]]; do
        if [[ "$(http_status "$base/health" 5)" == "200" ]]; then healthy=1; break; fi
        sleep 0.2
    done
    [[ $healthy -eq 1 ]] || fail_line "gateway-tests/$name-left-gateway-healthy" "/health is not 200 within 30 s of the suite's end"
}

# `run_held NAME LIMIT ARGS...`: run_node on a gateway of its own whose engine holds a request
# after 16 tokens until a STOP or CANCEL (--fault-hold-after, docs/configuration.md), so a Stop,
# a kill or a hang-up meets a turn in flight whatever the model says; then the shared one again.
# The suite's turns that must end by themselves ask for 16 tokens or fewer.
run_held() {
    stop_gateway
    start_gateway --engine-arg=--fault-hold-after=16
    run_node "$@" --hold 16
    stop_gateway
    start_gateway
}

# `run_scripted NAME LIMIT ARGS...`: run_node on a gateway of its own whose engine is the
# scripted tests/gateway/fake_engine.py, answering every turn with the tokens of
# fixtures/tool_calls_reply.json (tool calls in Inkling's format, which the demo model never
# makes) and recording each SUBMIT, whose file the suite reads (--record); then the shared one.
run_scripted() {
    local record="$log_dir/gateway-tests-$1-submits.jsonl"
    : >"$record"
    stop_gateway
    # fake_engine.py takes a flag's value as the next argument: one --engine-arg each.
    engine_bin="$here/fake_engine.py" start_gateway --engine-arg=--fake-reply --engine-arg="$here/fixtures/tool_calls_reply.json" \
        --engine-arg=--fake-record --engine-arg="$record"
    run_node "$@" --record "$record"
    stop_gateway
    start_gateway
}

for suite in $suites; do
    case "$suite" in
        openai) run_node openai 300 openai_client.test.mjs ;;
        anthropic) run_node anthropic 300 anthropic_client.test.mjs ;;
        logprobs) run_node logprobs 300 logprobs.test.mjs ;;
        tools)  run_scripted tools 120 tool_calls.test.mjs ;;
        tool-choice) run_node tool-choice 600 tool_choice.test.mjs ;;
        structured) run_node structured 600 structured_outputs.test.mjs ;;
        cors)   run_node cors 120 cors_preflight.test.mjs ;;
        anthropic-tools) run_scripted anthropic-tools 120 anthropic_tools.test.mjs ;;
        corpus) run_node corpus 600 http_corpus.test.mjs --body-cap "$body_cap" --slow-limit "$slow_limit" ;;
        web)    run_held web 300 web_ui.test.mjs --screenshot "$build/gateway-web-ui.png" ;;
        load)   run_node load 420 load.test.mjs ;;
        faults) run_held faults 300 openai_client.test.mjs --faults ;;
        *)      fail_line gateway-tests/suites "unknown suite '$suite'" ;;
    esac
done

# ------------------------------------------------------------------ SIGTERM: drain and exit 0
{
    engine_pid="$(node -e 'fetch(process.argv[1], { headers: { Authorization: "Bearer " + process.argv[2] }, signal: AbortSignal.timeout(5000) })
        .then((r) => r.json()).then((j) => console.log(j.engine.pid), () => console.log(""))' "$base/v1/stats" "$key")"
    kill -TERM "$gw_pid" 2>/dev/null
    exited=0
    for _ in $(seq 1 300); do kill -0 "$gw_pid" 2>/dev/null || { exited=1; break; }; sleep 0.1; done
    if [[ $exited -eq 1 ]]; then
        wait "$gw_pid"
        rc=$?
        gw_pid=""
        if [[ $rc -eq 0 ]]; then echo "PASS gateway-tests/sigterm-exits-0"; passed=$((passed + 1));
        else fail_line gateway-tests/sigterm-exits-0 "exit status $rc"; fi
        engine_gone=1
        if [[ -n "$engine_pid" ]]; then
            for _ in $(seq 1 50); do kill -0 "$engine_pid" 2>/dev/null || break; sleep 0.1; done
            kill -0 "$engine_pid" 2>/dev/null && engine_gone=0
        fi
        if [[ $engine_gone -eq 1 ]]; then echo "PASS gateway-tests/sigterm-stops-engine"; passed=$((passed + 1));
        else fail_line gateway-tests/sigterm-stops-engine "engine pid $engine_pid still runs after the gateway exited"; kill -KILL "$engine_pid" 2>/dev/null; fi
    else
        fail_line gateway-tests/sigterm-exits-0 "still running 30 s after SIGTERM"
    fi
}
finish
