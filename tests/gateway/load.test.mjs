// A bounded load test on loopback: concurrent streaming chat clients against a gateway with a
// small admission queue. No 5xx ever; within slots + queue every client is served; past it the
// extra clients get 429 + Retry-After (and get through when they retry); every accepted
// stream ends with finish_reason and [DONE]; the gateway's counters stay within its limits
// and /health keeps answering while it is loaded.
//
//   node load.test.mjs --base URL [--api-key K] [--clients 16] [--max-tokens 128] [--same-ip]
//
// Slots and queue size are read from /v1/stats (engine.info.slots, gateway.queue_limit). Each
// client connects from its own loopback address (127.0.0.10, .11, …; all of 127/8 is this
// machine), as distinct clients would, so the gateway's per-IP connection cap does not turn
// the load into refused connections; --same-ip sends everything from 127.0.0.1.

import http from 'node:http';
import { config, Reporter, assert, assertEq, request, authHeaders, readSse, stats, modelId, waitHealthy, sleep } from './lib.mjs';

const { args, base, apiKey } = config();
const r = new Reporter('load');
const clients = Number(args.clients || 16);
const maxTokens = Number(args['max-tokens'] || 128);
const REQUEST_TIMEOUT_MS = 120000;

let model, slots, queueLimit;
try {
    await waitHealthy(base, 30000);
    model = await modelId(base, apiKey);
    const st = await stats(base, apiKey);
    slots = st.engine?.info?.slots ?? st.engine?.stats?.slots?.length;
    queueLimit = st.gateway?.queue_limit;
    if (!Number.isInteger(slots) || slots < 1) throw new Error(`no slot count in /v1/stats (engine.info.slots = ${st.engine?.info?.slots})`);
    if (!Number.isInteger(queueLimit) || queueLimit < 0) throw new Error(`no gateway.queue_limit in /v1/stats (${queueLimit})`);
} catch (err) {
    r.fail('load/setup', err);
    r.finish();
}
const capacity = slots + queueLimit;
console.log(`  ${slots} slots + ${queueLimit} queued = capacity ${capacity}; ${clients} clients, ${maxTokens} tokens each`);

// One streaming client: {status, retryAfter, error, events, finish, usage, done, ms, text}.
const sourceAddress = (i) => (args['same-ip'] ? '127.0.0.1' : `127.0.${10 + Math.floor(i / 200)}.${10 + (i % 200)}`);
const target = new URL(base);

// POST a chat request over node:http from client i's source address; resolves with the response.
function post(i, body, timeoutMs) {
    return new Promise((resolve, reject) => {
        const data = Buffer.from(JSON.stringify(body));
        const req = http.request({
            host: target.hostname, port: target.port, path: '/v1/chat/completions', method: 'POST',
            localAddress: sourceAddress(i), agent: false,
            headers: { 'Content-Type': 'application/json', 'Content-Length': data.length, ...authHeaders(apiKey) },
            timeout: timeoutMs,
        }, resolve);
        req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
        req.on('error', reject);
        req.end(data);
    });
}

async function streamClient(i, tokens = maxTokens) {
    const t0 = Date.now();
    const out = { i, status: 0 };
    try {
        const res = await post(i, {
            model, stream: true, stream_options: { include_usage: true }, max_tokens: tokens, temperature: 0.8, seed: i,
            messages: [{ role: 'user', content: `Client ${i}: tell me a long story about the number ${i}.` }],
        }, REQUEST_TIMEOUT_MS);
        out.status = res.statusCode;
        out.retryAfter = res.headers['retry-after'];
        if (res.statusCode !== 200) {
            let text = '';
            for await (const c of res) text += c;
            out.text = text;
            try { out.error = JSON.parse(out.text).error; } catch { /* not JSON */ }
        } else {
            const events = await readSse(res);
            if (res.aborted || !res.complete) throw new Error('the stream broke off');
            out.done = events.length > 0 && events[events.length - 1].data === '[DONE]';
            out.events = events.length;
            for (const e of events) {
                if (e.data === '[DONE]') continue;
                const obj = JSON.parse(e.data);
                if (obj.error) out.streamError = obj.error;
                if (obj.usage) out.usage = obj.usage;
                const f = obj.choices?.[0]?.finish_reason;
                if (f) out.finish = f;
            }
        }
    } catch (err) {
        out.exception = err.message;
    }
    out.ms = Date.now() - t0;
    return out;
}

