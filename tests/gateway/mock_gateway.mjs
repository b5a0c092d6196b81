// A stand-in for build/inkling-gateway with the same HTTP contract and a fake engine (random
// words, a few ms per token), for developing the web UI and the suites without a model:
//
//   node tests/gateway/mock_gateway.mjs [--port 8000] [--api-key K] [--slots 2] [--max-queue 4]
//        [--ctx 4096] [--body-cap BYTES] [--token-ms 5] [--fail-first-503 N]
//        [--experts ROWSxCOLS] [--device]    (a bigger residency map; fake device memory)
//
// It serves gateway/web/ from disk. It is not a test oracle for the C++ gateway, only a
// convenient peer: when it and the real gateway disagree, the contract (issue 7) decides.

import http from 'node:http';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from './lib.mjs';

const args = parseArgs();
const here = path.dirname(fileURLToPath(import.meta.url));
const webDir = path.resolve(args.web || path.join(here, '../../gateway/web'));
const port = Number(args.port ?? 8000);
const apiKey = args['api-key'] || '';
const slots = Number(args.slots ?? 2);
const maxQueue = Number(args['max-queue'] ?? 4);
const ctx = Number(args.ctx ?? 4096);
const bodyCap = Number(args['body-cap'] ?? 8 * 1024 * 1024);
const tokenMs = Number(args['token-ms'] ?? 5);
let fail503 = Number(args['fail-first-503'] ?? 0);
const MODEL = 'demo-model';
const started = Date.now();

const g = { requests_total: 0, active: 0, queued: 0, restarts: 0, device_losses: 0, tokens_in: 0, tokens_out: 0 };
const es = { tokens_generated: 0, decode_tok_s: 0, prefill_tok_s: 0, requests_done: 0 };
const [mapRows, mapCols] = String(args.experts || '3x8').split('x').map(Number);
const heat = new Uint8Array(mapRows * mapCols);
const tiers = new Uint8Array(mapRows * mapCols).fill(1);
if (args.experts) for (let i = 0; i < tiers.length; i++) tiers[i] = (i * 7919) % 5 === 0 ? 0 : (args.device && (i * 104729) % 3 === 0 ? 2 : 1);
const waiters = [];

// The fake engine is a `sleep` child: kill it and the mock behaves like the gateway after an
// engine crash (streams end with an error event, /health 503, a new child after 800 ms).
const engine = { state: 'starting', pid: 0, restarts: 0, reason: '', child: null, streams: new Set() };
function startEngine() {
    const child = spawn('sleep', ['1000000'], { stdio: 'ignore' });
    engine.child = child;
    engine.pid = child.pid;
    engine.state = 'ready';
    child.on('exit', (code, signal) => {
        if (engine.child !== child) return;
        engine.state = 'restarting';
        engine.reason = `engine exited (${signal || code})`;
        engine.restarts++;
        g.restarts++;
        for (const kill of engine.streams) kill();
        setTimeout(startEngine, 800);
    });
}
startEngine();
process.on('exit', () => engine.child?.kill('SIGKILL'));

const WORDS = 'the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her she there'.split(' ');

function rng(seed) {
    let s = seed >>> 0 || 1;
    return () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s / 4294967296; };
}
function hash(str) {
    let h = 2166136261;
    for (const ch of str) { h ^= ch.codePointAt(0); h = Math.imul(h, 16777619) >>> 0; }
    return h;
}

class HttpError extends Error {
    constructor(status, message, { type, code = null, param = null, retryAfter } = {}) {
        super(message);
        this.status = status;
        this.type = type || (status === 401 ? 'authentication_error' : status === 429 ? 'rate_limit_error' : status >= 500 ? 'server_error' : 'invalid_request_error');
        this.code = code;
        this.param = param;
        this.retryAfter = retryAfter;
    }
}

function sendJson(res, status, obj, extra = {}) {
    const body = JSON.stringify(obj);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), ...extra });
    res.end(body);
}
function sendError(res, err) {
    const extra = err.retryAfter ? { 'Retry-After': String(err.retryAfter) } : {};
    sendJson(res, err.status, { error: { message: err.message, type: err.type, param: err.param, code: err.code } }, extra);
}

function authorized(req) {
    if (!apiKey) return true;
    const a = req.headers.authorization || '';
    return a === `Bearer ${apiKey}` || req.headers['x-api-key'] === apiKey;
}

const isInt = (v) => Number.isInteger(v);
const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
function bad(param, message) { throw new HttpError(400, message, { param }); }

