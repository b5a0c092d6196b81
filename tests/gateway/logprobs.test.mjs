// Log-probs through the official `openai` client on the real engine and the demo model: chat
// `logprobs` + `top_logprobs` and completions `logprobs`, streaming and not, in OpenAI's
// shapes, with values that are the engine's: the chat answer's tokens and log-probs equal
// those /v1/completions reports for the same prompt rendered by hand (raw output, markers and
// all, filtered to the answer channel), and at temperature 0 the chosen token is the most
// likely one, so its log-prob is top_logprobs[0]'s.
//
//   node logprobs.test.mjs --base URL --api-key K

import OpenAI from 'openai';
import { config, Reporter, assert, assertEq, readyModel } from './lib.mjs';

const { base, apiKey } = config();
const r = new Reporter('logprobs');
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: apiKey || 'no-key', maxRetries: 0, timeout: 120000 });
const model = await readyModel(r, 'logprobs/ready', base, apiKey, 60000);

const question = 'Write a few words about the sea.';
const chat = (extra = {}) => ({ model, messages: [{ role: 'user', content: question }], temperature: 0, max_tokens: 12,
    logprobs: true, top_logprobs: 5, ...extra });
// The prompt the gateway renders for `chat()` at effort 0 (protocol/tml_render.h).
const rendered = '<|message_system|><|content_text|>Thinking effort level: 0<|end_message|>' +
    `<|message_user|><|content_text|>${question}<|end_message|><|message_model|><|content_text|>`;

function checkEntry(e, what, topN) {
    assert(typeof e.token === 'string', `${what}: token ${JSON.stringify(e.token)}`);
    assert(typeof e.logprob === 'number' && e.logprob <= 0, `${what}: logprob ${e.logprob}`);
    assert(Array.isArray(e.bytes) && e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256), `${what}: bytes`);
    const text = Buffer.from(e.bytes).toString('utf8');
    assert(e.token === text || e.token.startsWith('bytes:'), `${what}: token ${JSON.stringify(e.token)} is not its bytes`);
    assert(Array.isArray(e.top_logprobs) && e.top_logprobs.length === topN, `${what}: ${e.top_logprobs?.length} top_logprobs, asked ${topN}`);
    for (let i = 1; i < e.top_logprobs.length; i++)
        assert(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob, `${what}: top_logprobs not sorted`);
    const mass = e.top_logprobs.reduce((s, t) => s + Math.exp(t.logprob), 0);
    assert(mass <= 1 + 1e-6, `${what}: top_logprobs' probabilities sum to ${mass}`);
}

let whole;
await r.check('logprobs/chat: content entries in OpenAI\'s shape, top_logprobs sorted, greedy = the top one', async () => {
    whole = await client.chat.completions.create(chat());
    const lp = whole.choices[0].logprobs;
    assert(lp && Array.isArray(lp.content), `logprobs ${JSON.stringify(lp)}`);
    assertEq(lp.refusal, null, 'refusal');
    assert(lp.content.length > 0, 'no tokens');
    lp.content.forEach((e, i) => {
        checkEntry(e, `token ${i}`, 5);
        // Temperature 0 takes the argmax: the chosen token leads its alternatives.
        assertEq(e.logprob, e.top_logprobs[0].logprob, `token ${i}: logprob vs the most likely's`);
        assertEq(JSON.stringify(e.bytes), JSON.stringify(e.top_logprobs[0].bytes), `token ${i}: bytes vs the most likely's`);
    });
    // (Where the model wrote bytes that are no UTF-8, the two replace them by their own rules.)
    const joined = Buffer.concat(lp.content.map((e) => Buffer.from(e.bytes))).toString('utf8');
    if (!joined.includes('\ufffd')) assertEq(joined, whole.choices[0].message.content, 'the tokens\' bytes join into the content');
    return `${lp.content.length} tokens`;
});

