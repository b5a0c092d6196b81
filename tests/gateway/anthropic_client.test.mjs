// The gateway's Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens) through
// the official `@anthropic-ai/sdk` npm client, against the real engine on the demo model:
// create and stream (the events in Anthropic's order; the streamed Message equal to the
// non-streaming one at temperature 0), thinking against /v1/chat/completions' reasoning,
// `system` as a parameter and as a message inside `messages` (one prompt: the same answer
// and count, and the chat endpoint's answer), count_tokens equal to the prompt a create
// reports (tools included), stop sequences, max_tokens, auth by x-api-key or Bearer, and errors
// parsed by the SDK as its error classes (tool calls themselves: anthropic_tools.test.mjs). The demo model has random weights: the checks compare shapes,
// counts and greedy answers between endpoints, never the meaning of the text.
//
//   node anthropic_client.test.mjs --base URL [--api-key K]

import Anthropic from '@anthropic-ai/sdk';
import { config, Reporter, assert, assertEq, request, readSse, readyModel } from './lib.mjs';

const { base, apiKey } = config();
const r = new Reporter('anthropic-client');
const client = new Anthropic({ baseURL: base, apiKey: apiKey || 'no-key', maxRetries: 0, timeout: 60000 });

const model = await readyModel(r, 'anthropic/gateway-ready', base, apiKey, 30000);

const question = [{ role: 'user', content: 'Write a few words about the sea.' }];
const params = (extra = {}) => ({ model, max_tokens: 24, temperature: 0, messages: question, ...extra });
const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
const thinkingOf = (m) => m.content.filter((b) => b.type === 'thinking').map((b) => b.thinking).join('');
const promptTokens = (u) => u.input_tokens + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0);

function checkMessage(m, what, maxTokens) {
    assert(typeof m.id === 'string' && m.id.startsWith('msg_'), `${what}: id ${m.id}`);
    assertEq(m.type, 'message', `${what}: type`);
    assertEq(m.role, 'assistant', `${what}: role`);
    assertEq(m.model, model, `${what}: model`);
    assert(Array.isArray(m.content), `${what}: content is not an array`);
    for (const b of m.content) assert(['text', 'thinking', 'tool_use'].includes(b.type), `${what}: a ${b.type} block`);
    assert(['end_turn', 'max_tokens', 'stop_sequence', 'tool_use', 'model_context_window_exceeded'].includes(m.stop_reason),
        `${what}: stop_reason ${m.stop_reason}`);
    const u = m.usage;
    for (const k of ['input_tokens', 'output_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'])
        assert(Number.isInteger(u[k]) && u[k] >= 0, `${what}: usage.${k} = ${JSON.stringify(u[k])}`);
    assert(promptTokens(u) > 0, `${what}: no prompt tokens`);
    assert(u.output_tokens <= maxTokens, `${what}: output_tokens ${u.output_tokens} over ${maxTokens}`);
    if (m.stop_reason === 'max_tokens') assertEq(u.output_tokens, maxTokens, `${what}: output_tokens at stop_reason max_tokens`);
}

