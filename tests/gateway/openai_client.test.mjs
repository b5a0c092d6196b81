// The gateway through the official `openai` npm client: models, chat (JSON and SSE), usage,
// max_tokens, stop sequences, /v1/completions, OpenAI-shaped errors, and the SDK's automatic
// retry on 503 + Retry-After (through a one-shot 503 proxy this suite starts on loopback).
// The demo model has random weights: the checks look at shapes, counts, finish reasons and
// greedy determinism, never at the meaning of the text.
//
//   node openai_client.test.mjs --base URL [--api-key K]
//   node openai_client.test.mjs --base URL [--api-key K] --faults
//        only the engine-fault checks: kill -9 the engine (pid from /v1/stats) mid-stream and
//        watch the gateway end the stream with an error event, answer /health 503 while it
//        restarts the engine, and serve the next request (the SDK retries 503s). Needs the
//        gateway on this machine; run it last, it restarts the engine. tests/gateway/run.sh
//        gives it an engine with --fault-hold-after 16 (and passes --hold 16): the stream it
//        kills holds after 16 tokens, so the kill lands mid-stream whatever the model says.

import http from 'node:http';
import OpenAI from 'openai';
import { config, Reporter, assert, assertEq, request, authHeaders, readSse, stats, waitHealthy, sleep, readyModel } from './lib.mjs';

const { args, base, apiKey } = config();
const r = new Reporter(args.faults ? 'openai-faults' : 'openai-client');
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: apiKey || 'no-key', maxRetries: 0, timeout: 60000 });

const model = await readyModel(r, 'openai/gateway-ready', base, apiKey, 30000);

const chatBody = (extra = {}) => ({ model, messages: [{ role: 'user', content: 'Write a few words about the sea.' }], temperature: 0, ...extra });

function checkUsage(u, what) {
    assert(u && typeof u === 'object', `${what}: no usage`);
    for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) {
        assert(Number.isInteger(u[k]) && u[k] >= 0, `${what}: usage.${k} = ${JSON.stringify(u[k])}`);
    }
    assert(u.prompt_tokens > 0, `${what}: usage.prompt_tokens is 0`);
    assertEq(u.total_tokens, u.prompt_tokens + u.completion_tokens, `${what}: total_tokens = prompt + completion`);
}

// Collects a chat stream through the SDK: {chunks, content, reasoning, finish, usage, roleFirst}.
async function collectChat(params) {
    const stream = await client.chat.completions.create({ ...params, stream: true });
    const out = { chunks: [], content: '', reasoning: '', finish: null, usage: null, finishes: 0 };
    for await (const chunk of stream) {
        out.chunks.push(chunk);
        if (chunk.usage) out.usage = chunk.usage;
        for (const c of chunk.choices) {
            if (typeof c.delta?.content === 'string') out.content += c.delta.content;
            if (typeof c.delta?.reasoning_content === 'string') out.reasoning += c.delta.reasoning_content;
            if (c.finish_reason) { out.finish = c.finish_reason; out.finishes++; }
        }
    }
    return out;
}

async function expectApiError(name, fn, status, { code, type } = {}) {
    return r.check(name, async () => {
        let err;
        try { await fn(); } catch (e) { err = e; }
        assert(err, `expected HTTP ${status}, the call succeeded`);
        assert(err instanceof OpenAI.APIError, `expected an APIError, got ${err && err.constructor && err.constructor.name}: ${err && err.message}`);
        assertEq(err.status, status, 'HTTP status');
        assert(err.error && typeof err.error.message === 'string' && err.error.message.length, `no error.message in ${JSON.stringify(err.error)}`);
        if (code) assertEq(err.code, code, 'error.code');
        if (type) assertEq(err.type, type, 'error.type');
        return `${err.status} ${err.type || ''} ${err.code || ''}: ${String(err.error.message).slice(0, 100)}`;
    });
}

if (args.faults) await faultChecks(); else await mainChecks();
r.finish();