function commonParams(body) {
    if (body.model === undefined) bad('model', "'model' is required");
    if (typeof body.model !== 'string') bad('model', "'model' must be a string");
    if (body.model !== MODEL) throw new HttpError(404, `The model '${body.model}' does not exist`, { param: 'model', code: 'model_not_found' });
    const p = { maxTokens: 256, temperature: 1, topP: 1, stop: [], stream: false, includeUsage: false, seed: null };
    for (const k of ['max_tokens', 'max_completion_tokens']) {
        if (body[k] === undefined || body[k] === null) continue;
        if (!isInt(body[k]) || body[k] < 1 || body[k] > 1048576) bad(k, `'${k}' must be an integer in [1, 1048576]`);
        p.maxTokens = body[k];
    }
    if (body.temperature !== undefined && body.temperature !== null) {
        if (!isNum(body.temperature) || body.temperature < 0 || body.temperature > 2) bad('temperature', "'temperature' must be a number in [0, 2]");
        p.temperature = body.temperature;
    }
    if (body.top_p !== undefined && body.top_p !== null) {
        if (!isNum(body.top_p) || body.top_p <= 0 || body.top_p > 1) bad('top_p', "'top_p' must be a number in (0, 1]");
        p.topP = body.top_p;
    }
    if (body.seed !== undefined && body.seed !== null) {
        if (!isInt(body.seed)) bad('seed', "'seed' must be an integer");
        p.seed = body.seed;
    }
    if (body.n !== undefined && body.n !== null) {
        if (!isInt(body.n)) bad('n', "'n' must be an integer");
        if (body.n !== 1) bad('n', "only n=1 is supported");
    }
    if (body.stop !== undefined && body.stop !== null) {
        const s = typeof body.stop === 'string' ? [body.stop] : body.stop;
        if (!Array.isArray(s) || s.some((x) => typeof x !== 'string' || x === '')) bad('stop', "'stop' must be a string or an array of non-empty strings");
        if (s.length > 4) bad('stop', "'stop' takes at most 4 sequences");
        p.stop = s;
    }
    if (body.stream !== undefined && body.stream !== null) {
        if (typeof body.stream !== 'boolean') bad('stream', "'stream' must be a boolean");
        p.stream = body.stream;
    }
    if (body.stream_options !== undefined && body.stream_options !== null) {
        const so = body.stream_options;
        if (typeof so !== 'object' || Array.isArray(so)) bad('stream_options', "'stream_options' must be an object");
        if (so.include_usage !== undefined && typeof so.include_usage !== 'boolean') bad('stream_options.include_usage', "'include_usage' must be a boolean");
        p.includeUsage = so.include_usage === true;
    }
    if (body.reasoning_effort !== undefined && body.reasoning_effort !== null &&
        !['none', 'minimal', 'low', 'medium', 'high', 'max'].includes(body.reasoning_effort)) bad('reasoning_effort', "bad 'reasoning_effort'");
    if (body.tools !== undefined && body.tools !== null && (!Array.isArray(body.tools) || body.tools.length)) bad('tools', 'tools are not supported by Inkling');
    for (const k of ['presence_penalty', 'frequency_penalty']) {
        if (body[k] !== undefined && body[k] !== null && (!isNum(body[k]) || body[k] < -2 || body[k] > 2)) bad(k, `'${k}' must be a number in [-2, 2]`);
    }
    return p;
}

function chatPrompt(body) {
    if (!Array.isArray(body.messages)) bad('messages', "'messages' must be an array");
    if (!body.messages.length) bad('messages', "'messages' must not be empty");
    let text = '';
    body.messages.forEach((m, i) => {
        if (!m || typeof m !== 'object' || Array.isArray(m)) bad(`messages[${i}]`, 'a message must be an object');
        if (!['system', 'developer', 'user', 'assistant'].includes(m.role)) bad(`messages[${i}].role`, 'bad role');
        if (typeof m.content === 'string') { text += m.content + '\n'; return; }
        if (!Array.isArray(m.content)) bad(`messages[${i}].content`, "'content' must be a string or an array of parts");
        m.content.forEach((part, j) => {
            const where = `messages[${i}].content[${j}]`;
            if (!part || typeof part !== 'object') bad(where, 'a content part must be an object');
            if (part.type === 'text') {
                if (typeof part.text !== 'string') bad(where + '.text', "'text' must be a string");
                text += part.text + '\n';
            } else if (part.type === 'input_audio') {
                const a = part.input_audio;
                if (!a || typeof a.data !== 'string' || a.format !== 'wav') bad(where, "input_audio needs {data: base64 WAV, format: 'wav'}");
                if (!/^[A-Za-z0-9+/]*={0,2}$/.test(a.data)) bad(where, 'input_audio.data is not base64');
                const wav = Buffer.from(a.data, 'base64');
                if (wav.length < 12 || wav.toString('latin1', 0, 4) !== 'RIFF' || wav.toString('latin1', 8, 12) !== 'WAVE') bad(where, 'input_audio is not a RIFF/WAVE file');
                if (wav.length < 44 || wav.toString('latin1', 12, 16) !== 'fmt ') bad(where, 'input_audio has no fmt chunk');
                if (![1, 3].includes(wav.readUInt16LE(20))) bad(where, `WAV encoding ${wav.readUInt16LE(20)} is not supported`);
                if (wav.readUInt32LE(24) === 0) bad(where, 'WAV sample rate 0');
                text += ' <audio>';
            } else bad(where + '.type', `content part type '${part.type}' is not supported`);
        });
    });
    if (text.includes('\0')) bad('messages', 'NUL bytes are not allowed in prompts');
    if (!text.isWellFormed()) bad('messages', 'the text holds a lone UTF-16 surrogate');
    return text;
}