// The named events of a raw streamed request: [{event, data}] with data parsed.
async function rawStream(body, headers = {}) {
    const res = await fetch(`${base}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': apiKey, 'anthropic-version': '2023-06-01', ...headers },
        body: JSON.stringify({ ...body, stream: true }),
        signal: AbortSignal.timeout(60000),
    });
    assertEq(res.status, 200, 'stream status');
    assert((res.headers.get('content-type') || '').startsWith('text/event-stream'), `Content-Type ${res.headers.get('content-type')}`);
    return (await readSse(res)).map((e) => ({ event: e.event, data: JSON.parse(e.data) }));
}

// The order Anthropic's stream has and the SDK's MessageStream demands: message_start first,
// then each block's start, deltas and stop with indexes 0, 1, …, message_delta (with usage),
// message_stop last; pings anywhere; every event's name equal to its JSON type.
function checkOrder(events) {
    assert(events.length >= 3, `only ${events.length} events`);
    assertEq(events[0].event, 'message_start', 'first event');
    assertEq(events.at(-1).event, 'message_stop', 'last event');
    let next = 0, open = -1, deltas = 0, sawDelta = false;
    for (const { event, data } of events) {
        assertEq(data.type, event, `the JSON type of a ${event} event`);
        if (event === 'content_block_start') {
            assertEq(open, -1, 'a block started inside another');
            assertEq(data.index, next, 'content_block_start index');
            open = next++;
        } else if (event === 'content_block_delta') {
            assertEq(data.index, open, 'content_block_delta index');
            deltas++;
        } else if (event === 'content_block_stop') {
            assertEq(data.index, open, 'content_block_stop index');
            open = -1;
        } else if (event === 'message_delta') {
            assertEq(open, -1, 'message_delta inside a block');
            assert(Number.isInteger(data.usage?.output_tokens), 'message_delta without usage.output_tokens');
            assert(data.delta?.stop_reason, 'message_delta without stop_reason');
            sawDelta = true;
        } else {
            assert(['message_start', 'message_stop', 'ping'].includes(event), `unexpected event ${event}`);
        }
    }
    assert(sawDelta, 'no message_delta');
    return { blocks: next, deltas };
}

async function expectError(name, fn, status, Klass, type) {
    return r.check(name, async () => {
        let err;
        try { await fn(); } catch (e) { err = e; }
        assert(err, `expected HTTP ${status}, the call succeeded`);
        assert(err instanceof Klass, `expected ${Klass.name}, got ${err?.constructor?.name}: ${err?.message}`);
        assertEq(err.status, status, 'HTTP status');
        assertEq(err.error?.type, 'error', 'body type');
        assertEq(err.type, type, 'error.type');
        const message = err.error?.error?.message;
        assert(typeof message === 'string' && message.length, `no error.message in ${JSON.stringify(err.error)}`);
        assert(err.requestID, 'no request-id header');
        return `${err.status} ${err.type}: ${message.slice(0, 100)}`;
    });
}

// ------------------------------------------------------------------ create
let greedy = null;
await r.check('anthropic/create', async () => {
    const { data: m, response } = await client.messages.create(params()).withResponse();
    checkMessage(m, 'create', 24);
    assert((response.headers.get('content-type') || '').startsWith('application/json'), 'Content-Type');
    assert(response.headers.get('request-id'), 'no request-id header');
    assert(m.content.length === 1 && m.content[0].type === 'text', `content ${JSON.stringify(m.content)}`);
    assert(m.usage.output_tokens >= 1, 'no output tokens');
    assertEq(m.stop_sequence, null, 'stop_sequence');
    greedy = m;
    return `${promptTokens(m.usage)}+${m.usage.output_tokens} tokens, ${m.stop_reason}`;
});

await r.check('anthropic/create-deterministic', async () => {
    assert(greedy, 'needs anthropic/create');
    const m = await client.messages.create(params());
    assertEq(textOf(m), textOf(greedy), 'a second greedy run (temperature 0) differs');
    assertEq(promptTokens(m.usage), promptTokens(greedy.usage), 'prompt tokens of the same prompt');
});

// ------------------------------------------------------------------ streaming
await r.check('anthropic/stream-events-in-order', async () => {
    const events = await rawStream(params());
    const { blocks, deltas } = checkOrder(events);
    assertEq(events[0].data.message.stop_reason, null, 'message_start stop_reason');
    assertEq(JSON.stringify(events[0].data.message.content), '[]', 'message_start content');
    assertEq(blocks, 1, 'blocks');
    assert(deltas >= 1, 'no deltas');
    return `${events.length} events, ${deltas} deltas`;
});

await r.check('anthropic/stream-equals-create', async () => {
    assert(greedy, 'needs anthropic/create');
    const stream = client.messages.stream(params());
    const seen = [];
    stream.on('streamEvent', (e) => seen.push(e.type));
    const m = await stream.finalMessage();
    checkMessage(m, 'stream', 24);
    assertEq(textOf(m), textOf(greedy), 'streamed text vs create');
    assertEq(m.stop_reason, greedy.stop_reason, 'stop_reason');
    assertEq(m.usage.output_tokens, greedy.usage.output_tokens, 'output_tokens');
    assertEq(promptTokens(m.usage), promptTokens(greedy.usage), 'prompt tokens');
    assertEq(seen[0], 'message_start', 'first SDK event');
    assertEq(seen.at(-1), 'message_stop', 'last SDK event');
});

await r.check('anthropic/stream-iterated', async () => {
    assert(greedy, 'needs anthropic/create');
    const stream = await client.messages.create({ ...params(), stream: true });
    let text = '', stop = null;
    for await (const e of stream) {
        if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
        if (e.type === 'message_delta') stop = e.delta.stop_reason;
    }
    assertEq(text, textOf(greedy), 'text');
    assertEq(stop, greedy.stop_reason, 'stop_reason');
});

await r.check('anthropic/beta-client', async () => {
    // client.beta.messages appends ?beta=true: routed on the path alone.
    assert(greedy, 'needs anthropic/create');
    const m = await client.beta.messages.create({ ...params(), betas: ['structured-outputs-2025-12-15'] });
    assertEq(textOf(m), textOf(greedy), 'text');
});

// ------------------------------------------------------------------ thinking
await r.check('anthropic/thinking-equals-chat-reasoning', async () => {
    // thinking adaptive is effort 0.9, what reasoning_effort "high" renders: the same prompt,
    // so at temperature 0 the same reasoning and answer.
    const m = await client.messages.create(params({ max_tokens: 16, thinking: { type: 'adaptive' } }));
    checkMessage(m, 'thinking', 16);
    const c = await request(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
        body: { model, messages: question, max_tokens: 16, temperature: 0, reasoning_effort: 'high' },
    });
    assertEq(c.status, 200, 'chat status');
    const msg = c.json.choices[0].message;
    assertEq(thinkingOf(m), msg.reasoning_content || '', 'thinking vs reasoning_content');
    assertEq(textOf(m), msg.content, 'text vs content');
    assertEq(promptTokens(m.usage), c.json.usage.prompt_tokens, 'prompt tokens vs chat');
    const s = await client.messages.stream(params({ max_tokens: 16, thinking: { type: 'adaptive' } })).finalMessage();
    assertEq(JSON.stringify(s.content), JSON.stringify(m.content), 'streamed content blocks vs create');
    const kinds = m.content.map((b) => b.type).join(',');
    return `blocks ${kinds || 'none'}, ${m.stop_reason}`;
});

await r.check('anthropic/thinking-omitted', async () => {
    const shown = await client.messages.create(params({ max_tokens: 16, thinking: { type: 'adaptive' } }));
    const omitted = await client.messages.create(params({ max_tokens: 16, thinking: { type: 'adaptive', display: 'omitted' } }));
    assertEq(JSON.stringify(omitted.content.map((b) => b.type)), JSON.stringify(shown.content.map((b) => b.type)), 'block kinds');
    assertEq(thinkingOf(omitted), '', 'omitted thinking text');
    assertEq(textOf(omitted), textOf(shown), 'text');
});

// ------------------------------------------------------------------ system, both places
await r.check('anthropic/system-in-both-places', async () => {
    const system = 'You are a poet.';
    const top = await client.messages.create(params({ system }));
    const blocks = await client.messages.create(params({ system: [{ type: 'text', text: system, cache_control: { type: 'ephemeral' } }] }));
    const inside = await client.messages.create(params({ messages: [{ role: 'system', content: system }, ...question] }));
    assertEq(textOf(blocks), textOf(top), 'system blocks vs string');
    assertEq(textOf(inside), textOf(top), 'system message vs parameter');
    assertEq(promptTokens(inside.usage), promptTokens(top.usage), 'prompt tokens');
    const c = await request(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
        body: { model, messages: [{ role: 'system', content: system }, ...question], max_tokens: 24, temperature: 0 },
    });
    assertEq(c.status, 200, 'chat status');
    assertEq(textOf(top), c.json.choices[0].message.content, 'the chat endpoint\'s answer');
    assertEq(promptTokens(top.usage), c.json.usage.prompt_tokens, 'the chat endpoint\'s prompt tokens');
    const counted = await client.messages.countTokens({ model, system, messages: question });
    const countedInside = await client.messages.countTokens({ model, messages: [{ role: 'system', content: system }, ...question] });
    assertEq(counted.input_tokens, promptTokens(top.usage), 'count_tokens vs create');
    assertEq(countedInside.input_tokens, counted.input_tokens, 'count_tokens, system inside');
});

await r.check('anthropic/system-mid-conversation', async () => {
    // Newer agents put system messages after the first turn: applied at their place.
    const messages = [...question, { role: 'assistant', content: 'Waves.' }, { role: 'system', content: 'Answer in one word.' },
        { role: 'user', content: 'And the sky?' }];
    const m = await client.messages.create(params({ messages }));
    checkMessage(m, 'mid-conversation system', 24);
    const c = await request(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
        body: { model, messages, max_tokens: 24, temperature: 0 },
    });
    assertEq(textOf(m), c.json.choices[0].message.content, 'the chat endpoint\'s answer');
});

await r.check('anthropic/tools-auto-on-the-model', async () => {
    // The demo model is untrained for calls: whatever it does, the Message is well formed and
    // its prompt (tool declaration included) is what count_tokens counts.
    const tools = [{ name: 'get_weather', description: 'Weather by city',
        input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
    const m = await client.messages.create(params({ tools, tool_choice: { type: 'auto' } }));
    checkMessage(m, 'tools', 24);
    for (const b of m.content) assert(['text', 'thinking', 'tool_use'].includes(b.type), `a ${b.type} block`);
    if (m.content.some((b) => b.type === 'tool_use'))
        assert(['tool_use', 'max_tokens'].includes(m.stop_reason), `stop_reason ${m.stop_reason} with calls`);
    const counted = await client.messages.countTokens({ model, messages: question, tools, tool_choice: { type: 'auto' } });
    assertEq(counted.input_tokens, promptTokens(m.usage), 'count_tokens with tools');
    assert(counted.input_tokens > promptTokens(greedy.usage), 'the declaration added no tokens to the prompt');
    return `blocks ${m.content.map((b) => b.type).join(',') || 'none'}, ${m.stop_reason}`;
});

await r.check('anthropic/tool-choice-forced-on-the-model', async () => {
    // tool and any: the engine's constrained decoding makes the turn that call, its input
    // valid against the schema, even from the untrained demo model; streamed the same.
    const tools = [
        // maxLength bounds the strings an untrained model would otherwise run on with.
        { name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 12 },
            unit: { type: 'string', enum: ['c', 'f'] } }, required: ['city', 'unit'], additionalProperties: false } },
        { name: 'get_time', input_schema: { type: 'object', properties: { tz: { type: 'string', maxLength: 12 } }, required: ['tz'],
            additionalProperties: false } },
    ];
    const short = (v) => typeof v === 'string' && [...v].length <= 12;
    const valid = (b) => (b.name === 'get_weather' ? short(b.input?.city) && ['c', 'f'].includes(b.input?.unit)
        && Object.keys(b.input).length === 2 : short(b.input?.tz) && Object.keys(b.input).length === 1);
    const notes = [];
    for (const [choice, names] of [[{ type: 'tool', name: 'get_weather' }, ['get_weather']],
        [{ type: 'any', disable_parallel_tool_use: true }, ['get_weather', 'get_time']]]) {
        const p = params({ max_tokens: 200, tools, tool_choice: choice });
        const m = await client.messages.create(p);
        const calls = m.content.filter((b) => b.type === 'tool_use');
        assert(calls.length >= 1, `${choice.type}: no tool_use in ${JSON.stringify(m.content)}`);
        assertEq(m.stop_reason, 'tool_use', `${choice.type}: stop_reason`);
        for (const c of calls) {
            assert(names.includes(c.name), `${choice.type}: called ${c.name}`);
            assert(valid(c), `${choice.type}: input ${JSON.stringify(c.input)} does not match the schema`);
        }
        if (choice.disable_parallel_tool_use) assertEq(calls.length, 1, 'calls with disable_parallel_tool_use');
        const s = await client.messages.stream(p).finalMessage();
        assertEq(JSON.stringify(s.content.map((b) => [b.type, b.name, b.input])), JSON.stringify(m.content.map((b) => [b.type, b.name, b.input])),
            `${choice.type}: streamed vs created`);
        notes.push(`${choice.type}: ${calls.map((c) => `${c.name}${JSON.stringify(c.input)}`).join(' ')}`);
    }
    return notes.join('; ');
});

// ------------------------------------------------------------------ count_tokens
await r.check('anthropic/count-tokens-equals-create', async () => {
    const cases = [
        { messages: [{ role: 'user', content: `A question nobody asked before: ${Date.now()}` }] },
        { messages: question, system: 'Be terse.', thinking: { type: 'adaptive' } },
        { messages: [...question, { role: 'assistant', content: 'The sea is' }] },  // a prefill
    ];
    const notes = [];
    for (const c of cases) {
        const counted = await client.messages.countTokens({ model, ...c });
        assert(Number.isInteger(counted.input_tokens) && counted.input_tokens > 0, `input_tokens ${counted.input_tokens}`);
        const m = await client.messages.create({ model, max_tokens: 4, temperature: 0, ...c });
        assertEq(counted.input_tokens, promptTokens(m.usage), 'count_tokens vs the prompt a create reports');
        notes.push(counted.input_tokens);
    }
    return `counts ${notes.join(', ')}`;
});

// ------------------------------------------------------------------ stop sequences, max_tokens
await r.check('anthropic/stop-sequence', async () => {
    assert(greedy, 'needs anthropic/create');
    const text = textOf(greedy);
    // A piece of the greedy answer's middle that first occurs where it is taken from.
    let at = -1, stop = '';
    for (let i = Math.floor(text.length / 2); i + 2 <= text.length && at < 0; i++) {
        const piece = text.slice(i, i + 2);
        if (piece.trim().length === 2 && text.indexOf(piece) === i) { at = i; stop = piece; }
    }
    if (at < 0) return `skipped: no usable piece in ${JSON.stringify(text)}`;
    const m = await client.messages.create(params({ stop_sequences: ['never-seen-zz', stop] }));
    assertEq(m.stop_reason, 'stop_sequence', 'stop_reason');
    assertEq(m.stop_sequence, stop, 'stop_sequence');
    assertEq(textOf(m), text.slice(0, at), 'the text before the stop sequence');
    const s = await client.messages.stream(params({ stop_sequences: [stop] })).finalMessage();
    assertEq(s.stop_sequence, stop, 'streamed stop_sequence');
    assertEq(textOf(s), text.slice(0, at), 'streamed text');
    return `stopped at ${JSON.stringify(stop)}`;
});

await r.check('anthropic/max-tokens', async () => {
    assert(greedy, 'needs anthropic/create');
    if (greedy.usage.output_tokens <= 3) return `skipped: the greedy answer has ${greedy.usage.output_tokens} tokens`;
    const m = await client.messages.create(params({ max_tokens: 3 }));
    assertEq(m.stop_reason, 'max_tokens', 'stop_reason');
    assertEq(m.usage.output_tokens, 3, 'output_tokens');
    assert(textOf(greedy).startsWith(textOf(m)), 'not a prefix of the longer greedy answer');
});

await r.check('anthropic/sampling-fields', async () => {
    // top_k 1 is greedy whatever the temperature; metadata is accepted.
    assert(greedy, 'needs anthropic/create');
    const m = await client.messages.create(params({ temperature: 1, top_k: 1, top_p: 0.9, metadata: { user_id: 'u-1' } }));
    assertEq(textOf(m), textOf(greedy), 'top_k 1 vs temperature 0');
});

// ------------------------------------------------------------------ auth and headers
await r.check('anthropic/auth-bearer-and-no-version', async () => {
    const bearer = new Anthropic({ baseURL: base, authToken: apiKey, apiKey: null, maxRetries: 0, timeout: 60000 });
    const m = await bearer.messages.create(params({ max_tokens: 2 }));
    assertEq(m.type, 'message', 'type');
    const raw = await request(`${base}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
        body: { model, max_tokens: 2, messages: question },
    });
    assertEq(raw.status, 200, 'without anthropic-version');
});

