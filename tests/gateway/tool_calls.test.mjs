// OpenAI tool calling through the official `openai` client, against a gateway whose engine is
// tests/gateway/fake_engine.py answering every turn with the tokens of
// fixtures/tool_calls_reply.json (text, then two calls in Inkling's own format, arguments
// split across DATA frames) and recording each SUBMIT (--fake-record), so the prompt the
// gateway rendered is checked byte for byte. The demo model has random weights and never
// calls a tool by itself; the model-side checks (log-probs) are logprobs.test.mjs's.
//
//   node tool_calls.test.mjs --base URL --api-key K --record FILE
//        FILE: the fake engine's --fake-record file (one JSON line per SUBMIT)

import OpenAI from 'openai';
import { config, Reporter, assert, assertEq, waitHealthy, modelId, canonicalJson, lastRecordedPrompt } from './lib.mjs';

const { args, base, apiKey } = config();
const r = new Reporter('tool-calls');
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: apiKey || 'no-key', maxRetries: 0, timeout: 60000 });
const recordFile = args.record;

const tools = [
    { type: 'function', function: { name: 'get_weather', description: 'The weather in a city now', strict: true,
        parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] } },
            required: ['city', 'unit'], additionalProperties: false } } },
    { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } } },
];
const expected = [
    { name: 'get_weather', arguments: '{"city":"Oslo","unit":"c"}' },
    { name: 'get_time', arguments: '{"tz":"Europe/Oslo"}' },
];
let model;
const ask = (extra = {}) => ({ model, messages: [{ role: 'user', content: 'Weather and time in Oslo?' }], tools, ...extra });

const lastPrompt = () => lastRecordedPrompt(recordFile);
const canonical = canonicalJson;
const callsOf = (message) => (message.tool_calls || []).map((c) => ({ name: c.function.name, arguments: c.function.arguments }));

try {
    await waitHealthy(base, 30000);
    model = await modelId(base, apiKey);
    assert(recordFile, '--record FILE is required');
} catch (err) {
    r.fail('tool-calls/ready', err);
    r.finish();
}

let whole;
await r.check('tool-calls/non-streaming: two calls, finish_reason tool_calls, arguments a JSON string', async () => {
    whole = await client.chat.completions.create(ask());
    const choice = whole.choices[0];
    assertEq(choice.finish_reason, 'tool_calls', 'finish_reason');
    assertEq(choice.message.content, 'Checking both.', 'content');
    assertEq(JSON.stringify(callsOf(choice.message)), JSON.stringify(expected), 'calls');
    const ids = choice.message.tool_calls.map((c) => c.id);
    assert(ids.every((id) => /^call_[0-9a-f]+_\d+$/.test(id)), `ids ${ids}`);
    assertEq(new Set(ids).size, 2, 'distinct ids');
    assert(choice.message.tool_calls.every((c) => c.type === 'function'), 'type function');
    JSON.parse(choice.message.tool_calls[0].function.arguments);
    return ids.join(', ');
});

await r.check('tool-calls/declaration rendered first, the generation prompt left bare', async () => {
    const decl = canonical(tools.map((t) => ({ description: t.function.description ?? '', name: t.function.name,
        parameters: t.function.parameters ?? {}, type: 'function' })));
    const want = `<|message_system|>tool_declare<|content_xml|>${decl}<|end_message|>` +
        '<|message_system|><|content_text|>Thinking effort level: 0<|end_message|>' +
        '<|message_user|><|content_text|>Weather and time in Oslo?<|end_message|><|message_model|>';
    assertEq(lastPrompt(), want, 'prompt');
});

await r.check('tool-calls/streaming: chat.completions.stream() assembles the same calls', async () => {
    const stream = client.chat.completions.stream(ask());
    const final = await stream.finalChatCompletion();
    const choice = final.choices[0];
    assertEq(choice.finish_reason, 'tool_calls', 'finish_reason');
    assertEq(choice.message.content, 'Checking both.', 'content');
    assertEq(JSON.stringify(callsOf(choice.message)), JSON.stringify(callsOf(whole.choices[0].message)), 'calls');
    assert(choice.message.tool_calls.every((c) => /^call_/.test(c.id)), 'ids');
});

