// Forced tool choices through the official `openai` client on the real engine and the demo
// model, whose random weights would never call a tool by themselves: `tool_choice` naming a
// function and `required` are enforced by the engine's constrained decoding (the gateway
// sends the call's grammar, gateway/generation/tool_constraint.h), so the answer is that
// call, its arguments valid against the function's JSON Schema (checked with ajv), on every
// seed.
//
//   node tool_choice.test.mjs --base URL --api-key K [--seeds 50]

import Ajv from 'ajv';
import OpenAI from 'openai';
import { config, Reporter, assert, assertEq, readyModel } from './lib.mjs';

const { args, base, apiKey } = config();
const r = new Reporter('tool-choice');
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: apiKey || 'no-key', maxRetries: 0, timeout: 120000 });
const seeds = Number(args.seeds || 50);
const model = await readyModel(r, 'tool-choice/ready', base, apiKey, 60000);

const weather = { type: 'object', additionalProperties: false, required: ['city', 'unit'],
    properties: { city: { type: 'string', maxLength: 16 }, unit: { type: 'string', enum: ['c', 'f'] },
        days: { type: 'integer' }, hourly: { type: 'boolean' } } };
const clock = { type: 'object', additionalProperties: false, required: ['tz'],
    properties: { tz: { type: 'string', enum: ['UTC', 'Europe/Oslo', 'Asia/Tokyo'] }, precise: { type: 'boolean' } } };
const tools = [
    { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weather, strict: true } },
    { type: 'function', function: { name: 'get_time', description: 'The time in a zone', parameters: clock } },
];
const ajv = new Ajv({ strict: false });
const validators = { get_weather: ajv.compile(weather), get_time: ajv.compile(clock) };
const ask = (extra) => ({ model, messages: [{ role: 'user', content: 'What is it like in Oslo?' }], tools, max_tokens: 200, temperature: 1, ...extra });

// One call, named as allowed, arguments parsing and valid against that function's schema.
function checkCall(res, allowed, what) {
    const choice = res.choices[0];
    assertEq(choice.finish_reason, 'tool_calls', `${what}: finish_reason`);
    const calls = choice.message.tool_calls || [];
    assert(calls.length >= 1, `${what}: no tool_calls (content ${JSON.stringify(choice.message.content)})`);
    for (const c of calls) {
        assert(allowed.includes(c.function.name), `${what}: called ${c.function.name}, allowed ${allowed}`);
        let args;
        try { args = JSON.parse(c.function.arguments); } catch (e) { throw new Error(`${what}: arguments ${JSON.stringify(c.function.arguments)} are not JSON`); }
        const valid = validators[c.function.name];
        assert(valid(args), `${what}: ${c.function.arguments} fails ${c.function.name}'s schema: ${ajv.errorsText(valid.errors)}`);
    }
    return calls;
}

await r.check(`tool-choice/named: get_weather on ${seeds} seeds, arguments valid against its schema (ajv)`, async () => {
    const seen = new Set();
    for (let seed = 1; seed <= seeds; seed++) {
        const res = await client.chat.completions.create(ask({ seed, tool_choice: { type: 'function', function: { name: 'get_weather' } } }));
        const calls = checkCall(res, ['get_weather'], `seed ${seed}`);
        assertEq(calls.length, 1, `seed ${seed}: calls`);
        seen.add(calls[0].function.arguments);
    }
    return `${seen.size} distinct argument sets`;
}, 600000);

await r.check('tool-choice/required with two tools: a call to one of them, valid, on 20 seeds', async () => {
    const names = new Set();
    for (let seed = 1; seed <= 20; seed++) {
        const res = await client.chat.completions.create(ask({ seed, tool_choice: 'required', parallel_tool_calls: false }));
        const calls = checkCall(res, ['get_weather', 'get_time'], `seed ${seed}`);
        assertEq(calls.length, 1, `seed ${seed}: parallel_tool_calls false gives one call`);
        names.add(calls[0].function.name);
    }
    return `called: ${[...names].join(', ')}`;
}, 600000);

await r.check('tool-choice/named, streamed: the deltas assemble into a valid call (ChatCompletionStream)', async () => {
    const final = await client.chat.completions.stream(ask({ seed: 7, tool_choice: { type: 'function', function: { name: 'get_time' } } }))
        .finalChatCompletion();
    const calls = checkCall(final, ['get_time'], 'stream');
    const whole = await client.chat.completions.create(ask({ seed: 7, tool_choice: { type: 'function', function: { name: 'get_time' } } }));
    assertEq(calls[0].function.arguments, whole.choices[0].message.tool_calls[0].function.arguments, 'streamed vs whole (same seed)');
    return calls[0].function.arguments;
});

await r.check('tool-choice/a schema the engine cannot enforce is a 400 naming the keyword, never ignored', async () => {
    const bad = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { not: { type: 'string' } } } } } }];
    let err;
    try { await client.chat.completions.create(ask({ tools: bad, tool_choice: 'required' })); } catch (e) { err = e; }
    assert(err instanceof OpenAI.APIError && err.status === 400, `expected a 400, got ${err}`);
    assert(/'not'/.test(err.message) && /properties\/a/.test(err.message), `the message names the keyword and where: ${err.message}`);
    return err.message.slice(0, 120);
});

r.finish();
