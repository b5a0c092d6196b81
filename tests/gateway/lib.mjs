// Shared helpers of the gateway's black-box suites: arguments, PASS/FAIL reporting, fetch with
// deadlines, SSE reading. Every suite prints one `PASS <name>` or `FAIL <name>: <why>` line per
// check (tests/run_all.sh counts them) and exits non-zero when any check failed.
//
//   node SUITE.test.mjs [--base URL] [--api-key K] [other suite options]
//   env: INKLING_GATEWAY_URL (default http://127.0.0.1:8000), INKLING_API_KEY

import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import { sseEvents } from '../../gateway/web/sse.mjs';

export { sleep };

// --name value / --name=value / --flag. Returns {name: value|true}.
export function parseArgs(argv = process.argv.slice(2)) {
    const out = {};
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (!a.startsWith('--')) { (out._ ||= []).push(a); continue; }
        const eq = a.indexOf('=');
        if (eq > 0) { out[a.slice(2, eq)] = a.slice(eq + 1); continue; }
        const name = a.slice(2);
        const next = argv[i + 1];
        if (next !== undefined && !next.startsWith('--')) { out[name] = next; i++; } else out[name] = true;
    }
    return out;
}

export function config(argv) {
    const args = parseArgs(argv);
    const base = String(args.base || args._?.[0] || process.env.INKLING_GATEWAY_URL || 'http://127.0.0.1:8000').replace(/\/+$/, '');
    const apiKey = args['api-key'] || process.env.INKLING_API_KEY || '';
    const u = new URL(base);
    return { args, base, apiKey, host: u.hostname, port: Number(u.port || 80) };
}

// PASS/FAIL bookkeeping. check() runs one named async check with a deadline.
export class Reporter {
    constructor(suite) {
        this.suite = suite;
        this.passed = 0;
        this.failed = 0;
        this.started = Date.now();
    }
    pass(name, note) {
        this.passed++;
        console.log(`PASS ${name}` + (note ? ` (${note})` : ''));
    }
    fail(name, why) {
        this.failed++;
        const text = String(why && why.stack && process.env.INKLING_TEST_STACKS ? why.stack : (why && why.message) || why);
        // Playwright colours its call logs; a log file wants plain text, and a few lines.
        const plain = text.replace(/\x1b\[[0-9;]*m/g, '').split('\n').slice(0, 12).join('\n    ');
        console.log(`FAIL ${name}: ${plain}`);
    }
    note(text) { console.log(`  note: ${text}`); }
    // fn returns nothing (pass), a string (pass with a note), or throws (fail).
    async check(name, fn, timeoutMs = 60000) {
        let timer;
        try {
            const note = await Promise.race([
                fn(),
                new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs); }),
            ]);
            this.pass(name, typeof note === 'string' ? note : undefined);
            return true;
        } catch (err) {
            this.fail(name, err);
            return false;
        } finally {
            clearTimeout(timer);
        }
    }
    // Prints the closing line (not PASS/FAIL) and exits.
    finish() {
        const secs = ((Date.now() - this.started) / 1000).toFixed(1);
        console.log(`${this.suite}: ${this.passed} passed, ${this.failed} failed in ${secs} s`);
        process.exit(this.failed ? 1 : 0);
    }
}

export function assert(cond, msg) {
    if (!cond) throw new Error(msg);
}
export function assertEq(actual, expected, what) {
    if (actual !== expected) throw new Error(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
}

export function authHeaders(apiKey) {
    return apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
}

// fetch with a deadline; returns {status, headers, text, json}.
export async function request(url, { method = 'GET', headers = {}, body, timeoutMs = 30000 } = {}) {
    const res = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body)),
        signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let json;
    try { json = JSON.parse(text); } catch { json = undefined; }
    return { status: res.status, headers: res.headers, text, json };
}

// Waits until GET /health answers 200 (or the deadline passes; then throws).
export async function waitHealthy(base, timeoutMs = 60000) {
    const end = Date.now() + timeoutMs;
    let last = 'no answer';
    while (Date.now() < end) {
        try {
            const r = await request(`${base}/health`, { timeoutMs: 2000 });
            if (r.status === 200) return r;
            last = `${r.status} ${r.text.slice(0, 200)}`;
        } catch (err) {
            last = err.message;
        }
        await sleep(100);
    }
    throw new Error(`/health not 200 within ${timeoutMs} ms (last: ${last})`);
}

// The gateway's first model id once /health answers 200; when either fails within
// timeoutMs the suite reports `name` as failed and ends there.
export async function readyModel(r, name, base, apiKey, timeoutMs) {
    try {
        await waitHealthy(base, timeoutMs);
        return await modelId(base, apiKey);
    } catch (err) {
        r.fail(name, err);
        r.finish();
    }
}

// Reads SSE events from a fetch Response (or a node:http IncomingMessage): returns
// [{event, data}] until the stream closes. Throws when the stream breaks off with a network
// error, or on invalid UTF-8. The parser is the web UI's (gateway/web/sse.mjs).
export async function readSse(res) {
    const events = [];
    for await (const ev of sseEvents(res.body ?? res, { fatal: true })) events.push(ev);
    return events;
}

// The gateway's /v1/stats (with the key when one is set).
export async function stats(base, apiKey) {
    const r = await request(`${base}/v1/stats`, { headers: authHeaders(apiKey), timeoutMs: 5000 });
    if (r.status !== 200 || !r.json) throw new Error(`/v1/stats: ${r.status} ${r.text.slice(0, 200)}`);
    return r.json;
}

// The first model id of /v1/models.
export async function modelId(base, apiKey) {
    const r = await request(`${base}/v1/models`, { headers: authHeaders(apiKey), timeoutMs: 5000 });
    if (r.status !== 200 || !r.json?.data?.[0]?.id) throw new Error(`/v1/models: ${r.status} ${r.text.slice(0, 200)}`);
    return r.json.data[0].id;
}

// TMLv0's canonical JSON (docs/model.md, "Tools"): keys sorted at every depth, no
// spaces — what the gateway renders tool declarations and call arguments as.
export function canonicalJson(v) {
    if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
    if (v && typeof v === 'object') return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(v[k])}`).join(',')}}`;
    return JSON.stringify(v);
}

// The prompt of the last SUBMIT tests/gateway/fake_engine.py recorded (--fake-record FILE).
export function lastRecordedPrompt(file) {
    const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
    return JSON.parse(lines[lines.length - 1]).prompt;
}
