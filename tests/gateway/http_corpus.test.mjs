// A corpus of malformed HTTP requests sent over raw sockets (node:net): broken request lines
// and headers, NUL bytes, bad framing, wrong methods and paths, missing or wrong API keys, bad
// JSON, broken UTF-8, a wrong type for every request field, bodies past the size cap, and
// slowloris-style partial requests. Each must get a 4xx (or, where the bytes are not HTTP, a
// closed connection), never a 2xx or 5xx; the gateway must answer /health 200 after every one.
// Deterministic: fixed bytes, one request at a time (the slow ones together, at the end).
//
//   node http_corpus.test.mjs --base URL [--api-key K] [--body-cap BYTES] [--slow-limit S]
//     --body-cap   the gateway's request body cap (default 64 MiB): the streamed-body cases
//                  send a little more than this
//     --slow-limit seconds within which the gateway must cut a stalled or trickling request
//                  off (default 40)

import net from 'node:net';
import { config, Reporter, request, authHeaders, sleep, readyModel } from './lib.mjs';

const { args, base, apiKey, host, port } = config();
const r = new Reporter('http-corpus');
const bodyCap = Number(args['body-cap'] || process.env.INKLING_GATEWAY_BODY_CAP || 64 * 1024 * 1024);
const slowLimitMs = 1000 * Number(args['slow-limit'] || 40);
const CASE_TIMEOUT_MS = 15000;
const hostHeader = `${host}:${port}`;

const model = await readyModel(r, 'http-corpus/gateway-ready', base, apiKey, 30000);

// ---------------------------------------------------------------- raw exchange