await r.check('tool-calls/streaming deltas: index, id, type and name first, then argument fragments', async () => {
    const stream = await client.chat.completions.create({ ...ask(), stream: true });
    const firsts = new Map();
    let fragments = 0, finish = null;
    for await (const chunk of stream) {
        const c = chunk.choices[0];
        if (!c) continue;
        if (c.finish_reason) finish = c.finish_reason;
        for (const d of c.delta?.tool_calls ?? []) {
            if (!firsts.has(d.index)) {
                assert(d.id && d.type === 'function' && d.function?.name, `first delta of call ${d.index}: ${JSON.stringify(d)}`);
                assertEq(d.function.arguments, '', 'first delta arguments');
                firsts.set(d.index, d.function.name);
            } else {
                assert(d.id === undefined && d.function?.name === undefined, `later delta names again: ${JSON.stringify(d)}`);
                fragments++;
            }
        }
    }
    assertEq(JSON.stringify([...firsts.values()]), JSON.stringify(['get_weather', 'get_time']), 'calls by index');
    assert(fragments >= 3, `only ${fragments} argument fragments (the arguments straddle DATA frames)`);
    assertEq(finish, 'tool_calls', 'finish_reason');
    return `${fragments} argument fragments`;
});

await r.check('tool-calls/tool_choice none: no declaration, the calls stay text', async () => {
    const res = await client.chat.completions.create(ask({ tool_choice: 'none' }));
    const choice = res.choices[0];
    assertEq(choice.finish_reason, 'stop', 'finish_reason');
    assert(!choice.message.tool_calls, 'no tool_calls');
    assert(!lastPrompt().includes('tool_declare'), 'the declaration was rendered');
    assert(lastPrompt().endsWith('<|message_model|><|content_text|>'), 'the answer channel is opened as without tools');
});

await r.check('tool-calls/tool_choice auto is the default and parallel_tool_calls false keeps one call', async () => {
    const res = await client.chat.completions.create(ask({ tool_choice: 'auto', parallel_tool_calls: false }));
    assertEq(res.choices[0].finish_reason, 'tool_calls', 'finish_reason');
    assertEq(JSON.stringify(callsOf(res.choices[0].message)), JSON.stringify(expected.slice(0, 1)), 'calls');
});

await r.check('tool-calls/a tool-result turn round trip renders the spec\'s history exactly', async () => {
    const calls = whole.choices[0].message.tool_calls;
    const messages = [
        { role: 'user', content: 'Weather and time in Oslo?' },
        { role: 'assistant', content: null, tool_calls: calls },
        { role: 'tool', tool_call_id: calls[0].id, content: '3C, rain' },
        { role: 'tool', tool_call_id: calls[1].id, content: [{ type: 'text', text: '14:05' }] },
    ];
    const res = await client.chat.completions.create({ model, messages, tools });
    assert(res.choices[0].message, 'an answer');
    const history = calls.map((c) => `<|message_model|>${c.function.name}<|content_invoke_tool_json|>` +
        `{"name":${JSON.stringify(c.function.name)},"args":${canonical(JSON.parse(c.function.arguments))}}<|end_message|>`).join('') +
        '<|content_model_end_sampling|>' +
        '<|message_tool|>get_weather<|content_text|>3C, rain<|end_message|>' +
        '<|message_tool|>get_time<|content_text|>14:05<|end_message|><|message_model|>';
    const prompt = lastPrompt();
    assert(prompt.endsWith('<|message_user|><|content_text|>Weather and time in Oslo?<|end_message|>' + history),
        `the prompt's tail: ${JSON.stringify(prompt.slice(-400))}`);
});

await r.check('tool-calls/bad tools are 400s naming the field', async () => {
    let err;
    try { await client.chat.completions.create(ask({ tools: [{ type: 'function', function: { name: 'has space' } }] })); } catch (e) { err = e; }
    assert(err instanceof OpenAI.APIError && err.status === 400, `expected a 400, got ${err}`);
    assertEq(err.param, 'tools[0].function.name', 'param');
});

r.finish();