async function mainChecks() {
    // ------------------------------------------------------------------ models
    await r.check('openai/models-list', async () => {
        const page = await client.models.list();
        const data = page.data;
        assert(Array.isArray(data) && data.length >= 1, 'no models listed');
        const m = data[0];
        assertEq(m.id, model, 'models[0].id');
        assertEq(m.object, 'model', 'models[0].object');
        assertEq(m.owned_by, 'inkling', 'models[0].owned_by');
        assert(Number.isInteger(m.created), `models[0].created = ${m.created}`);
        const raw = await request(`${base}/v1/models`, { headers: authHeaders(apiKey) });
        assertEq(raw.json?.object, 'list', '/v1/models object');
        assert((raw.headers.get('content-type') || '').startsWith('application/json'), `Content-Type ${raw.headers.get('content-type')}`);
    });

    // ------------------------------------------------------------------ chat, JSON
    let greedy = null;
    await r.check('openai/chat-json', async () => {
        const c = await client.chat.completions.create(chatBody({ max_tokens: 24 }));
        assert(typeof c.id === 'string' && c.id.length, 'no id');
        assertEq(c.object, 'chat.completion', 'object');
        assert(Number.isInteger(c.created), 'created is not an integer');
        assertEq(c.model, model, 'model');
        assertEq(c.choices.length, 1, 'choices');
        const ch = c.choices[0];
        assertEq(ch.index, 0, 'choices[0].index');
        assertEq(ch.message.role, 'assistant', 'message.role');
        assert(typeof ch.message.content === 'string', `message.content is ${typeof ch.message.content}`);
        assert(['stop', 'length'].includes(ch.finish_reason), `finish_reason ${ch.finish_reason}`);
        checkUsage(c.usage, 'chat');
        assert(c.usage.completion_tokens >= 1 && c.usage.completion_tokens <= 24, `completion_tokens ${c.usage.completion_tokens} not in [1, 24]`);
        if (ch.finish_reason === 'length') assertEq(c.usage.completion_tokens, 24, 'completion_tokens at finish_reason length');
        greedy = { content: ch.message.content, reasoning: ch.message.reasoning_content || '', finish: ch.finish_reason, usage: c.usage };
        return `${c.usage.prompt_tokens}+${c.usage.completion_tokens} tokens, ${ch.finish_reason}`;
    });

    await r.check('openai/chat-json-deterministic', async () => {
        assert(greedy, 'needs openai/chat-json');
        const c = await client.chat.completions.create(chatBody({ max_tokens: 24 }));
        assertEq(c.choices[0].message.content, greedy.content, 'a second greedy run (temperature 0) differs');
        assertEq(c.usage.prompt_tokens, greedy.usage.prompt_tokens, 'prompt_tokens of the same prompt');
    });

    // ------------------------------------------------------------------ chat, SSE
    await r.check('openai/chat-stream', async () => {
        const s = await collectChat(chatBody({ max_tokens: 24, stream_options: { include_usage: true } }));
        assert(s.chunks.length >= 3, `only ${s.chunks.length} chunks`);
        const first = s.chunks[0];
        assertEq(first.choices[0]?.delta?.role, 'assistant', 'first chunk delta.role');
        const ids = new Set(s.chunks.map((c) => c.id));
        assertEq(ids.size, 1, 'distinct chunk ids');
        for (const c of s.chunks) {
            assertEq(c.object, 'chat.completion.chunk', 'chunk object');
            assertEq(c.created, first.created, 'chunk created');
            assertEq(c.model, model, 'chunk model');
        }
        assertEq(s.finishes, 1, 'chunks carrying a finish_reason');
        assert(['stop', 'length'].includes(s.finish), `finish_reason ${s.finish}`);
        const last = s.chunks[s.chunks.length - 1];
        assertEq(last.choices.length, 0, 'the usage chunk has choices: []');
        checkUsage(last.usage, 'stream usage chunk');
        for (const c of s.chunks.slice(0, -1)) assert(c.usage === null || c.usage === undefined, 'usage before the final chunk');
        const finishIdx = s.chunks.findIndex((c) => c.choices[0]?.finish_reason);
        assertEq(finishIdx, s.chunks.length - 2, 'finish_reason chunk position (just before the usage chunk)');
        if (greedy) {
            assertEq(s.content, greedy.content, 'streamed content vs the JSON answer of the same greedy request');
            assertEq(last.usage.completion_tokens, greedy.usage.completion_tokens, 'completion_tokens stream vs JSON');
        }
        return `${s.chunks.length} chunks`;
    });

    await r.check('openai/chat-stream-raw-sse', async () => {
        const res = await fetch(`${base}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', ...authHeaders(apiKey) },
            body: JSON.stringify(chatBody({ max_tokens: 6, stream: true })),
            signal: AbortSignal.timeout(60000),
        });
        assertEq(res.status, 200, 'status');
        assert((res.headers.get('content-type') || '').startsWith('text/event-stream'), `Content-Type ${res.headers.get('content-type')}`);
        const events = await readSse(res);
        assert(events.length >= 3, `${events.length} events`);
        assertEq(events[events.length - 1].data, '[DONE]', 'last event');
        assertEq(events.filter((e) => e.data === '[DONE]').length, 1, '[DONE] count');
        for (const e of events.slice(0, -1)) {
            const obj = JSON.parse(e.data);
            assert(!obj.error, `error event: ${e.data}`);
            assertEq(e.event, 'message', 'SSE event name');
        }
        const withoutUsage = events.slice(0, -1).map((e) => JSON.parse(e.data));
        assert(withoutUsage.every((c) => c.choices.length === 1), 'without include_usage every chunk has one choice');
    });

    // ------------------------------------------------------------------ max_tokens
    await r.check('openai/max-tokens-length', async () => {
        const c = await client.chat.completions.create(chatBody({ max_tokens: 7 }));
        assertEq(c.choices[0].finish_reason, 'length', 'finish_reason');
        assertEq(c.usage.completion_tokens, 7, 'completion_tokens');
    });
    await r.check('openai/max-completion-tokens-length', async () => {
        const c = await client.chat.completions.create(chatBody({ max_completion_tokens: 5 }));
        assertEq(c.choices[0].finish_reason, 'length', 'finish_reason');
        assertEq(c.usage.completion_tokens, 5, 'completion_tokens');
    });
    await r.check('openai/max-tokens-length-stream', async () => {
        const s = await collectChat(chatBody({ max_tokens: 9, stream_options: { include_usage: true } }));
        assertEq(s.finish, 'length', 'finish_reason');
        assertEq(s.usage?.completion_tokens, 9, 'completion_tokens');
    });
    await r.check('openai/max-tokens-1', async () => {
        const c = await client.chat.completions.create(chatBody({ max_tokens: 1 }));
        assertEq(c.choices[0].finish_reason, 'length', 'finish_reason');
        assertEq(c.usage.completion_tokens, 1, 'completion_tokens');
    });

    // ------------------------------------------------------------------ stop sequences
    // A greedy run gives the text; a piece from its middle becomes the stop sequence; the same
    // greedy request with that stop must give exactly the text before the piece.
    const long = await client.chat.completions.create(chatBody({ max_tokens: 48 })).catch(() => null);
    const text = long?.choices?.[0]?.message?.content || '';
    const pick = () => {
        for (let k = Math.floor(text.length / 2); k < text.length - 3; k++) {
            const s = text.slice(k, k + 3);
            if (s.trim().length === 3) return s;
        }
        return null;
    };
    const stopSeq = pick();

    await r.check('openai/stop-json', async () => {
        assert(stopSeq, `the greedy text is too short to pick a stop sequence from: ${JSON.stringify(text)}`);
        const want = text.slice(0, text.indexOf(stopSeq));
        const c = await client.chat.completions.create(chatBody({ max_tokens: 48, stop: stopSeq }));
        const got = c.choices[0].message.content;
        assert(!got.includes(stopSeq), `the stop sequence ${JSON.stringify(stopSeq)} leaked: ${JSON.stringify(got)}`);
        assertEq(c.choices[0].finish_reason, 'stop', 'finish_reason');
        assertEq(got, want, 'text before the stop sequence');
        assert(c.usage.completion_tokens < long.usage.completion_tokens, 'generation did not end early');
        return `stop ${JSON.stringify(stopSeq)} after ${want.length} chars`;
    });
    await r.check('openai/stop-stream', async () => {
        assert(stopSeq, 'no stop sequence (see openai/stop-json)');
        const want = text.slice(0, text.indexOf(stopSeq));
        const s = await collectChat(chatBody({ max_tokens: 48, stop: [stopSeq], stream_options: { include_usage: true } }));
        assert(!s.content.includes(stopSeq), `the stop sequence leaked: ${JSON.stringify(s.content)}`);
        for (const c of s.chunks) {
            const d = c.choices[0]?.delta?.content || '';
            assert(!d.includes(stopSeq), `a chunk holds the stop sequence: ${JSON.stringify(d)}`);
        }
        assertEq(s.finish, 'stop', 'finish_reason');
        assertEq(s.content, want, 'streamed text before the stop sequence');
    });
    await r.check('openai/stop-four-sequences', async () => {
        assert(stopSeq, 'no stop sequence (see openai/stop-json)');
        const want = text.slice(0, text.indexOf(stopSeq));
        const c = await client.chat.completions.create(chatBody({ max_tokens: 48, stop: ['\u2603never\u2603', stopSeq, 'zzqqxxnever', '\u00a7\u00a7\u00a7'] }));
        assertEq(c.choices[0].message.content, want, 'text before the first stop sequence');
        assertEq(c.choices[0].finish_reason, 'stop', 'finish_reason');
    });
    await r.check('openai/stop-absent', async () => {
        const c = await client.chat.completions.create(chatBody({ max_tokens: 48, stop: ['\u2603never-in-output\u2603'] }));
        assertEq(c.choices[0].message.content, text, 'text with a stop sequence that never appears');
        assertEq(c.choices[0].finish_reason, long.choices[0].finish_reason, 'finish_reason');
    });
    // Stop sequences of every length at every position of the greedy text (streamed): none leaks.
    await r.check('openai/stop-never-leaks', async () => {
        assert(text.length >= 8, 'greedy text too short');
        const seqs = [];
        for (let k = 1; k < text.length - 2 && seqs.length < 6; k += Math.max(1, Math.floor(text.length / 7))) {
            const s = text.slice(k, k + 2 + (k % 4));
            if (s.trim() && !seqs.includes(s)) seqs.push(s);
        }
        for (const s of seqs) {
            const out = await collectChat(chatBody({ max_tokens: 48, stop: s }));
            assert(!out.content.includes(s), `stop ${JSON.stringify(s)} leaked: ${JSON.stringify(out.content)}`);
            assertEq(out.content, text.slice(0, text.indexOf(s)), `text before stop ${JSON.stringify(s)}`);
            assertEq(out.finish, 'stop', `finish_reason with stop ${JSON.stringify(s)}`);
        }
        return `${seqs.length} sequences`;
    }, 120000);

    // ------------------------------------------------------------------ completions
    await r.check('openai/completions-json', async () => {
        const c = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
        assertEq(c.object, 'text_completion', 'object');
        assertEq(c.model, model, 'model');
        assertEq(c.choices.length, 1, 'choices');
        assert(typeof c.choices[0].text === 'string', 'choices[0].text is not a string');
        assertEq(c.choices[0].finish_reason, 'length', 'finish_reason');
        checkUsage(c.usage, 'completions');
        assertEq(c.usage.completion_tokens, 8, 'completion_tokens');
    });
    await r.check('openai/completions-stream', async () => {
        const stream = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
        let finish = null, usage = null, n = 0, textOut = '';
        for await (const c of stream) {
            n++;
            if (c.usage) usage = c.usage;
            for (const ch of c.choices) { textOut += ch.text || ''; if (ch.finish_reason) finish = ch.finish_reason; }
        }
        assertEq(finish, 'length', 'finish_reason');
        checkUsage(usage, 'completions stream');
        assertEq(usage.completion_tokens, 8, 'completion_tokens');
        const json = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
        assertEq(textOut, json.choices[0].text, 'streamed text vs JSON text (greedy)');
        return `${n} chunks`;
    });
    await r.check('openai/completions-stop', async () => {
        const base = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 32, temperature: 0 });
        const t = base.choices[0].text;
        const k = Math.floor(t.length / 2);
        const s = t.slice(k, k + 3);
        assert(s.trim().length, `completion text too short: ${JSON.stringify(t)}`);
        const c = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 32, temperature: 0, stop: [s] });
        assertEq(c.choices[0].text, t.slice(0, t.indexOf(s)), 'text before the stop sequence');
        assertEq(c.choices[0].finish_reason, 'stop', 'finish_reason');
    });

    // ------------------------------------------------------------------ errors through the SDK
    await expectApiError('openai/error-n-2', () => client.chat.completions.create(chatBody({ n: 2, max_tokens: 4 })), 400, { type: 'invalid_request_error' });
    await expectApiError('openai/error-unknown-model', () => client.chat.completions.create(chatBody({ model: 'no-such-model', max_tokens: 4 })), 404);
    await expectApiError('openai/error-unknown-model-completions', () => client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 4 }), 404);
    await expectApiError('openai/error-temperature-string', () => client.chat.completions.create(chatBody({ temperature: 'hot', max_tokens: 4 })), 400, { type: 'invalid_request_error' });
    await expectApiError('openai/error-temperature-range', () => client.chat.completions.create(chatBody({ temperature: 7, max_tokens: 4 })), 400);
    await expectApiError('openai/error-max-tokens-negative', () => client.chat.completions.create(chatBody({ max_tokens: -3 })), 400);
    await expectApiError('openai/error-max-tokens-string', () => client.chat.completions.create(chatBody({ max_tokens: '10' })), 400);
    await expectApiError('openai/error-messages-string', () => client.chat.completions.create({ model, messages: 'hello', max_tokens: 4 }), 400);
    await expectApiError('openai/error-messages-empty', () => client.chat.completions.create({ model, messages: [], max_tokens: 4 }), 400);
    await expectApiError('openai/error-stop-five', () => client.chat.completions.create(chatBody({ stop: ['a', 'b', 'c', 'd', 'e'], max_tokens: 4 })), 400);
    await expectApiError('openai/error-stream-type', () => client.chat.completions.create(chatBody({ stream: 'yes', max_tokens: 4 })), 400);
    await expectApiError('openai/error-completions-prompt-type', () => client.completions.create({ model, prompt: { x: 1 }, max_tokens: 4 }), 400);
    if (apiKey) {
        const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: apiKey + '-wrong', maxRetries: 0, timeout: 10000 });
        await expectApiError('openai/error-wrong-key', () => bad.models.list(), 401);
        await expectApiError('openai/error-wrong-key-chat', () => bad.chat.completions.create(chatBody({ max_tokens: 4 })), 401);
    }

    await r.check('openai/error-context-length-exceeded', async () => {
        const st = await stats(base, apiKey);
        const ctx = st.engine?.info?.context;
        assert(Number.isInteger(ctx) && ctx > 0, `engine.info.context is ${ctx}`);
        assert(ctx <= 262144, `context ${ctx} is too large to overflow with a test prompt`);
        // " hello" is one o200k token: ctx + 64 of them overflow the slot.
        const prompt = 'hello' + ' hello'.repeat(ctx + 64);
        let err;
        try { await client.chat.completions.create({ model, messages: [{ role: 'user', content: prompt }], max_tokens: 4 }); } catch (e) { err = e; }
        assert(err instanceof OpenAI.APIError, `expected a 400, got ${err ? err.message : 'a completion'}`);
        assertEq(err.status, 400, 'HTTP status');
        assertEq(err.code, 'context_length_exceeded', 'error.code');
        // The stream form answers the same 400 before any SSE byte (HTTP 200 waits for ACCEPT).
        let err2;
        try { await collectChat({ model, messages: [{ role: 'user', content: prompt }], max_tokens: 4 }); } catch (e) { err2 = e; }
        assert(err2 instanceof OpenAI.APIError && err2.status === 400, `stream: expected a 400, got ${err2 ? (err2.status || '') + ' ' + err2.message : 'a stream'}`);
        assertEq(err2.code, 'context_length_exceeded', 'stream error.code');
        return `context ${ctx}`;
    });

    await r.check('openai/error-object-shape', async () => {
        const res = await request(`${base}/v1/chat/completions`, {
            method: 'POST', headers: { 'Content-Type': 'application/json', ...authHeaders(apiKey) },
            body: chatBody({ n: 3, max_tokens: 4 }),
        });
        assertEq(res.status, 400, 'status');
        assert((res.headers.get('content-type') || '').startsWith('application/json'), `Content-Type ${res.headers.get('content-type')}`);
        const e = res.json?.error;
        assert(e && typeof e === 'object', `no error object: ${res.text.slice(0, 200)}`);
        for (const k of ['message', 'type', 'param', 'code']) assert(k in e, `error.${k} missing: ${res.text.slice(0, 200)}`);
        assert(typeof e.message === 'string' && e.message, 'error.message empty');
        assert(typeof e.type === 'string' && e.type, 'error.type empty');
    });

    // ------------------------------------------------------------------ SDK retry on 503
    await r.check('openai/sdk-retries-503', async () => {
        const proxy = await oneShot503Proxy(base);
        try {
            const c503 = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: apiKey || 'no-key', maxRetries: 2, timeout: 60000 });
            const t0 = Date.now();
            const c = await c503.chat.completions.create(chatBody({ max_tokens: 4 }));
            const ms = Date.now() - t0;
            assertEq(c.choices[0].finish_reason, 'length', 'finish_reason after the retry');
            assertEq(proxy.seen(), 2, 'requests the proxy saw (503, then the retry)');
            assert(ms >= 900, `the SDK retried after ${ms} ms, not after Retry-After: 1`);
            return `retried after ${ms} ms`;
        } finally {
            await proxy.close();
        }
    });
    await r.check('openai/sdk-no-retry-when-disabled', async () => {
        const proxy = await oneShot503Proxy(base);
        try {
            const c0 = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: apiKey || 'no-key', maxRetries: 0, timeout: 60000 });
            let err;
            try { await c0.chat.completions.create(chatBody({ max_tokens: 4 })); } catch (e) { err = e; }
            assert(err instanceof OpenAI.APIError && err.status === 503, `expected the 503, got ${err ? err.message : 'a completion'}`);
            assertEq(proxy.seen(), 1, 'requests the proxy saw');
        } finally {
            await proxy.close();
        }
    });
}

// A loopback HTTP server that answers its first request with 503 + Retry-After: 1 and an
// OpenAI error object, and forwards every later request to the gateway unchanged.
function oneShot503Proxy(target) {
    const t = new URL(target);
    let n = 0;
    const server = http.createServer((req, res) => {
        n++;
        if (n === 1) {
            req.resume();
            const body = JSON.stringify({ error: { message: 'engine restarting (test proxy)', type: 'unavailable_error', param: null, code: null } });
            res.writeHead(503, { 'Content-Type': 'application/json', 'Retry-After': '1', 'Content-Length': Buffer.byteLength(body) });
            res.end(body);
            return;
        }
        const up = http.request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: { ...req.headers, host: t.host } }, (ures) => {
            res.writeHead(ures.statusCode, ures.headers);
            ures.pipe(res);
        });
        up.on('error', (err) => { res.writeHead(502); res.end(String(err)); });
        req.pipe(up);
    });
    return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        seen: () => n,
        close: () => new Promise((done) => { server.closeAllConnections?.(); server.close(() => done()); }),
    })));
}

async function faultChecks() {
    let before;
    await r.check('faults/engine-pid', async () => {
        before = await stats(base, apiKey);
        const pid = before.engine?.pid;
        assert(Number.isInteger(pid) && pid > 1, `engine.pid is ${pid}`);
        try { process.kill(pid, 0); } catch (e) { throw new Error(`engine pid ${pid} is not a process here (${e.code}): run the gateway on this machine`); }
        assertEq(before.engine.state, 'ready', 'engine.state');
        return `pid ${pid}, ${before.engine.restarts} restarts`;
    });
    if (!before) return;

    // Mid-stream: the stream must end with an error event and [DONE], never a silent cut.
    let healthSaw503 = null;
    await r.check('faults/kill-mid-stream-error-event', async () => {
        const res = await fetch(`${base}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', ...authHeaders(apiKey) },
            body: JSON.stringify(chatBody({ max_tokens: 100000, stream: true })),
            signal: AbortSignal.timeout(60000),
        });
        assertEq(res.status, 200, 'status');
        const decoder = new TextDecoder();
        let raw = '';
        let killed = false;
        const health = [];
        for await (const chunk of res.body) {
            raw += decoder.decode(chunk, { stream: true });
            if (!killed && /"content":"[^"]/.test(raw)) {
                process.kill(before.engine.pid, 'SIGKILL');
                killed = true;
                // Watch /health while the gateway notices and restarts the engine.
                watchHealth(health);
            }
        }
        assert(killed, 'the stream ended before any content');
        const events = raw.split(/\n\n/).filter(Boolean);
        const last = events[events.length - 1];
        assertEq(last.trim(), 'data: [DONE]', 'last event');
        const errEvent = events.find((e) => e.startsWith('data: {') && JSON.parse(e.slice(6)).error);
        assert(errEvent, `no error event before [DONE]; tail: ${raw.slice(-300)}`);
        healthSaw503 = health;
        return JSON.parse(errEvent.slice(6)).error.message;
    }, 90000);

    await r.check('faults/health-503-during-restart', async () => {
        // watchHealth polls every 10 ms for up to 30 s, until it sees 200 after a 503.
        const end = Date.now() + 35000;
        while (healthSaw503 && !healthSaw503.done && Date.now() < end) await sleep(50);
        assert(healthSaw503, 'no health watch (the previous check failed)');
        const bad = healthSaw503.find((h) => h.status === 503);
        assert(bad, `never saw 503 on /health after the kill (saw ${[...new Set(healthSaw503.map((h) => h.status))].join(',')})`);
        assert(bad.retryAfter, '/health 503 without Retry-After');
        assert(['starting', 'restarting', 'failed'].includes(bad.body?.status), `/health 503 body ${JSON.stringify(bad.body)}`);
        assert(healthSaw503.done, '/health did not come back to 200 within 30 s');
        return `${healthSaw503.filter((h) => h.status === 503).length} polls answered 503`;
    }, 40000);

    await r.check('faults/next-request-succeeds', async () => {
        const c = new OpenAI({ baseURL: `${base}/v1`, apiKey: apiKey || 'no-key', maxRetries: 6, timeout: 60000 });
        const out = await c.chat.completions.create(chatBody({ max_tokens: 5 }));
        assertEq(out.choices[0].finish_reason, 'length', 'finish_reason');
        assertEq(out.usage.completion_tokens, 5, 'completion_tokens');
    }, 90000);

    // Killed while idle: the SDK (with retries) gets through while the engine restarts.
    await r.check('faults/kill-idle-sdk-retries-through', async () => {
        await waitHealthy(base, 30000);
        const st = await stats(base, apiKey);
        process.kill(st.engine.pid, 'SIGKILL');
        const c = new OpenAI({ baseURL: `${base}/v1`, apiKey: apiKey || 'no-key', maxRetries: 6, timeout: 60000 });
        const out = await c.chat.completions.create(chatBody({ max_tokens: 3 }));
        assertEq(out.usage.completion_tokens, 3, 'completion_tokens');
    }, 90000);

    await r.check('faults/restarts-counted', async () => {
        await waitHealthy(base, 30000);
        const after = await stats(base, apiKey);
        assert(after.engine.restarts >= before.engine.restarts + 2, `engine.restarts ${before.engine.restarts} → ${after.engine.restarts} after two kills`);
        assert(after.engine.pid !== before.engine.pid, 'engine.pid unchanged after the kills');
        assertEq(after.engine.state, 'ready', 'engine.state');
        const m = await request(`${base}/metrics`, { headers: authHeaders(apiKey) });
        assertEq(m.status, 200, '/metrics status');
        return `restarts ${before.engine.restarts} → ${after.engine.restarts}`;
    }, 40000);
}

// Polls /health every 10 ms into `out` until a 200 follows a 503 (or 30 s pass); sets out.done.
async function watchHealth(out) {
    const end = Date.now() + 30000;
    let saw503 = false;
    while (Date.now() < end) {
        try {
            const h = await request(`${base}/health`, { timeoutMs: 2000 });
            out.push({ status: h.status, retryAfter: h.headers.get('retry-after'), body: h.json });
            if (h.status === 503) saw503 = true;
            if (h.status === 200 && saw503) { out.done = true; return; }
        } catch (err) {
            out.push({ status: 'error', error: err.message });
        }
        await sleep(10);
    }
}
