// Structured outputs through the official `openai` client on the real engine and the demo
// model, whose weights would never write JSON by themselves: `response_format` json_schema
// and json_object are enforced by the engine's constrained decoding
// (gateway/api/openai/response_format.h), so every answer parses and validates (ajv) on
// every seed; a schema construct the engine cannot enforce and a wrong envelope are 400s
// naming them; an answer cut by max_tokens says finish_reason "length" and is still the
// start of the JSON.
//
//   node structured_outputs.test.mjs --base URL --api-key K [--seeds 50]

import Ajv from 'ajv';
import OpenAI from 'openai';
import { LengthFinishReasonError } from 'openai/error';
import { jsonObjectPrefix } from './json_prefix.mjs';
import { config, Reporter, assert, assertEq, readyModel } from './lib.mjs';

const { args, base, apiKey } = config();
const r = new Reporter('structured');
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: apiKey || 'no-key', maxRetries: 0, timeout: 120000 });
const seeds = Number(args.seeds || 50);
const model = await readyModel(r, 'structured/ready', base, apiKey, 60000);

// Every string and array bounded, so each language is finite and 300 tokens always finish it:
// an answer that ends by "length" here would be a failure of the grammar, not of the budget.
// Properties are declared out of alphabetical order: the answer keeps the declared order.
const person = {
    type: 'object', additionalProperties: false, required: ['name', 'age', 'role', 'tags', 'home', 'score'],
    properties: {
        name: { type: 'string', maxLength: 12 },
        age: { type: 'integer', minimum: 0, maximum: 120 },
        role: { type: 'string', enum: ['admin', 'user', 'guest'] },
        tags: { type: 'array', items: { type: 'string', enum: ['a', 'b', 'c'] }, maxItems: 3 },
        home: { anyOf: [{ type: 'null' }, { type: 'object', additionalProperties: false, required: ['city', 'zip'],
            properties: { city: { type: 'string', maxLength: 8 }, zip: { type: 'integer', minimum: 0, maximum: 99999 } } }] },
        score: { type: ['number', 'null'] },
    },
};
const schemas = {
    person,
    // Arrays of objects, nested two deep, and a boolean.
    orders: { type: 'object', additionalProperties: false, required: ['orders', 'paid'], properties: {
        orders: { type: 'array', minItems: 1, maxItems: 3, items: { type: 'object', additionalProperties: false, required: ['sku', 'lines'],
            properties: { sku: { type: 'string', pattern: '^[A-Z]{3}[0-9]{2}$' },
                lines: { type: 'array', maxItems: 2, items: { type: 'integer', minimum: 1, maximum: 9 } } } } },
        paid: { type: 'boolean' } } },
    // anyOf of different types, const, and $defs with $ref.
    shapes: { type: 'object', additionalProperties: false, required: ['kind', 'value', 'origin', 'end'],
        $defs: { point: { type: 'object', additionalProperties: false, required: ['x', 'y'],
            properties: { x: { type: 'integer', minimum: -9, maximum: 9 }, y: { type: 'integer', minimum: -9, maximum: 9 } } } },
        properties: {
            kind: { const: 'line' },
            value: { anyOf: [{ type: 'integer', minimum: 0, maximum: 999 }, { type: 'string', maxLength: 5 }, { type: 'boolean' }] },
            origin: { $ref: '#/$defs/point' }, end: { $ref: '#/$defs/point' } } },
    // Optional properties (not in `required`): any subset, in the declared order.
    optional: { type: 'object', additionalProperties: false, required: ['id'], properties: {
        zone: { type: 'string', enum: ['eu', 'us'] }, id: { type: 'integer', minimum: 1, maximum: 1000 },
        active: { type: 'boolean' }, label: { type: 'string', maxLength: 6 } } },
};
const ajv = new Ajv({ strict: false });
const validators = Object.fromEntries(Object.entries(schemas).map(([k, s]) => [k, ajv.compile(s)]));
const format = (name, strict = true) => ({ type: 'json_schema', json_schema: { name, schema: schemas[name], strict } });
const ask = (extra) => ({ model, messages: [{ role: 'user', content: 'Describe it as JSON.' }], max_tokens: 300, temperature: 1, ...extra });

// The answer parses and validates against schema `name`, its keys in the schema's order.
function checkAnswer(res, name, what) {
    const choice = res.choices[0];
    assertEq(choice.finish_reason, 'stop', `${what}: finish_reason (content ${JSON.stringify(choice.message.content)})`);
    let value;
    try { value = JSON.parse(choice.message.content); } catch (e) { throw new Error(`${what}: ${JSON.stringify(choice.message.content)} is not JSON`); }
    const valid = validators[name];
    assert(valid(value), `${what}: ${choice.message.content} fails the ${name} schema: ${ajv.errorsText(valid.errors)}`);
    const declared = Object.keys(schemas[name].properties);
    const keys = Object.keys(value);
    assertEq(keys.join(','), declared.filter((k) => keys.includes(k)).join(','), `${what}: key order`);
    return value;
}