await r.check('logprobs/chat: equal to the engine\'s for the same prompt through /v1/completions', async () => {
    const raw = await client.completions.create({ model, prompt: rendered, temperature: 0, max_tokens: 12, logprobs: 5 });
    const lp = raw.choices[0].logprobs;
    assertEq(lp.tokens.length, lp.token_logprobs.length, 'parallel arrays');
    // The answer channel of the raw output: markers switch it and are never answer tokens.
    let inAnswer = true;
    const answer = [];
    lp.tokens.forEach((t, i) => {
        if (/^<\|[a-z0-9_]+\|>$/.test(t)) { if (t === '<|content_text|>') inAnswer = true; else if (t === '<|content_thinking|>') inAnswer = false; return; }
        if (inAnswer) answer.push({ token: t, logprob: lp.token_logprobs[i] });
    });
    const got = whole.choices[0].logprobs.content.map((e) => ({ token: e.token, logprob: e.logprob }));
    assertEq(JSON.stringify(got), JSON.stringify(answer), 'chat tokens vs completions tokens');
    for (let i = 0; i < lp.tokens.length; i++) {
        const top = lp.top_logprobs[i];
        assert(Object.keys(top).length <= 6, `position ${i}: ${Object.keys(top).length} entries (logprobs + 1 at most)`);
        assertEq(top[lp.tokens[i]], lp.token_logprobs[i], `position ${i}: the chosen token in its map`);
    }
    assertEq(lp.text_offset[0], 0, 'text_offset starts at 0');
    for (let i = 1; i < lp.text_offset.length; i++) assert(lp.text_offset[i] >= lp.text_offset[i - 1], 'text_offset grows');
});

await r.check('logprobs/chat streaming: chunks\' logprobs.content concatenate into the non-streaming list', async () => {
    const stream = await client.chat.completions.create({ ...chat(), stream: true });
    const content = [];
    for await (const chunk of stream) for (const c of chunk.choices) if (c.logprobs?.content) content.push(...c.logprobs.content);
    assertEq(JSON.stringify(content), JSON.stringify(whole.choices[0].logprobs.content), 'streamed vs whole');
    const viaHelper = await client.chat.completions.stream(chat()).finalChatCompletion();
    assertEq(JSON.stringify(viaHelper.choices[0].logprobs.content), JSON.stringify(content), 'ChatCompletionStream vs raw chunks');
});

await r.check('logprobs/chat: top_logprobs 0 gives the chosen token alone; no logprobs gives null', async () => {
    const zero = await client.chat.completions.create(chat({ top_logprobs: 0 }));
    assert(zero.choices[0].logprobs.content.every((e) => Array.isArray(e.top_logprobs) && e.top_logprobs.length === 0), 'empty top_logprobs');
    const none = await client.chat.completions.create(chat({ logprobs: undefined, top_logprobs: undefined }));
    assertEq(none.choices[0].logprobs, null, 'logprobs');
});

await r.check('logprobs/completions streaming: arrays concatenate into the non-streaming ones', async () => {
    const body = { model, prompt: 'The sea is', temperature: 0, max_tokens: 10, logprobs: 3 };
    const one = (await client.completions.create(body)).choices[0].logprobs;
    const tokens = [], values = [], offsets = [];
    for await (const chunk of await client.completions.create({ ...body, stream: true })) {
        const lp = chunk.choices[0]?.logprobs;
        if (!lp) continue;
        tokens.push(...lp.tokens);
        values.push(...lp.token_logprobs);
        offsets.push(...lp.text_offset);
    }
    assertEq(JSON.stringify(tokens), JSON.stringify(one.tokens), 'tokens');
    assertEq(JSON.stringify(values), JSON.stringify(one.token_logprobs), 'token_logprobs');
    assertEq(JSON.stringify(offsets), JSON.stringify(one.text_offset), 'text_offset');
});

for (const [what, body, param] of [
    ['top_logprobs 21', chat({ top_logprobs: 21 }), 'top_logprobs'],
    ['top_logprobs without logprobs', chat({ logprobs: false }), 'top_logprobs'],
]) {
    await r.check(`logprobs/refused: ${what}`, async () => {
        let err;
        try { await client.chat.completions.create(body); } catch (e) { err = e; }
        assert(err instanceof OpenAI.APIError && err.status === 400, `expected a 400, got ${err}`);
        assertEq(err.param, param, 'param');
    });
}
await r.check('logprobs/refused: completions logprobs 6', async () => {
    let err;
    try { await client.completions.create({ model, prompt: 'x', logprobs: 6 }); } catch (e) { err = e; }
    assert(err instanceof OpenAI.APIError && err.status === 400, `expected a 400, got ${err}`);
    assertEq(err.param, 'logprobs', 'param');
});

r.finish();
