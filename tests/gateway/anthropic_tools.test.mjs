// Anthropic tool use through the official `@anthropic-ai/sdk` client, against a gateway whose
// engine is tests/gateway/fake_engine.py answering every turn with the tokens of
// fixtures/tool_calls_reply.json (text, then two calls in Inkling's own format, arguments split
// across DATA frames) and recording each SUBMIT (--fake-record), so the prompt the gateway
// rendered is checked byte for byte: tool_use blocks (streamed as input_json_delta) and
// stop_reason tool_use; the declaration block; a tool_use → tool_result round trip rendered
// exactly as the chat endpoint renders the same history; tool_choice none, any and tool (sent as
// the engine's constraint), disable_parallel_tool_use. The demo model never calls a tool by itself.
//
//   node anthropic_tools.test.mjs --base URL --api-key K --record FILE
//        FILE: the fake engine's --fake-record file (one JSON line per SUBMIT)

import fs from 'node:fs';
import Anthropic from '@anthropic-ai/sdk';
import { config, Reporter, assert, assertEq, request, waitHealthy, modelId, canonicalJson as canonical, lastRecordedPrompt } from './lib.mjs';

const { args, base, apiKey } = config();
const r = new Reporter('anthropic-tools');
const client = new Anthropic({ baseURL: base, apiKey: apiKey || 'no-key', maxRetries: 0, timeout: 60000 });
const recordFile = args.record;

const tools = [
    { name: 'get_weather', description: 'The weather in a city now',
        input_schema: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] } },
            required: ['city', 'unit'] } },
    { name: 'get_time', input_schema: { type: 'object', properties: { tz: { type: 'string' } } } },
];
const expected = [
    { name: 'get_weather', input: { city: 'Oslo', unit: 'c' } },
    { name: 'get_time', input: { tz: 'Europe/Oslo' } },
];
const question = [{ role: 'user', content: 'Weather and time in Oslo?' }];
let model;
const ask = (extra = {}) => ({ model, max_tokens: 256, messages: question, tools, ...extra });

const lastPrompt = () => lastRecordedPrompt(recordFile);
const callsOf = (m) => m.content.filter((b) => b.type === 'tool_use').map((b) => ({ name: b.name, input: b.input }));

try {
    await waitHealthy(base, 30000);
    model = await modelId(base, apiKey);
    assert(recordFile, '--record FILE is required');
} catch (err) {
    r.fail('anthropic-tools/ready', err);
    r.finish();
}

let whole;
await r.check('anthropic-tools/create: text, two tool_use blocks, stop_reason tool_use', async () => {
    whole = await client.messages.create(ask());
    assertEq(whole.stop_reason, 'tool_use', 'stop_reason');
    assertEq(whole.content.length, 3, 'blocks');
    assertEq(whole.content[0].type, 'text', 'block 0');
    assertEq(whole.content[0].text, 'Checking both.', 'text');
    assertEq(JSON.stringify(callsOf(whole)), JSON.stringify(expected), 'calls');
    const ids = whole.content.slice(1).map((b) => b.id);
    assert(ids.every((id) => /^toolu_/.test(id)) && ids[0] !== ids[1], `ids ${ids}`);
});

await r.check('anthropic-tools/declared as the model was trained; a bare generation prompt', async () => {
    const prompt = lastPrompt();
    const declared = tools.map((t) => ({ description: t.description ?? '', name: t.name, parameters: t.input_schema, type: 'function' }));
    assert(prompt.startsWith(`<|message_system|>tool_declare<|content_xml|>${canonical(declared)}<|end_message|>`),
        `prompt starts ${JSON.stringify(prompt.slice(0, 200))}`);
    assert(prompt.endsWith('<|message_model|>'), `prompt ends ${JSON.stringify(prompt.slice(-40))}`);
});

await r.check('anthropic-tools/stream: input_json_delta fragments assemble into the created calls', async () => {
    assert(whole, 'needs the create check');
    const stream = client.messages.stream(ask());
    let fragments = 0;
    stream.on('streamEvent', (e) => {
        if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') fragments++;
    });
    const m = await stream.finalMessage();
    assertEq(m.stop_reason, 'tool_use', 'stop_reason');
    assertEq(JSON.stringify(m.content.map((b) => b.type)), JSON.stringify(whole.content.map((b) => b.type)), 'block kinds');
    assertEq(JSON.stringify(callsOf(m)), JSON.stringify(callsOf(whole)), 'calls');
    assert(fragments >= 3, `${fragments} input_json_delta events (the fixture splits the first call's arguments)`);
});