function checkAccepted(o) {
    if (o.exception) return `client ${o.i}: ${o.exception}`;
    if (o.status !== 200) return null;
    if (o.streamError) return `client ${o.i}: error event ${JSON.stringify(o.streamError)}`;
    if (!o.done) return `client ${o.i}: the stream ended without [DONE] (${o.events} events)`;
    if (!['stop', 'length'].includes(o.finish)) return `client ${o.i}: finish_reason ${o.finish}`;
    if (!o.usage || o.usage.completion_tokens < 1 || o.usage.completion_tokens > maxTokens) return `client ${o.i}: usage ${JSON.stringify(o.usage)}`;
    return null;
}

function check429(o) {
    if (o.status !== 429) return null;
    if (!o.retryAfter) return `client ${o.i}: 429 without Retry-After`;
    if (!o.error || typeof o.error.message !== 'string') return `client ${o.i}: 429 without an OpenAI error object: ${String(o.text).slice(0, 120)}`;
    return null;
}

// Samples /v1/stats and /health while `promise` runs.
async function sampleWhile(promise) {
    const samples = { maxActive: 0, maxQueued: 0, healthWorstMs: 0, healthBad: [], statsErrors: 0 };
    let running = true;
    promise.finally(() => { running = false; });
    while (running) {
        try {
            const st = await stats(base, apiKey);
            samples.maxActive = Math.max(samples.maxActive, st.gateway.active);
            samples.maxQueued = Math.max(samples.maxQueued, st.gateway.queued);
        } catch { samples.statsErrors++; }
        const t0 = Date.now();
        try {
            const h = await request(`${base}/health`, { timeoutMs: 5000 });
            if (h.status !== 200) samples.healthBad.push(h.status);
        } catch (err) { samples.healthBad.push(err.message); }
        samples.healthWorstMs = Math.max(samples.healthWorstMs, Date.now() - t0);
        await sleep(100);
    }
    return samples;
}

// ---------------------------------------------------------------- within capacity
await r.check('load/within-capacity-all-served', async () => {
    const all = Promise.all(Array.from({ length: capacity }, (_, i) => streamClient(i)));
    const samples = await sampleWhile(all);
    const res = await all;
    const statuses = res.map((o) => o.status || o.exception);
    const problems = res.map(checkAccepted).filter(Boolean);
    assert(!problems.length, problems.slice(0, 4).join('; '));
    assert(res.every((o) => o.status === 200), `statuses ${JSON.stringify(statuses)} (expected all 200 with ${capacity} clients)`);
    assert(samples.maxActive <= slots, `gateway.active reached ${samples.maxActive} > ${slots} slots`);
    assert(samples.maxQueued <= queueLimit, `gateway.queued reached ${samples.maxQueued} > queue_limit ${queueLimit}`);
    assert(!samples.healthBad.length, `/health during load: ${samples.healthBad.slice(0, 3).join(', ')}`);
    return `${capacity} streams, slowest ${Math.max(...res.map((o) => o.ms))} ms, /health worst ${samples.healthWorstMs} ms`;
}, REQUEST_TIMEOUT_MS + 30000);

// ---------------------------------------------------------------- past capacity
let rejected = [];
await r.check('load/past-capacity-429-only', async () => {
    const n = Math.max(clients, capacity + 1);
    const all = Promise.all(Array.from({ length: n }, (_, i) => streamClient(100 + i)));
    const samples = await sampleWhile(all);
    const res = await all;
    const byStatus = {};
    for (const o of res) byStatus[o.status || 'exception'] = (byStatus[o.status || 'exception'] || 0) + 1;
    const server = res.filter((o) => o.status >= 500);
    assert(!server.length, `5xx answers: ${server.map((o) => `${o.status} ${String(o.text).slice(0, 80)}`).slice(0, 3).join('; ')}`);
    const other = res.filter((o) => o.status !== 200 && o.status !== 429);
    assert(!other.length, `unexpected answers: ${other.map((o) => `${o.status || o.exception} ${String(o.text || '').slice(0, 80)}`).slice(0, 3).join('; ')}`);
    const problems = res.map((o) => checkAccepted(o) || check429(o)).filter(Boolean);
    assert(!problems.length, problems.slice(0, 4).join('; '));
    const ok = byStatus[200] || 0;
    const busy = byStatus[429] || 0;
    assert(ok >= capacity, `only ${ok} of ${n} clients served with capacity ${capacity} (${JSON.stringify(byStatus)})`);
    assert(busy >= 1, `${n} simultaneous clients > capacity ${capacity}, yet no 429 (${JSON.stringify(byStatus)})`);
    assert(samples.maxActive <= slots, `gateway.active reached ${samples.maxActive} > ${slots} slots`);
    assert(samples.maxQueued <= queueLimit, `gateway.queued reached ${samples.maxQueued} > queue_limit ${queueLimit}`);
    assert(!samples.healthBad.length, `/health during load: ${samples.healthBad.slice(0, 3).join(', ')}`);
    rejected = res.filter((o) => o.status === 429);
    return `${JSON.stringify(byStatus)}; max active ${samples.maxActive}, max queued ${samples.maxQueued}; /health worst ${samples.healthWorstMs} ms`;
}, REQUEST_TIMEOUT_MS + 30000);