function countTokens(text) { return Math.max(1, text.split(/\s+/).filter(Boolean).length); }

// Admission: up to `slots` run; up to `maxQueue` wait; the rest get 429.
async function admit() {
    if (g.active < slots) { g.active++; return; }
    if (g.queued >= maxQueue) throw new HttpError(429, 'the server is busy: the queue is full', { retryAfter: 1, code: 'queue_full' });
    g.queued++;
    await new Promise((resolve) => waiters.push(resolve));
    g.queued--;
    g.active++;
}
function release() {
    g.active--;
    const w = waiters.shift();
    if (w) w();
}

// Generates pieces of text; stops on max tokens or a stop sequence (held back so no partial
// stop text leaks).
async function* generate(prompt, p, aborted) {
    const rand = rng(p.temperature === 0 ? hash(prompt) : (p.seed ?? Date.now()) >>> 0);
    let text = '';
    let sent = 0;
    const hold = Math.max(0, ...p.stop.map((s) => s.length - 1));
    for (let i = 0; i < p.maxTokens; i++) {
        if (aborted()) return;
        await new Promise((r) => setTimeout(r, tokenMs));
        const w = WORDS[Math.floor(rand() * WORDS.length)];
        text += (i ? ' ' : '') + w;
        es.tokens_generated++; g.tokens_out++;
        for (let k = 0; k < 8; k++) heat[Math.floor(rand() * heat.length)] = 63;
        const idx = p.stop.map((s) => text.indexOf(s)).filter((x) => x >= 0);
        if (idx.length) {
            const cut = Math.min(...idx);
            if (cut > sent) yield { piece: text.slice(sent, cut), tokens: i + 1 };
            yield { finish: 'stop', tokens: i + 1 };
            return;
        }
        const safe = text.length - hold;
        if (safe > sent) { yield { piece: text.slice(sent, safe), tokens: i + 1 }; sent = safe; }
        else yield { piece: '', tokens: i + 1 };
    }
    if (text.length > sent) yield { piece: text.slice(sent), tokens: p.maxTokens };
    yield { finish: 'length', tokens: p.maxTokens };
}

