// A browser page calling the gateway through the official SDKs (dangerouslyAllowBrowser): the
// browser first sends a CORS preflight naming every request header the SDK sets, and refuses
// the call unless each is allowed. The headers are the SDKs' own — recorded from real requests
// of openai-node and @anthropic-ai/sdk (a fetch wrapper) — and the preflight is sent with
// them from the gateway's own origin, as the page's browser would.
//
//   node cors_preflight.test.mjs --base URL --api-key K

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { config, Reporter, assert, assertEq, request, readyModel } from './lib.mjs';

const { base, apiKey } = config();
const r = new Reporter('cors');
const model = await readyModel(r, 'cors/ready', base, apiKey, 60000);

// Header names the SDK put on its requests (lower-cased), per endpoint path.
const sent = new Map();
const recording = (input, init) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const names = sent.get(url.pathname) || new Set();
    for (const [name] of new Headers(init?.headers || {})) names.add(name.toLowerCase());
    sent.set(url.pathname, names);
    return fetch(input, init);
};
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: apiKey || 'no-key', maxRetries: 0, timeout: 60000,
    dangerouslyAllowBrowser: true, fetch: recording, organization: 'org-test', project: 'proj-test' });
const anthropic = new Anthropic({ baseURL: base, apiKey: apiKey || 'no-key', maxRetries: 0, timeout: 60000,
    dangerouslyAllowBrowser: true, fetch: recording });

// What the browser would send before the call, and what the gateway allows.
async function preflight(path, names) {
    const origin = new URL(base).origin;  // the gateway's own origin is allowed by default
    const res = await request(`${base}${path}`, { method: 'OPTIONS', headers: {
        Origin: origin, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': [...names].join(', ') } });
    assertEq(res.status, 204, `${path}: preflight status`);
    assertEq(res.headers.get('access-control-allow-origin'), origin, `${path}: Allow-Origin`);
    assert((res.headers.get('access-control-allow-methods') || '').includes('POST'), `${path}: POST allowed`);
    const allowed = new Set((res.headers.get('access-control-allow-headers') || '').split(',').map((h) => h.trim().toLowerCase()));
    const missing = [...names].filter((n) => !allowed.has(n));
    assert(missing.length === 0, `${path}: not allowed: ${missing.join(', ')}`);
    return [...names].sort().join(' ');
}

await r.check('cors/openai-node: a preflight allows every header the client sends (create and the stream helper)', async () => {
    await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
    await openai.chat.completions.stream({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }).finalChatCompletion();
    const names = sent.get('/v1/chat/completions');
    for (const n of ['authorization', 'x-stainless-lang', 'x-stainless-helper-method', 'openai-organization', 'openai-project'])
        assert(names.has(n), `the client did not send ${n}: ${[...names]}`);
    return await preflight('/v1/chat/completions', names);
});

await r.check('cors/@anthropic-ai/sdk: a preflight allows every header the client sends', async () => {
    await anthropic.messages.create({ model, max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] },
        { headers: { 'anthropic-beta': 'test-2026-01-01' } });
    await anthropic.messages.countTokens({ model, messages: [{ role: 'user', content: 'hi' }] });
    const names = new Set([...sent.get('/v1/messages'), ...sent.get('/v1/messages/count_tokens')]);
    // (The key goes as Authorization here; x-api-key, which a page may set instead, is allowed
    // too: gateway-documented checks the full list.)
    for (const n of ['anthropic-version', 'anthropic-beta', 'anthropic-dangerous-direct-browser-access', 'x-stainless-os'])
        assert(names.has(n), `the client did not send ${n}: ${[...names]}`);
    return await preflight('/v1/messages', names);
});

r.finish();