// The rejected clients retry after Retry-After (a few times at most) and all get through.
await r.check('load/rejected-clients-get-through-on-retry', async () => {
    assert(rejected.length, 'no rejected clients (see load/past-capacity-429-only)');
    const finals = await Promise.all(rejected.map(async (first) => {
        let o = first;
        for (let attempt = 0; attempt < 30 && o.status === 429; attempt++) {
            const wait = Math.min(5, Math.max(0.2, Number(o.retryAfter) || 1));
            await sleep(wait * 1000 * (1 + (first.i % 5) / 10));     // a little spread, deterministic
            o = await streamClient(first.i, 16);
        }
        return o;
    }));
    const bad = finals.filter((o) => o.status !== 200 || checkAccepted(o));
    assert(!bad.length, bad.slice(0, 3).map((o) => `client ${o.i}: ${o.status} ${checkAccepted(o) || String(o.text || '').slice(0, 80)}`).join('; '));
    return `${finals.length} clients`;
}, 240000);

await r.check('load/idle-after-load', async () => {
    const end = Date.now() + 15000;
    let st;
    while (Date.now() < end) {
        st = await stats(base, apiKey);
        // engine.stats is the engine's latest STATS frame: /v1/stats asks for a fresh one
        // and answers with the one before, so a slot freed by the last CANCEL shows a poll later.
        const engineIdle = (st.engine.stats?.slots || []).every((s) => !s.busy);
        if (st.gateway.active === 0 && st.gateway.queued === 0 && engineIdle) break;
        await sleep(200);
    }
    assertEq(st.gateway.active, 0, 'gateway.active after the load');
    assertEq(st.gateway.queued, 0, 'gateway.queued after the load');
    assertEq(st.engine.state, 'ready', 'engine.state');
    const busy = (st.engine.stats?.slots || []).filter((s) => s.busy);
    assert(!busy.length, `engine slots still busy: ${JSON.stringify(busy)}`);
    const h = await request(`${base}/health`, { timeoutMs: 5000 });
    assertEq(h.status, 200, '/health');
});

// Clients that hang up mid-stream free their slots (the gateway CANCELs them).
await r.check('load/disconnects-free-slots', async () => {
    const n = capacity;
    await Promise.all(Array.from({ length: n }, async (_, i) => {
        // Admission waits for a slot, so queued clients get their 200 once earlier ones hang up.
        const res = await post(500 + i, { model, stream: true, max_tokens: 100000, messages: [{ role: 'user', content: `Hang-up client ${i}` }] }, 60000);
        if (res.statusCode === 200) await new Promise((resolve) => { res.once('data', resolve); res.once('end', resolve); res.once('error', resolve); });
        res.destroy();
    }));
    const end = Date.now() + 15000;
    let st;
    while (Date.now() < end) {
        st = await stats(base, apiKey);
        if (st.gateway.active === 0 && st.gateway.queued === 0) break;
        await sleep(200);
    }
    assertEq(st.gateway.active, 0, 'gateway.active 15 s after the clients hung up');
    assertEq(st.gateway.queued, 0, 'gateway.queued 15 s after the clients hung up');
    const o = await streamClient(999, 8);
    assert(o.status === 200 && !checkAccepted(o), `a request after the hang-ups: ${o.status} ${checkAccepted(o) || ''}`);
}, 60000);

r.finish();