async function completion(req, res, body, chat) {
    const p = commonParams(body);
    let prompt;
    if (chat) prompt = chatPrompt(body);
    else {
        if (body.prompt === undefined) bad('prompt', "'prompt' is required");
        if (typeof body.prompt !== 'string') bad('prompt', "'prompt' must be a string");
        if (body.prompt.includes('\0')) bad('prompt', 'NUL bytes are not allowed in prompts');
        prompt = body.prompt;
    }
    const promptTokens = countTokens(prompt);
    if (promptTokens + 1 > ctx) {
        throw new HttpError(400, `This model's maximum context length is ${ctx} tokens; the prompt has ${promptTokens}`, { code: 'context_length_exceeded', param: 'messages' });
    }
    if (fail503 > 0) { fail503--; throw new HttpError(503, 'the engine is restarting', { retryAfter: 1, type: 'unavailable_error' }); }
    if (engine.state !== 'ready') throw new HttpError(503, `the engine is ${engine.state}`, { retryAfter: 1, type: 'unavailable_error' });
    await admit();
    g.tokens_in += promptTokens;
    let closed = false;
    let died = false;
    const onDeath = () => { died = true; };
    engine.streams.add(onDeath);
    res.on('close', () => { closed = true; });
    const id = (chat ? 'chatcmpl-' : 'cmpl-') + Math.random().toString(36).slice(2);
    const created = Math.floor(Date.now() / 1000);
    const object = chat ? (p.stream ? 'chat.completion.chunk' : 'chat.completion') : 'text_completion';
    const t0 = Date.now();
    let tokens = 0;
    let finish = 'length';
    try {
        if (p.stream) {
            res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
            const chunk = (choice) => res.write(`data: ${JSON.stringify({ id, object, created, model: MODEL, choices: [choice], ...(p.includeUsage ? { usage: null } : {}) })}\n\n`);
            if (chat) chunk({ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null });
            for await (const ev of generate(prompt, p, () => closed || died)) {
                tokens = ev.tokens;
                if (ev.finish) { finish = ev.finish; break; }
                if (!ev.piece) continue;
                chunk(chat ? { index: 0, delta: { content: ev.piece }, finish_reason: null } : { index: 0, text: ev.piece, finish_reason: null });
            }
            if (closed) return;
            if (died) {
                res.write(`data: ${JSON.stringify({ error: { message: 'the engine died mid-stream', type: 'server_error', param: null, code: 'engine_died' } })}\n\n`);
                res.end('data: [DONE]\n\n');
                return;
            }
            chunk(chat ? { index: 0, delta: {}, finish_reason: finish } : { index: 0, text: '', finish_reason: finish });
            if (p.includeUsage) {
                res.write(`data: ${JSON.stringify({ id, object, created, model: MODEL, choices: [], usage: { prompt_tokens: promptTokens, completion_tokens: tokens, total_tokens: promptTokens + tokens } })}\n\n`);
            }
            res.end('data: [DONE]\n\n');
        } else {
            let text = '';
            for await (const ev of generate(prompt, p, () => closed || died)) {
                tokens = ev.tokens;
                if (ev.finish) { finish = ev.finish; break; }
                text += ev.piece;
            }
            if (closed) return;
            if (died) throw new HttpError(503, 'the engine died', { retryAfter: 1 });
            const choice = chat ? { index: 0, message: { role: 'assistant', content: text }, finish_reason: finish, logprobs: null }
                : { index: 0, text, finish_reason: finish, logprobs: null };
            sendJson(res, 200, { id, object, created, model: MODEL, choices: [choice], usage: { prompt_tokens: promptTokens, completion_tokens: tokens, total_tokens: promptTokens + tokens } });
        }
    } finally {
        const secs = (Date.now() - t0) / 1000;
        es.decode_tok_s = secs > 0 ? tokens / secs : 0;
        es.prefill_tok_s = promptTokens / 0.002;
        es.requests_done++;
        engine.streams.delete(onDeath);
        release();
    }
}

function statsObject() {
    for (let i = 0; i < heat.length; i++) if (heat[i] > 0) heat[i]--;
    let map = '';
    for (let i = 0; i < heat.length; i++) map += ((tiers[i] << 6) | heat[i]).toString(16).padStart(2, '0');
    return {
        gateway: { uptime_s: (Date.now() - started) / 1000, requests_total: g.requests_total, active: g.active, queued: g.queued, queue_limit: maxQueue,
            restarts: g.restarts, device_losses: g.device_losses, tokens_in: g.tokens_in, tokens_out: g.tokens_out },
        engine: {
            state: engine.state, pid: engine.pid, restarts: engine.restarts, reason: engine.reason,
            info: { kind: 'info', model: MODEL, backend: 'cpu', isa: 'mock', slots, context: ctx, layers: 4 },
            stats: { kind: 'stats', rss_gb: process.memoryUsage().rss / 1e9, active: g.active, decode_tok_s: es.decode_tok_s, prefill_tok_s: es.prefill_tok_s,
                tokens_generated: es.tokens_generated, requests_done: es.requests_done,
                slots: Array.from({ length: slots }, (_, i) => ({ slot: i, busy: i < g.active, request: '', positions: 0, tainted: false })),
                experts: { rows: mapRows, cols: mapCols, map, resident: tiers.filter((t) => t > 0).length, total: tiers.length },
                ...(args.device ? { device: { memory_used: 5.2e9 + g.active * 1e8, memory_budget: 8e9 } } : {}),
                phases_ms: { attention: 1.5, experts: 4.2, router: 0.3, lm_head: 2.0 } },
        },
    };
}

const STATIC = { '/': ['index.html', 'text/html; charset=utf-8'], '/app.js': ['app.js', 'text/javascript; charset=utf-8'], '/style.css': ['style.css', 'text/css; charset=utf-8'] };