await r.check(`structured/json_schema: the person schema on ${seeds} seeds, valid (ajv), keys in declared order`, async () => {
    const seen = new Set();
    for (let seed = 1; seed <= seeds; seed++) {
        const res = await client.chat.completions.create(ask({ seed, response_format: format('person') }));
        seen.add(res.choices[0].message.content);
        checkAnswer(res, 'person', `seed ${seed}`);
    }
    assert(seen.size > seeds / 2, `only ${seen.size} distinct answers in ${seeds} seeds: sampling is not at work`);
    return `${seen.size} distinct answers`;
}, 600000);

for (const name of ['orders', 'shapes', 'optional']) {
    await r.check(`structured/json_schema: the ${name} schema on 10 seeds, through chat.completions.parse (message.parsed)`, async () => {
        for (let seed = 1; seed <= 10; seed++) {
            const res = await client.chat.completions.parse(ask({ seed, response_format: format(name) }));
            const value = checkAnswer(res, name, `seed ${seed}`);
            assertEq(JSON.stringify(res.choices[0].message.parsed), JSON.stringify(value), `seed ${seed}: message.parsed`);
        }
    }, 300000);
}

await r.check('structured/json_schema: strict false is enforced as well', async () => {
    for (let seed = 1; seed <= 5; seed++)
        checkAnswer(await client.chat.completions.create(ask({ seed, response_format: format('orders', false) })), 'orders', `seed ${seed}`);
});

await r.check('structured/json_schema streamed: the deltas join into the non-streamed answer of the same seed', async () => {
    for (const seed of [3, 11]) {
        const whole = await client.chat.completions.create(ask({ seed, response_format: format('person') }));
        const stream = await client.chat.completions.create(ask({ seed, response_format: format('person'), stream: true }));
        let text = '', finish = null;
        for await (const chunk of stream) {
            const c = chunk.choices[0];
            if (!c) continue;
            text += c.delta?.content || '';
            finish = c.finish_reason || finish;
        }
        assertEq(text, whole.choices[0].message.content, `seed ${seed}: streamed vs whole`);
        assertEq(finish, 'stop', `seed ${seed}: streamed finish_reason`);
        checkAnswer(whole, 'person', `seed ${seed}`);
    }
    // The SDK's stream helper assembles the same answer.
    const final = await client.chat.completions.stream(ask({ seed: 5, response_format: format('shapes') })).finalChatCompletion();
    checkAnswer(final, 'shapes', 'ChatCompletionStream');
    const whole = await client.chat.completions.create(ask({ seed: 5, response_format: format('shapes') }));
    assertEq(final.choices[0].message.content, whole.choices[0].message.content, 'ChatCompletionStream vs whole');
});

await r.check('structured/json_object: every answer is a JSON object (cut ones the start of one), several complete', async () => {
    // Any object is an unbounded language: the demo model often rambles inside a string until
    // max_tokens; the answers that end are JSON objects, the cut ones still their beginning.
    let complete = 0;
    for (let seed = 1; seed <= 30; seed++) {
        const res = await client.chat.completions.create({ model, seed, max_tokens: 40, temperature: 1,
            messages: [{ role: 'user', content: 'Return an empty JSON object.' }], response_format: { type: 'json_object' } });
        const { content } = res.choices[0].message;
        const finish = res.choices[0].finish_reason;
        const prefix = jsonObjectPrefix(content);
        if (finish === 'stop') {
            const v = JSON.parse(content);
            assert(v !== null && typeof v === 'object' && !Array.isArray(v), `seed ${seed}: ${content} is not an object`);
            assert(prefix.complete, `seed ${seed}: complete`);
            complete++;
        } else {
            assertEq(finish, 'length', `seed ${seed}: finish_reason`);
            assert(!prefix.complete, `seed ${seed}: a complete object ended by length: ${content}`);
        }
    }
    assert(complete >= 3, `only ${complete} of 30 answers complete`);
    return `${complete} of 30 complete`;
}, 300000);

await r.check('structured/max_tokens cutting the JSON short: finish_reason "length", the start of the JSON; parse() throws LengthFinishReasonError', async () => {
    const res = await client.chat.completions.create(ask({ seed: 1, max_tokens: 6, response_format: format('person') }));
    assertEq(res.choices[0].finish_reason, 'length', 'finish_reason');
    assert(!jsonObjectPrefix(res.choices[0].message.content).complete, 'incomplete');
    let err;
    try { await client.chat.completions.parse(ask({ seed: 1, max_tokens: 6, response_format: format('person') })); } catch (e) { err = e; }
    assert(err instanceof LengthFinishReasonError, `expected LengthFinishReasonError, got ${err}`);
    return JSON.stringify(res.choices[0].message.content);
});

// One tool beside the schema: under auto the turn is the JSON answer or calls, each held to its schema.
const weather = { type: 'object', additionalProperties: false, required: ['city'], properties: { city: { type: 'string', maxLength: 10 } } };
const tools = [{ type: 'function', function: { name: 'get_weather', parameters: weather } }];
const validWeather = ajv.compile(weather);