await expectError('anthropic/error-auth', () => new Anthropic({ baseURL: base, apiKey: 'wrong-key', maxRetries: 0 })
    .messages.create(params()), 401, Anthropic.AuthenticationError, 'authentication_error');
await expectError('anthropic/error-count-tokens-auth', () => new Anthropic({ baseURL: base, apiKey: 'wrong-key', maxRetries: 0 })
    .messages.countTokens({ model, messages: question }), 401, Anthropic.AuthenticationError, 'authentication_error');

// ------------------------------------------------------------------ errors
await expectError('anthropic/error-max-tokens-required', () => client.messages.create({ model, messages: question }),
    400, Anthropic.BadRequestError, 'invalid_request_error');
await expectError('anthropic/error-image-refused', async () => {
    try {
        await client.messages.create(params({ messages: [{ role: 'user', content: [{ type: 'text', text: 'Look:' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] }] }));
    } catch (e) {
        assert(/messages\[0\]\.content\[1\].*image/.test(e.error?.error?.message), `message: ${e.error?.error?.message}`);
        throw e;
    }
}, 400, Anthropic.BadRequestError, 'invalid_request_error');
await expectError('anthropic/error-server-tool-refused', async () => {
    try {
        await client.messages.create(params({ tools: [{ type: 'web_search_20250305', name: 'web_search' }] }));
    } catch (e) {
        assert(/tools\[0\].*web_search_20250305/.test(e.error?.error?.message), `message: ${e.error?.error?.message}`);
        throw e;
    }
}, 400, Anthropic.BadRequestError, 'invalid_request_error');
await expectError('anthropic/error-unknown-model', () => client.messages.create(params({ model: 'claude-sonnet-4-5' })),
    404, Anthropic.NotFoundError, 'not_found_error');
await expectError('anthropic/error-temperature', () => client.messages.create(params({ temperature: 1.5 })),
    400, Anthropic.BadRequestError, 'invalid_request_error');
await expectError('anthropic/error-count-tokens-bad', () => client.messages.countTokens({ model, messages: [] }),
    400, Anthropic.BadRequestError, 'invalid_request_error');
await expectError('anthropic/error-stream-bad-request', () => client.messages.stream(params({ max_tokens: 0 })).finalMessage(),
    400, Anthropic.BadRequestError, 'invalid_request_error');

await r.check('anthropic/error-wrong-method', async () => {
    const res = await request(`${base}/v1/messages`, { headers: { 'x-api-key': apiKey } });
    assertEq(res.status, 405, 'GET /v1/messages');
    assertEq(res.json?.type, 'error', 'body type');
    assertEq(res.json?.error?.type, 'invalid_request_error', 'error.type');
});

await r.check('anthropic/error-unserved-messages-path', async () => {
    // Batches are not served: a 404 in Anthropic's shape, which the SDK raises as NotFoundError.
    let err;
    try { await client.beta.messages.batches.list(); } catch (e) { err = e; }
    assert(err instanceof Anthropic.NotFoundError, `expected NotFoundError, got ${err?.constructor?.name}: ${err?.message}`);
    assertEq(err.type, 'not_found_error', 'error.type');
});

r.finish();