// Parses what came back: {status, headers, body} (status undefined when no status line).
// Skips interim 1xx responses. complete: the response is fully read per its framing.
function parseResponse(buf, head) {
    let off = 0;
    for (;;) {
        const end = buf.indexOf('\r\n\r\n', off);
        if (end < 0) return { complete: false, status: statusOf(buf.subarray(off)) };
        const lines = buf.subarray(off, end).toString('latin1').split('\r\n');
        const m = /^HTTP\/\d\.\d (\d{3})/.exec(lines[0]);
        if (!m) return { complete: false, status: undefined, garbage: true };
        const status = Number(m[1]);
        const headers = {};
        for (const l of lines.slice(1)) {
            const c = l.indexOf(':');
            if (c > 0) headers[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
        }
        const bodyStart = end + 4;
        if (status >= 100 && status < 200) { off = bodyStart; continue; }
        if (head || status === 204 || status === 304) return { complete: true, status, headers, body: '' };
        if (headers['content-length'] !== undefined) {
            const n = Number(headers['content-length']);
            const body = buf.subarray(bodyStart, bodyStart + n);
            return { complete: buf.length - bodyStart >= n, status, headers, body: body.toString('utf8') };
        }
        if (/chunked/i.test(headers['transfer-encoding'] || '')) {
            const rest = buf.subarray(bodyStart).toString('latin1');
            return { complete: /(^|\r\n)0\r\n(.*\r\n)*\r\n$/.test(rest), status, headers, body: rest };
        }
        return { complete: false, status, headers, body: buf.subarray(bodyStart).toString('utf8') };
    }
}
function statusOf(b) {
    const m = /^HTTP\/\d\.\d (\d{3})/.exec(b.toString('latin1'));
    return m ? Number(m[1]) : undefined;
}

// Sends `steps` (Buffers/strings to write, numbers = pause in ms, functions = custom writers)
// and reads until a whole response, a close, or the timeout. Stops writing once bytes come back.
function exchange(steps, { timeoutMs = CASE_TIMEOUT_MS, head = false } = {}) {
    return new Promise((resolve) => {
        const t0 = Date.now();
        const sock = net.connect({ host, port });
        let buf = Buffer.alloc(0);
        let done = false;
        let error = null;
        let closed = false;
        const finish = (why) => {
            if (done) return;
            done = true;
            clearTimeout(timer);
            sock.destroy();
            resolve({ ...parseResponse(buf, head), raw: buf, closed, error, why, ms: Date.now() - t0 });
        };
        const timer = setTimeout(() => finish('timeout'), timeoutMs);
        sock.setNoDelay(true);
        sock.on('data', (d) => {
            buf = Buffer.concat([buf, d]);
            if (parseResponse(buf, head).complete) finish('response');
        });
        sock.on('error', (e) => { error = e.code || e.message; });
        sock.on('close', () => { closed = true; finish('close'); });
        const write = (data) => new Promise((res) => {
            if (done || sock.destroyed) return res();
            if (sock.write(data)) return res();
            const go = () => { sock.off('drain', go); sock.off('close', go); res(); };
            sock.on('drain', go);
            sock.on('close', go);
        });
        sock.on('connect', async () => {
            for (const step of steps) {
                if (done || buf.length) break;
                if (typeof step === 'number') await sleep(step);
                else if (typeof step === 'function') await step(write, () => done || buf.length > 0);
                else await write(typeof step === 'string' ? Buffer.from(step, 'latin1') : step);
            }
        });
    });
}

// ---------------------------------------------------------------- request builders

const CRLF = '\r\n';
const auth = apiKey ? `Authorization: Bearer ${apiKey}${CRLF}` : '';

// A raw request. body: string (latin1 bytes) or Buffer; headers: raw header lines.
function raw({ method = 'POST', path = '/v1/chat/completions', version = 'HTTP/1.1', headers = '', body = '', withAuth = true,
    withHost = true, contentLength = true, contentType = 'application/json' } = {}) {
    const b = Buffer.isBuffer(body) ? body : Buffer.from(body, 'latin1');
    let h = `${method} ${path} ${version}${CRLF}`;
    if (withHost) h += `Host: ${hostHeader}${CRLF}`;
    if (withAuth) h += auth;
    if (contentType && b.length) h += `Content-Type: ${contentType}${CRLF}`;
    if (contentLength && (b.length || method === 'POST')) h += `Content-Length: ${b.length}${CRLF}`;
    h += headers + `Connection: close${CRLF}${CRLF}`;
    return Buffer.concat([Buffer.from(h, 'latin1'), b]);
}
// A JSON body given as text (UTF-8 encoded) or as raw bytes.
const utf8 = (s) => Buffer.from(s, 'utf8');
const json = (obj) => utf8(JSON.stringify(obj));
const chatReq = (obj, opts = {}) => raw({ body: json(obj), ...opts });
const complReq = (obj, opts = {}) => raw({ path: '/v1/completions', body: json(obj), ...opts });

const baseChat = () => ({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
const baseCompl = () => ({ model, prompt: 'hi', max_tokens: 1 });
const withField = (b, k, v) => { const o = b(); o[k] = v; return o; };
const withoutField = (b, k) => { const o = b(); delete o[k]; return o; };
const userContent = (content) => ({ model, messages: [{ role: 'user', content }], max_tokens: 1 });
const audioPart = (input_audio) => userContent([{ type: 'text', text: 'listen' }, { type: 'input_audio', input_audio }]);

// ---------------------------------------------------------------- the corpus

// expect: '4xx' | '4xx|close' | '<code>' | '<code>|<code>' | '<code>|close'; jsonError: the
// answer must be an OpenAI error object.
const cases = [];
const add = (name, steps, expect = '4xx', opts = {}) => cases.push({ name, steps: Array.isArray(steps) ? steps : [steps], expect, ...opts });
const addJson = (name, req, expect = '400') => add(name, req, expect, { jsonError: true });

// --- request line and headers that are not HTTP
let seed = 12345;
const junk = Buffer.alloc(512);
for (let i = 0; i < junk.length; i++) { seed = (seed * 1103515245 + 12345) >>> 0; junk[i] = seed >>> 24; }
add('http/binary-junk', junk, '4xx|close');
add('http/words-not-http', `HELLO WORLD${CRLF}${CRLF}`, '4xx|close');
add('http/no-version', `GET /health${CRLF}${CRLF}`, '4xx|close');
add('http/bad-version-token', `GET /health HTTP/1.x${CRLF}Host: ${hostHeader}${CRLF}${CRLF}`, '4xx|close');
add('http/bad-protocol-name', `GET /health HTTX/1.1${CRLF}Host: ${hostHeader}${CRLF}${CRLF}`, '4xx|close');
add('http/lowercase-protocol', `GET /health http/1.1${CRLF}Host: ${hostHeader}${CRLF}${CRLF}`, '4xx|close');
add('http/extra-token-in-request-line', `GET /health HTTP/1.1 extra${CRLF}Host: ${hostHeader}${CRLF}${CRLF}`, '4xx|close');
add('http/nul-in-request-line', `GET /hea\0lth HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${CRLF}`, '4xx|close');
add('http/nul-in-method', `GE\0T /health HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${CRLF}`, '4xx|close');
add('http/nul-in-header-name', `GET /health HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}X-A\0b: 1${CRLF}${CRLF}`, '4xx|close');
add('http/nul-in-header-value', `GET /health HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}X-A: a\0b${CRLF}${CRLF}`, '4xx|close');
add('http/header-without-colon', `GET /health HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}BadHeader${CRLF}${CRLF}`, '4xx|close');
add('http/space-before-colon', `GET /health HTTP/1.1${CRLF}Host : ${hostHeader}${CRLF}${CRLF}`, '4xx|close');
add('http/empty-header-name', `GET /health HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}: value${CRLF}${CRLF}`, '4xx|close');
add('http/bad-char-in-header-name', `GET /health HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}X(A): 1${CRLF}${CRLF}`, '4xx|close');
add('http/bare-cr-in-header', `GET /health HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}X-A: a\rb${CRLF}${CRLF}`, '4xx|close');
add('http/content-length-letters', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Content-Length: abc${CRLF}${CRLF}{}`, '4xx|close');
add('http/content-length-negative', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Content-Length: -1${CRLF}${CRLF}`, '4xx|close');
add('http/content-length-overflow', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Content-Length: 99999999999999999999999999${CRLF}${CRLF}`, '4xx|close');
add('http/content-length-list', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Content-Length: 2, 3${CRLF}${CRLF}{}`, '4xx|close');
add('http/content-length-duplicate-differs', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Content-Length: 2${CRLF}Content-Length: 3${CRLF}${CRLF}{}x`, '4xx|close');
add('http/content-length-and-chunked', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Content-Length: 7${CRLF}Transfer-Encoding: chunked${CRLF}${CRLF}2${CRLF}{}${CRLF}0${CRLF}${CRLF}`, '4xx|close');
add('http/chunk-size-not-hex', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Transfer-Encoding: chunked${CRLF}${CRLF}zz${CRLF}{}${CRLF}0${CRLF}${CRLF}`, '4xx|close');
add('http/chunk-size-overflow', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Transfer-Encoding: chunked${CRLF}${CRLF}ffffffffffffffffffffff${CRLF}{}${CRLF}0${CRLF}${CRLF}`, '4xx|close');
add('http/chunk-longer-than-size', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Transfer-Encoding: chunked${CRLF}${CRLF}2${CRLF}{}xxxx${CRLF}0${CRLF}${CRLF}`, '4xx|close');
add('http/chunked-not-last', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Transfer-Encoding: chunked, gzip${CRLF}${CRLF}2${CRLF}{}${CRLF}0${CRLF}${CRLF}`, '4xx|close');
add('http/transfer-encoding-unknown', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Transfer-Encoding: bogus${CRLF}${CRLF}{}`, '4xx|close');
add('http/header-line-64k', `GET /health HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}X-Big: ${'a'.repeat(65536)}${CRLF}${CRLF}`, '4xx|close');
add('http/headers-2000', `GET /health HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${Array.from({ length: 2000 }, (_, i) => `X-H${i}: v`).join(CRLF)}${CRLF}${CRLF}`, '4xx|close');
add('http/target-64k', `GET /${'a'.repeat(65536)} HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${CRLF}`, '4xx|close');
add('http/missing-host', `GET /health HTTP/1.1${CRLF}Connection: close${CRLF}${CRLF}`, '400');
add('http/duplicate-host', `GET /health HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}Host: ${hostHeader}${CRLF}Connection: close${CRLF}${CRLF}`, '400');
add('http/host-invalid-chars', `GET /health HTTP/1.1${CRLF}Host: a b c${CRLF}Connection: close${CRLF}${CRLF}`, '4xx|close');
add('http/host-not-allowed-dns-rebinding', chatReq(baseChat(), { withHost: false, headers: `Host: attacker.example:${port}${CRLF}` }), '4xx');
add('http/expect-100-huge', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Content-Type: application/json${CRLF}Expect: 100-continue${CRLF}Content-Length: 1099511627776${CRLF}${CRLF}`, '413|417');
add('http/expect-unknown', raw({ body: '{', headers: `Expect: teapot${CRLF}` }), '4xx');
add('http/obs-fold-header', raw({ body: '{', headers: `X-Folded: a${CRLF}  continued${CRLF}` }), '4xx|close');
add('http/upgrade-websocket', raw({ body: '{', headers: `Upgrade: websocket${CRLF}Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==${CRLF}Sec-WebSocket-Version: 13${CRLF}` }), '4xx|close');
add('http/utf8-in-header-value-with-nul', raw({ body: '{', headers: `X-Name: \xc3\xa9\0${CRLF}` }), '4xx|close');

// --- methods and paths
add('route/delete-chat', raw({ method: 'DELETE', body: '' }), '404|405');
add('route/put-chat', raw({ method: 'PUT', body: json(baseChat()) }), '404|405');
add('route/patch-chat', raw({ method: 'PATCH', body: json(baseChat()) }), '404|405');
add('route/get-chat', raw({ method: 'GET', body: '' }), '404|405');
add('route/head-chat', raw({ method: 'HEAD', body: '' }), '404|405', { head: true });
add('route/get-completions', raw({ method: 'GET', path: '/v1/completions', body: '' }), '404|405');
add('route/post-health', raw({ method: 'POST', path: '/health', body: '{}' }), '404|405');
add('route/post-models', raw({ method: 'POST', path: '/v1/models', body: '{}' }), '404|405');
add('route/post-stats', raw({ method: 'POST', path: '/v1/stats', body: '{}' }), '404|405');
add('route/post-root', raw({ method: 'POST', path: '/', body: '{}' }), '404|405');
add('route/delete-app-js', raw({ method: 'DELETE', path: '/app.js', body: '' }), '404|405');
add('route/trace', raw({ method: 'TRACE', path: '/', body: '' }), '4xx|close');
add('route/connect', `CONNECT ${hostHeader} HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${CRLF}`, '4xx|close');
add('route/unknown-method', raw({ method: 'FROB', path: '/health', body: '' }), '4xx|close');
add('route/lowercase-method', raw({ method: 'get', path: '/health', body: '' }), '4xx|close');
add('route/unknown-path', raw({ method: 'GET', path: '/nope', body: '' }), '404');
add('route/unknown-v1-path', raw({ method: 'GET', path: '/v1/nope', body: '' }), '404');
add('route/v1-bare', raw({ method: 'GET', path: '/v1', body: '' }), '404');
add('route/v1-embeddings', raw({ path: '/v1/embeddings', body: json({ model, input: 'x' }) }), '404');
add('route/dotdot', raw({ method: 'GET', path: '/../../etc/passwd', body: '' }), '4xx|close');
add('route/encoded-dotdot', raw({ method: 'GET', path: '/%2e%2e/%2e%2e/etc/passwd', body: '' }), '4xx');
add('route/asset-dotdot', raw({ method: 'GET', path: '/app.js/../../../etc/passwd', body: '' }), '4xx|close');
add('route/encoded-nul', raw({ method: 'GET', path: '/health%00', body: '' }), '4xx');
add('route/high-bytes-in-path', raw({ method: 'GET', path: '/\xff\xfe\xc0\xaf', body: '' }), '4xx|close');
add('route/asterisk-target', raw({ method: 'GET', path: '*', body: '' }), '4xx|close');
add('route/absolute-form-other-host', raw({ method: 'GET', path: 'http://attacker.example/v1/models', body: '' }), '4xx|close');
add('route/chat-trailing-garbage-path', raw({ path: '/v1/chat/completions/extra', body: json(baseChat()) }), '404|405');

// --- API keys (only when the gateway runs with one)
if (apiKey) {
    add('auth/models-no-key', raw({ method: 'GET', path: '/v1/models', withAuth: false, body: '' }), '401', { jsonError: true });
    add('auth/stats-no-key', raw({ method: 'GET', path: '/v1/stats', withAuth: false, body: '' }), '401');
    add('auth/metrics-no-key', raw({ method: 'GET', path: '/metrics', withAuth: false, body: '' }), '401');
    add('auth/chat-no-key', chatReq(baseChat(), { withAuth: false }), '401', { jsonError: true });
    add('auth/completions-no-key', complReq(baseCompl(), { withAuth: false }), '401', { jsonError: true });
    add('auth/wrong-bearer', raw({ method: 'GET', path: '/v1/models', withAuth: false, headers: `Authorization: Bearer ${apiKey}x${CRLF}`, body: '' }), '401');
    add('auth/bearer-prefix-of-key', raw({ method: 'GET', path: '/v1/models', withAuth: false, headers: `Authorization: Bearer ${apiKey.slice(0, -1)}${CRLF}`, body: '' }), '401');
    add('auth/empty-bearer', raw({ method: 'GET', path: '/v1/models', withAuth: false, headers: `Authorization: Bearer${CRLF}`, body: '' }), '401');
    add('auth/basic-scheme', raw({ method: 'GET', path: '/v1/models', withAuth: false, headers: `Authorization: Basic ${Buffer.from('user:' + apiKey).toString('base64')}${CRLF}`, body: '' }), '401');
    add('auth/key-without-scheme', raw({ method: 'GET', path: '/v1/models', withAuth: false, headers: `Authorization: ${apiKey}${CRLF}`, body: '' }), '401');
    add('auth/wrong-x-api-key', raw({ method: 'GET', path: '/v1/models', withAuth: false, headers: `x-api-key: ${apiKey}-no${CRLF}`, body: '' }), '401');
    add('auth/key-with-nul', raw({ method: 'GET', path: '/v1/models', withAuth: false, headers: `x-api-key: ${apiKey}\0${CRLF}`, body: '' }), '4xx|close');
    add('auth/key-in-query-not-accepted', raw({ method: 'GET', path: `/v1/models?api_key=${apiKey}`, withAuth: false, body: '' }), '401');
}

// --- bodies that are not JSON, or not the JSON we want (POST /v1/chat/completions)
addJson('json/empty-body', raw({ body: '' }));
add('json/no-length-no-body', `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Connection: close${CRLF}${CRLF}`, '400|411');
addJson('json/plain-text', raw({ body: 'hello' }));
addJson('json/form-encoded', raw({ body: `model=${model}&messages=hi`, contentType: 'application/x-www-form-urlencoded' }));
addJson('json/truncated-object', raw({ body: '{' }));
addJson('json/truncated-after-key', raw({ body: '{"model":' }));
addJson('json/trailing-garbage', raw({ body: JSON.stringify(baseChat()) + 'x' }));
addJson('json/two-values', raw({ body: JSON.stringify(baseChat()) + ' {}' }));
addJson('json/top-level-array', raw({ body: '[]' }));
addJson('json/top-level-string', raw({ body: '"chat"' }));
addJson('json/top-level-number', raw({ body: '42' }));
addJson('json/top-level-null', raw({ body: 'null' }));
addJson('json/top-level-true', raw({ body: 'true' }));
addJson('json/empty-object', raw({ body: '{}' }));
addJson('json/nan', raw({ body: `{"model":"${model}","messages":[{"role":"user","content":"hi"}],"temperature":NaN}` }));
addJson('json/infinity', raw({ body: `{"model":"${model}","messages":[{"role":"user","content":"hi"}],"temperature":Infinity}` }));
addJson('json/number-overflow', raw({ body: `{"model":"${model}","messages":[{"role":"user","content":"hi"}],"temperature":1e999}` }));
addJson('json/single-quotes', raw({ body: `{'model':'${model}'}` }));
addJson('json/comment', raw({ body: `{"model":"${model}" /* c */,"messages":[{"role":"user","content":"hi"}]}` }));
addJson('json/trailing-comma', raw({ body: `{"model":"${model}","messages":[{"role":"user","content":"hi"}],}` }));
addJson('json/unquoted-key', raw({ body: `{model:"${model}"}` }));
addJson('json/deep-arrays-10000', raw({ body: `{"model":"${model}","messages":${'['.repeat(10000)}${']'.repeat(10000)}}` }));
addJson('json/deep-objects-10000', raw({ body: `{"model":"${model}","messages":[{"role":"user","content":"hi"}],"stop":${'{"a":'.repeat(10000)}1${'}'.repeat(10000)}}` }));
addJson('json/deep-arrays-in-content', raw({ body: `{"model":"${model}","messages":[{"role":"user","content":${'['.repeat(5000)}${']'.repeat(5000)}}]}` }));
addJson('json/deep-unclosed-100000', raw({ body: '['.repeat(100000) }));
add('json/20000-messages', raw({ body: json({ model, messages: Array.from({ length: 20000 }, () => ({ role: 'user', content: 'hi' })), max_tokens: 1 }) }), '4xx', { jsonError: true });

// --- broken UTF-8 and control bytes inside JSON strings
const contentBytes = (bytes) => Buffer.concat([utf8(`{"model":"${model}","messages":[{"role":"user","content":"a`), Buffer.from(bytes), utf8(`b"}],"max_tokens":1}`)]);
addJson('utf8/invalid-byte-ff', raw({ body: contentBytes([0xff]) }));
addJson('utf8/continuation-alone', raw({ body: contentBytes([0x80]) }));
addJson('utf8/overlong-slash', raw({ body: contentBytes([0xc0, 0xaf]) }));
addJson('utf8/overlong-nul', raw({ body: contentBytes([0xc0, 0x80]) }));
addJson('utf8/surrogate-encoded', raw({ body: contentBytes([0xed, 0xa0, 0x80]) }));
addJson('utf8/truncated-3-byte', raw({ body: contentBytes([0xe2, 0x82]) }));
addJson('utf8/beyond-u10ffff', raw({ body: contentBytes([0xf4, 0x90, 0x80, 0x80]) }));
addJson('utf8/five-byte-form', raw({ body: contentBytes([0xf8, 0x88, 0x80, 0x80, 0x80]) }));
addJson('utf8/invalid-in-model', raw({ body: Buffer.concat([utf8('{"model":"demo'), Buffer.from([0xfe]), utf8(`","messages":[{"role":"user","content":"hi"}]}`)]) }));
addJson('utf8/invalid-in-key', raw({ body: Buffer.concat([utf8(`{"model":"${model}","messages":[{"role":"user","content":"hi"}],"`), Buffer.from([0xff]), utf8('":1}')]) }));
addJson('json/escaped-lone-high-surrogate', raw({ body: `{"model":"${model}","messages":[{"role":"user","content":"a\\ud800b"}],"max_tokens":1}` }));
addJson('json/escaped-lone-low-surrogate', raw({ body: `{"model":"${model}","messages":[{"role":"user","content":"a\\udc00b"}],"max_tokens":1}` }));
addJson('json/bad-escape', raw({ body: `{"model":"${model}","messages":[{"role":"user","content":"a\\x41"}],"max_tokens":1}` }));
addJson('json/short-unicode-escape', raw({ body: `{"model":"${model}","messages":[{"role":"user","content":"a\\u12"}],"max_tokens":1}` }));
addJson('json/raw-nul-in-string', raw({ body: contentBytes([0x00]) }));
addJson('json/raw-control-in-string', raw({ body: contentBytes([0x01]) }));
addJson('json/raw-newline-in-string', raw({ body: contentBytes([0x0a]) }));
addJson('json/escaped-nul-in-content', raw({ body: `{"model":"${model}","messages":[{"role":"user","content":"a\\u0000b"}],"max_tokens":1}` }));
add('json/escaped-nul-in-model', raw({ body: `{"model":"${model}\\u0000","messages":[{"role":"user","content":"hi"}],"max_tokens":1}` }), '400|404', { jsonError: true });
addJson('json/escaped-nul-in-prompt', raw({ path: '/v1/completions', body: `{"model":"${model}","prompt":"a\\u0000b","max_tokens":1}` }));

// --- a wrong type (or value) for every field of /v1/chat/completions
const chatFields = {
    model: [1, null, [], {}, true],
    messages: [null, 'hi', {}, [], [1], ['hi'], [null], [{}], [{ role: 'user' }], [{ content: 'hi' }], [{ role: 5, content: 'hi' }],
        [{ role: 'wizard', content: 'hi' }], [{ role: 'user', content: 5 }], [{ role: 'user', content: {} }], [{ role: 'user', content: true }]],
    max_tokens: ['10', -1, 1.5, 1e300, true, [], {}, 2 ** 64],
    max_completion_tokens: ['x', -5, 0.5],
    temperature: ['hot', -0.5, 2.5, [], true, {}],
    top_p: ['x', 1.5, -1, []],
    seed: ['abc', 1.5, [], {}],
    stop: [5, [5], ['a', 5], {}, ['a', 'b', 'c', 'd', 'e'], true],
    stream: ['yes', 1, {}, []],
    stream_options: ['x', 5, { include_usage: 'yes' }],
    n: [2, 0, '1', 1.5, -1],
    reasoning_effort: ['extreme', 5, []],
    tools: [[{ type: 'function', function: { name: 'has space' } }], [{ type: 'custom', custom: { name: 'f' } }], [{ type: 'function' }], 'x'],
    tool_choice: ['sometimes', 5, { type: 'function', function: { name: 'undeclared' } }],
    top_logprobs: [3, 21, -1, 'x'],
};
for (const [field, values] of Object.entries(chatFields)) {
    values.forEach((v, i) => addJson(`type/chat-${field}-${i}-${JSON.stringify(v).slice(0, 24)}`, chatReq(withField(baseChat, field, v)), field === 'model' ? '400|404' : '400'));
}
addJson('type/chat-model-missing', chatReq(withoutField(baseChat, 'model')), '400|404');
addJson('type/chat-model-empty', chatReq(withField(baseChat, 'model', '')), '400|404');
addJson('type/chat-messages-missing', chatReq(withoutField(baseChat, 'messages')));
addJson('type/chat-stream-options-without-stream-bad', chatReq({ ...baseChat(), stream: true, stream_options: { include_usage: 1 } }));

// content parts
addJson('parts/not-objects', chatReq(userContent([5])));
addJson('parts/null-part', chatReq(userContent([null])));
addJson('parts/text-missing', chatReq(userContent([{ type: 'text' }])));
addJson('parts/text-number', chatReq(userContent([{ type: 'text', text: 5 }])));
addJson('parts/type-missing', chatReq(userContent([{ text: 'hi' }])));
addJson('parts/type-unknown', chatReq(userContent([{ type: 'bogus' }])));
addJson('parts/image-unsupported', chatReq(userContent([{ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }])));
addJson('audio/input-audio-missing', chatReq(userContent([{ type: 'input_audio' }])));
addJson('audio/data-number', chatReq(audioPart({ data: 5, format: 'wav' })));
addJson('audio/data-not-base64', chatReq(audioPart({ data: '!!!not base64!!!', format: 'wav' })));
addJson('audio/data-empty', chatReq(audioPart({ data: '', format: 'wav' })));
addJson('audio/format-unsupported', chatReq(audioPart({ data: Buffer.from('RIFF').toString('base64'), format: 'ogg' })));
addJson('audio/format-missing', chatReq(audioPart({ data: Buffer.from('RIFF').toString('base64') })));
addJson('audio/not-riff', chatReq(audioPart({ data: Buffer.from('hello world, not a wave file').toString('base64'), format: 'wav' })));
addJson('audio/riff-truncated', chatReq(audioPart({ data: Buffer.from('RIFF\x24\x00\x00\x00WAVE', 'latin1').toString('base64'), format: 'wav' })));
{
    // A RIFF/WAVE whose fmt chunk declares an encoding nobody supports (format tag 0x55 = MP3).
    const wav = Buffer.alloc(44);
    wav.write('RIFF', 0, 'latin1'); wav.writeUInt32LE(36, 4); wav.write('WAVE', 8, 'latin1');
    wav.write('fmt ', 12, 'latin1'); wav.writeUInt32LE(16, 16); wav.writeUInt16LE(0x55, 20); wav.writeUInt16LE(1, 22);
    wav.writeUInt32LE(16000, 24); wav.writeUInt32LE(32000, 28); wav.writeUInt16LE(2, 32); wav.writeUInt16LE(16, 34);
    wav.write('data', 36, 'latin1'); wav.writeUInt32LE(0, 40);
    addJson('audio/unsupported-encoding', chatReq(audioPart({ data: wav.toString('base64'), format: 'wav' })));
    const zeroRate = Buffer.from(wav); zeroRate.writeUInt16LE(1, 20); zeroRate.writeUInt32LE(0, 24);
    addJson('audio/zero-sample-rate', chatReq(audioPart({ data: zeroRate.toString('base64'), format: 'wav' })));
}

// /v1/completions
const complFields = {
    prompt: [5, null, {}, [{}], true],
    model: [5, null],
    max_tokens: ['x', -2, 1.5],
    temperature: ['x', 3],
    stop: [5, ['a', 'b', 'c', 'd', 'e']],
    n: [2],
    stream: ['yes'],
};
for (const [field, values] of Object.entries(complFields)) {
    values.forEach((v, i) => addJson(`type/completions-${field}-${i}-${JSON.stringify(v).slice(0, 24)}`, complReq(withField(baseCompl, field, v)), field === 'model' ? '400|404' : '400'));
}
addJson('type/completions-prompt-missing', complReq(withoutField(baseCompl, 'prompt')));

// --- sizes
const headersFor = (extra) => `POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}Content-Type: application/json${CRLF}${extra}${CRLF}`;
add('size/declared-1TiB', [headersFor(`Content-Length: 1099511627776${CRLF}`), '{"model":'], '413', { jsonError: true });
add('size/declared-cap-plus-one', [headersFor(`Content-Length: ${bodyCap + 1}${CRLF}`), '{"model":'], '413', { jsonError: true });
add('size/streamed-past-cap', [headersFor(`Content-Length: ${bodyCap + (1 << 20)}${CRLF}`), streamBody(bodyCap + (1 << 20), false)], '413|close', { timeoutMs: 60000 });
add('size/chunked-past-cap', [headersFor(`Transfer-Encoding: chunked${CRLF}`), streamBody(bodyCap + (1 << 20), true)], '413|close', { timeoutMs: 60000 });

// Writes `total` bytes of a JSON-ish body in 1 MiB pieces (chunked framing if asked), stopping
// as soon as the gateway answers.
function streamBody(total, chunked) {
    return async (write, answered) => {
        const piece = Buffer.alloc(1 << 20, 0x61);
        await write(chunked ? `1${CRLF}[${CRLF}` : '[');
        let sent = 1;
        while (sent < total && !answered()) {
            const n = Math.min(piece.length, total - sent);
            const p = n === piece.length ? piece : piece.subarray(0, n);
            await write(chunked ? Buffer.concat([Buffer.from(n.toString(16) + CRLF), p, Buffer.from(CRLF)]) : p);
            sent += n;
        }
        if (chunked && !answered()) await write(`0${CRLF}${CRLF}`);
    };
}

// ---------------------------------------------------------------- judging

function judge(res, expect, jsonError) {
    const alts = expect.split('|');
    const got = res.status;
    if (got === undefined) {
        if (alts.includes('close') && (res.closed || res.error) && res.why !== 'timeout') return null;
        if (res.why === 'timeout') return `no answer within the case's deadline (${res.ms} ms)${res.raw.length ? `; got ${JSON.stringify(res.raw.subarray(0, 80).toString('latin1'))}` : ''}`;
        return `connection ${res.error ? 'failed (' + res.error + ')' : 'closed'} without a response; expected ${expect}`;
    }
    const ok = alts.some((a) => a === '4xx' ? got >= 400 && got < 500 : a !== 'close' && Number(a) === got);
    if (!ok) return `HTTP ${got}, expected ${expect}: ${String(res.body || '').slice(0, 160)}`;
    if (jsonError && res.complete) {
        let body;
        try { body = JSON.parse(res.body); } catch { return `HTTP ${got} with a body that is not JSON: ${String(res.body).slice(0, 120)}`; }
        const e = body && body.error;
        if (!e || typeof e.message !== 'string' || !e.message || typeof e.type !== 'string') return `HTTP ${got} without an OpenAI error object: ${String(res.body).slice(0, 160)}`;
    }
    if ((got === 429 || got === 503) && !res.headers['retry-after']) return `HTTP ${got} without Retry-After`;
    return null;
}

async function healthOk() {
    try {
        const h = await request(`${base}/health`, { timeoutMs: 5000 });
        return h.status === 200 ? null : `/health answered ${h.status}: ${h.text.slice(0, 120)}`;
    } catch (err) {
        return `/health failed: ${err.message}`;
    }
}

// ---------------------------------------------------------------- run

console.log(`  ${cases.length} cases against ${base}, body cap ${bodyCap} bytes`);
let down = false;
for (const c of cases) {
    if (down) { r.fail(`http-corpus/${c.name}`, 'not run: the gateway stopped answering /health'); continue; }
    const res = await exchange(c.steps, { timeoutMs: c.timeoutMs || CASE_TIMEOUT_MS, head: c.head });
    const why = judge(res, c.expect, c.jsonError);
    let health = await healthOk();
    if (health) {
        // A restarting engine gets up to 30 s of /health polls before the gateway counts as harmed.
        for (const end = Date.now() + 30000; health && Date.now() < end;) {
            await sleep(200);
            health = await healthOk();
        }
        if (health) down = true;
    }
    if (why) r.fail(`http-corpus/${c.name}`, why);
    else if (down) r.fail(`http-corpus/${c.name}`, `the gateway is unhealthy after this case: ${health}`);
    else r.pass(`http-corpus/${c.name}`, res.status ? String(res.status) : 'closed');
}

// --- slowloris: all at once; each must be cut off within --slow-limit; /health keeps answering.
const slowCases = [
    ['slow/partial-request-line', [`POST /v1/chat/completions HTT`]],
    ['slow/headers-never-end', [`POST /v1/chat/completions HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}${auth}`]],
    ['slow/header-trickle', [`GET /health HTTP/1.1${CRLF}Host: ${hostHeader}${CRLF}X-Slow: `, async (write, answered) => {
        for (let i = 0; i < 1000 && !answered(); i++) { await write('a'); await sleep(1000); }
    }]],
    ['slow/body-stall', [headersFor(`Content-Length: 1000${CRLF}`), '{"model":"']],
    ['slow/body-trickle', [headersFor(`Content-Length: 100000${CRLF}`), async (write, answered) => {
        for (let i = 0; i < 1000 && !answered(); i++) { await write(' '); await sleep(500); }
    }]],
];
if (!down) {
    const started = Date.now();
    const runs = slowCases.map(([name, steps]) => exchange(steps, { timeoutMs: slowLimitMs }).then((res) => ({ name, res })));
    // While they hang on, the gateway must keep serving.
    let healthDuring = null;
    for (let i = 0; i < 5 && !healthDuring; i++) {
        await sleep(1000);
        healthDuring = await healthOk();
    }
    for (const { name, res } of await Promise.all(runs)) {
        const cut = res.why !== 'timeout';
        if (!cut) r.fail(`http-corpus/${name}`, `still open after ${slowLimitMs / 1000} s: the gateway never cut it off`);
        else if (res.status !== undefined && !(res.status >= 400 && res.status < 500)) r.fail(`http-corpus/${name}`, `HTTP ${res.status} before the cut`);
        else r.pass(`http-corpus/${name}`, `cut after ${(res.ms / 1000).toFixed(1)} s${res.status ? ' with ' + res.status : ''}`);
    }
    if (healthDuring) r.fail('http-corpus/health-while-slow-clients-hang', healthDuring);
    else r.pass('http-corpus/health-while-slow-clients-hang');
    console.log(`  slow cases took ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

// --- afterwards: healthy, and still serving a normal request.
await r.check('http-corpus/healthy-after-corpus', async () => {
    const h = await healthOk();
    if (h) throw new Error(h);
});
await r.check('http-corpus/serves-after-corpus', async () => {
    const res = await request(`${base}/v1/chat/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json', ...authHeaders(apiKey) }, body: baseChat(), timeoutMs: 30000,
    });
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${res.text.slice(0, 200)}`);
    if (res.json?.choices?.[0]?.finish_reason !== 'length') throw new Error(`unexpected answer: ${res.text.slice(0, 200)}`);
});
if (apiKey) {
    await r.check('http-corpus/health-public-with-key', async () => {
        const h = await request(`${base}/health`, { timeoutMs: 5000 });
        if (h.status !== 200) throw new Error(`/health without a key answered ${h.status}`);
        const root = await request(`${base}/`, { timeoutMs: 5000 });
        if (root.status !== 200) throw new Error(`/ without a key answered ${root.status}`);
    });
}
r.finish();