await r.check('structured/json_schema with tools under auto: the answer validates, or the calls do', async () => {
    let answers = 0, called = 0;
    for (let seed = 1; seed <= 10; seed++) {
        const res = await client.chat.completions.create(ask({ seed, tools, response_format: format('optional') }));
        const { message, finish_reason: finish } = res.choices[0];
        if (message.tool_calls?.length) {
            called++;
            assert(['tool_calls', 'length'].includes(finish), `seed ${seed}: finish_reason ${finish}`);
            assertEq(message.content, null, `seed ${seed}: a calling turn has no text`);
            const whole = finish === 'tool_calls' ? message.tool_calls : message.tool_calls.slice(0, -1);  // the last may be cut
            for (const c of whole) {
                assertEq(c.function.name, 'get_weather', `seed ${seed}: name`);
                assert(validWeather(JSON.parse(c.function.arguments)), `seed ${seed}: ${c.function.arguments}`);
            }
        } else {
            answers++;
            checkAnswer(res, 'optional', `seed ${seed}`);
        }
    }
    return `${answers} answers, ${called} calling turns`;
}, 300000);

await r.check('structured/json_schema with a forced tool: the turn is the call (it has no text to shape)', async () => {
    const res = await client.chat.completions.create(ask({ seed: 2, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
        response_format: format('person') }));
    assertEq(res.choices[0].finish_reason, 'tool_calls', 'finish_reason');
    assert(validWeather(JSON.parse(res.choices[0].message.tool_calls[0].function.arguments)), 'arguments');
});

// The 400 a request gets, as the SDK reports it.
async function refusal(body, path = 'chat') {
    try {
        if (path === 'chat') await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], max_tokens: 8, ...body });
        else await client.completions.create({ model, prompt: 'x', max_tokens: 8, ...body });
    } catch (e) {
        assert(e instanceof OpenAI.APIError && e.status === 400, `expected a 400, got ${e}`);
        assertEq(e.type, 'invalid_request_error', 'type');
        return e;
    }
    throw new Error(`accepted: ${JSON.stringify(body).slice(0, 200)}`);
}

await r.check('structured/a schema construct the engine cannot enforce is a 400 naming it and where, never ignored', async () => {
    const cases = [
        [{ type: 'object', properties: { a: { oneOf: [{ type: 'string' }, { type: 'integer' }] } } }, 'oneOf', '/properties/a'],
        [{ type: 'object', properties: { n: { type: 'number', multipleOf: 3 } } }, 'multipleOf', '/properties/n'],
        [{ type: 'object', properties: { s: { not: { type: 'null' } } } }, 'not', '/properties/s'],
        [{ type: 'object', patternProperties: { '^x': { type: 'string' } } }, 'patternProperties', '/'],
        [{ type: 'object', properties: { t: { type: 'string', format: 'iri' } } }, 'iri', '/properties/t'],
        [{ type: 'object', if: { required: ['a'] }, then: { required: ['b'] } }, 'if', '/'],
    ];
    for (const [schema, keyword, where] of cases) {
        for (const strict of [true, false]) {
            const e = await refusal({ response_format: { type: 'json_schema', json_schema: { name: 'bad', schema, strict } } });
            assertEq(e.param, 'response_format.json_schema.schema', `${keyword}: param`);
            assert(e.message.includes(keyword) && e.message.includes(`schema at ${where}`), `${keyword}: the message names it and where: ${e.message}`);
        }
    }
    return `${cases.length} constructs`;
});

await r.check('structured/a wrong response_format envelope is a 400 naming the field', async () => {
    const js = (o) => ({ type: 'json_schema', json_schema: o });
    const cases = [
        ['json', 'response_format'],
        [{}, 'response_format.type'],
        [{ type: 'xml' }, 'response_format.type'],
        [{ type: 'json_schema' }, 'response_format.json_schema'],
        [js({ schema: person }), 'response_format.json_schema.name'],
        [js({ name: 'has space', schema: person }), 'response_format.json_schema.name'],
        [js({ name: 'p' }), 'response_format.json_schema.schema'],
        [js({ name: 'p', schema: [] }), 'response_format.json_schema.schema'],
        [js({ name: 'p', schema: person, strict: 'true' }), 'response_format.json_schema.strict'],
        [js({ name: 'p', schema: person, schemas: {} }), 'response_format.json_schema.schemas'],
    ];
    for (const [rf, param] of cases) assertEq((await refusal({ response_format: rf })).param, param, JSON.stringify(rf).slice(0, 60));
    assertEq((await refusal({ response_format: { type: 'json_object' }, reasoning_effort: 'high' })).param, 'reasoning_effort',
        'JSON with reasoning');
    assertEq((await refusal({ response_format: { type: 'json_object' } }, 'completions')).param, 'response_format',
        '/v1/completions has no response_format');
    return `${cases.length + 2} refusals`;
});

await r.check('structured/response_format text is plain text, as without it', async () => {
    const a = await client.chat.completions.create(ask({ seed: 4, max_tokens: 24, response_format: { type: 'text' } }));
    const b = await client.chat.completions.create(ask({ seed: 4, max_tokens: 24 }));
    assertEq(a.choices[0].message.content, b.choices[0].message.content, 'text vs none');
});

r.finish();