await r.check('anthropic-tools/round trip: tool_use then tool_result, rendered as chat renders the same history', async () => {
    assert(whole, 'needs the create check');
    const results = whole.content.filter((b) => b.type === 'tool_use')
        .map((b, i) => ({ type: 'tool_result', tool_use_id: b.id, content: i === 0 ? '3C, rain' : [{ type: 'text', text: '14:05' }] }));
    await client.messages.create(ask({ messages: [...question, { role: 'assistant', content: whole.content },
        { role: 'user', content: results }] }));
    const anthropicPrompt = lastPrompt();
    assert(anthropicPrompt.includes('<|message_model|>get_weather<|content_invoke_tool_json|>{"name":"get_weather","args":{"city":"Oslo","unit":"c"}}<|end_message|>'),
        'the call in the history');
    assert(anthropicPrompt.includes('<|message_tool|>get_weather<|content_text|>3C, rain<|end_message|>'), 'the first result');
    assert(anthropicPrompt.includes('<|message_tool|>get_time<|content_text|>14:05<|end_message|>'), 'the second result');
    const chat = await request(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
        body: {
            model,
            tools: tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } })),
            messages: [...question,
                { role: 'assistant', content: 'Checking both.', tool_calls: expected.map((c, i) => ({ id: `c${i}`, type: 'function',
                    function: { name: c.name, arguments: JSON.stringify(c.input) } })) },
                { role: 'tool', tool_call_id: 'c0', content: '3C, rain' },
                { role: 'tool', tool_call_id: 'c1', content: '14:05' }],
        },
    });
    assertEq(chat.status, 200, 'chat status');
    assertEq(anthropicPrompt, lastPrompt(), 'the Messages API\'s rendering vs the chat endpoint\'s');
});

await r.check('anthropic-tools/tool_choice none: no declaration, no calls parsed', async () => {
    const m = await client.messages.create(ask({ tool_choice: { type: 'none' } }));
    assert(!lastPrompt().includes('tool_declare'), 'a declaration was rendered');
    assertEq(callsOf(m).length, 0, 'calls');
    assertEq(m.stop_reason, 'end_turn', 'stop_reason');
});

await r.check('anthropic-tools/disable_parallel_tool_use: the turn ends after its first call', async () => {
    const m = await client.messages.create(ask({ tool_choice: { type: 'auto', disable_parallel_tool_use: true } }));
    assertEq(JSON.stringify(callsOf(m)), JSON.stringify(expected.slice(0, 1)), 'calls');
    assertEq(m.stop_reason, 'tool_use', 'stop_reason');
});

await r.check('anthropic-tools/tool_choice any and tool: the SUBMIT carries the forced call as a constraint', async () => {
    // The scripted engine answers its fixture whatever it is sent; the real engine's constrained
    // decoding is anthropic_client.test.mjs's. Here: the constraint went out (SUBMIT grammar=N,
    // the extension's last N bytes), and auto sent none.
    const keysOf = () => {
        const lines = fs.readFileSync(recordFile, 'utf8').trim().split('\n');
        return JSON.stringify(JSON.parse(lines[lines.length - 1]).keys || {});
    };
    await client.messages.create(ask());
    assert(!/grammar/.test(keysOf()), `auto sent keys ${keysOf()}`);
    for (const choice of [{ type: 'any' }, { type: 'tool', name: 'get_time' }]) {
        const m = await client.messages.create(ask({ tool_choice: choice }));
        assertEq(m.stop_reason, 'tool_use', `${choice.type}: stop_reason`);
        assert(/grammar/.test(keysOf()), `${choice.type}: SUBMIT keys ${keysOf()}`);
    }
    let err;
    try { await client.messages.create(ask({ tool_choice: { type: 'tool', name: 'nope' } })); } catch (e) { err = e; }
    assert(err instanceof Anthropic.BadRequestError, `an undeclared tool: expected BadRequestError, got ${err?.constructor?.name}`);
    assert(/not among 'tools'/.test(err.error?.error?.message), `message: ${err.error?.error?.message}`);
});

r.finish();