const server = http.createServer({ connectionsCheckingInterval: 1000, headersTimeout: 5000, requestTimeout: 10000 }, async (req, res) => {
    g.requests_total++;
    const url = req.url.split('?')[0];
    try {
        // What Beast leaves to the application: version, header count, Host (RFC 9112 §3.2 and
        // the DNS-rebinding guard: loopback names only).
        if (req.httpVersionMajor !== 1) { res.setHeader('Connection', 'close'); throw new HttpError(400, 'HTTP/1.x only'); }
        if (req.rawHeaders.length / 2 > 100) { res.setHeader('Connection', 'close'); throw new HttpError(431, 'too many header fields'); }
        const hosts = req.rawHeaders.filter((_, i) => i % 2 === 0 && req.rawHeaders[i].toLowerCase() === 'host').length;
        if (hosts !== 1) throw new HttpError(400, 'exactly one Host header is required');
        const hostName = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.exec(req.headers.host || '');
        if (!hostName) throw new HttpError(400, 'bad Host header');
        if (!['127.0.0.1', 'localhost', '[::1]'].includes(hostName[1].toLowerCase())) throw new HttpError(421, `Host '${hostName[1]}' is not served here`);
        if (STATIC[url]) {
            if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'method not allowed');
            const [file, type] = STATIC[url];
            const data = fs.readFileSync(path.join(webDir, file));
            res.writeHead(200, { 'Content-Type': type, 'Content-Length': data.length, 'Cache-Control': 'no-cache',
                'Content-Security-Policy': "default-src 'self'; frame-ancestors 'none'", 'X-Content-Type-Options': 'nosniff' });
            res.end(req.method === 'HEAD' ? undefined : data);
            return;
        }
        if (url === '/health') {
            if (req.method !== 'GET') throw new HttpError(405, 'method not allowed');
            if (engine.state === 'ready') sendJson(res, 200, { status: 'ok' });
            else sendJson(res, 503, { status: engine.state, reason: engine.reason }, { 'Retry-After': '1' });
            return;
        }
        const known = ['/v1/models', '/v1/stats', '/metrics', '/v1/chat/completions', '/v1/completions'];
        if (!known.includes(url)) throw new HttpError(404, `no route ${url}`);
        if (!authorized(req)) throw new HttpError(401, 'missing or wrong API key', { code: 'invalid_api_key' });
        const post = url.endsWith('completions');
        if (req.method !== (post ? 'POST' : 'GET')) throw new HttpError(405, `${req.method} is not allowed on ${url}`);
        if (url === '/v1/models') return sendJson(res, 200, { object: 'list', data: [{ id: MODEL, object: 'model', created: Math.floor(started / 1000), owned_by: 'inkling' }] });
        if (url === '/v1/stats') return sendJson(res, 200, statsObject());
        if (url === '/metrics') {
            res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' });
            res.end(`# TYPE inkling_requests_total counter\ninkling_requests_total ${g.requests_total}\n`);
            return;
        }
        const declared = Number(req.headers['content-length'] ?? 0);
        if (declared > bodyCap) { res.setHeader('Connection', 'close'); throw new HttpError(413, `the body is larger than ${bodyCap} bytes`); }
        const chunks = [];
        let size = 0;
        const whole = await new Promise((resolve) => {
            req.on('data', (c) => {
                size += c.length;
                if (size > bodyCap) { req.removeAllListeners('data'); req.pause(); resolve(null); } else chunks.push(c);
            });
            req.on('end', () => resolve(Buffer.concat(chunks)));
            req.on('error', () => resolve(undefined));
        });
        if (whole === undefined) return;
        if (whole === null) { res.setHeader('Connection', 'close'); throw new HttpError(413, `the body is larger than ${bodyCap} bytes`); }
        let text;
        try { text = new TextDecoder('utf-8', { fatal: true }).decode(whole); } catch { throw new HttpError(400, 'the body is not UTF-8'); }
        let body;
        try { body = JSON.parse(text); } catch (e) { throw new HttpError(400, `the body is not JSON: ${e.message}`); }
        if (!body || typeof body !== 'object' || Array.isArray(body)) throw new HttpError(400, 'the body must be a JSON object');
        await completion(req, res, body, url === '/v1/chat/completions');
    } catch (err) {
        if (req.socket === null || req.socket.destroyed) return;   // the client went away
        if (!(err instanceof HttpError)) { console.error(err); err = new HttpError(500, 'internal error'); }
        if (res.headersSent) { res.end(); return; }
        sendError(res, err);
        if (err.status === 413) req.socket?.end();
    }
});
server.listen(port, '127.0.0.1', () => console.error(`mock gateway on http://127.0.0.1:${server.address().port}`));
process.on('SIGTERM', () => {
    engine.child?.kill('SIGTERM');
    server.close(() => process.exit(0));
    server.closeIdleConnections();
    setTimeout(() => process.exit(0), 5000).unref();
});
