// The web UI's Device card (#14 item 5) in headless Chromium (Debian's chromium driven by
// playwright-core), over three gateways this suite starts on the trained demo model (a tiny
// MoE: 8 routed experts, top-2):
// - the engine with --vulkan on (lavapipe): after one chat turn through the page, the card
//   shows the device's name and type as /v1/stats has them, and memory used / budget, the
//   experts' bytes, the resident and tiered layers, the slots, the routed pairs on each side
//   and the steps equal to /metrics' inkling_device_* figures (the numbers: data-value, and
//   the text read back within its rounding); resident: every pair on the device, none on
//   the host, one wait a step; the meter's two segments are the experts' and the rest's
//   shares of the budget;
// - a 14 MiB budget, so each MoE layer has fewer slots than experts (a tier): pairs on the
//   host, the device's share and the tier's slots, uploads and evictions as /metrics says;
// - --vulkan off: the card says "CPU only" and hides the figures;
// - an older engine (tests/gateway/fake_engine.py --fake-stats: a `device` object with only
//   name, memory and layers): the figures it lacks show "—", never NaN or undefined.
//
//   node web_device.test.mjs [--build BUILD] [--chromium PATH] [--screenshot PATH]

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium } from './browser.mjs';
import { config, Reporter, assert, assertEq, request, sleep, stats, waitHealthy } from './lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const { args } = config();
const build = path.resolve(args.build || path.join(root, 'build'));
const demo = path.join(root, 'models', 'inkling-demo');
const logDir = path.join(build, 'test-logs');
const screenshot = args.screenshot || path.join(build, 'gateway-web-device.png');
const executablePath = args.chromium || process.env.CHROMIUM || '/usr/bin/chromium';
const DEADLINE_MS = 120000;
const r = new Reporter('web-device');

if (!fs.existsSync(executablePath)) {
    r.fail('web-device/chromium', `${executablePath} not found (Debian package: chromium)`);
    r.finish();
}
fs.mkdirSync(logDir, { recursive: true });

// ------------------------------------------------------------------ gateways

function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
        s.on('error', reject);
    });
}

const gateways = [];
// The demo model behind inkling-gateway with `extra` arguments, once /health answers 200.
async function startGateway(name, extra) {
    const port = await freePort();
    const logPath = path.join(logDir, `web-device-${name}-gateway.log`);
    const log = fs.openSync(logPath, 'w');
    const proc = spawn(path.join(build, 'inkling-gateway'), ['--model', `demo=${demo}`, '--ctx', '512', '--threads', '2',
        '--slots', '1', '--host', '127.0.0.1', '--port', String(port), ...extra], { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve(code ?? signal)));
    const g = { name, base: `http://127.0.0.1:${port}`, proc, exited, logPath };
    gateways.push(g);
    const gone = exited.then((why) => { throw new Error(`the gateway exited (${why}) before /health answered 200; see ${logPath}`); });
    await Promise.race([waitHealthy(g.base, DEADLINE_MS), gone]);
    return g;
}
// SIGTERM (the gateway drains and stops its engine), SIGKILL when it is still there 30 s on.
async function stopGateway(g) {
    if (g.proc.exitCode !== null || g.proc.signalCode !== null) return;
    g.proc.kill('SIGTERM');
    const killed = await Promise.race([g.exited.then(() => false), sleep(30000).then(() => true)]);
    if (killed) { g.proc.kill('SIGKILL'); await g.exited; }
}

// {name: value} of /metrics' samples with the label model="demo".
async function metrics(base) {
    const res = await request(`${base}/metrics`, { timeoutMs: 10000 });
    assert(res.status === 200, `/metrics answered ${res.status}`);
    const out = {};
    for (const m of res.text.matchAll(/^(\w+)\{model="demo"\} (\S+)$/gm)) out[m[1]] = Number(m[2]);
    return out;
}

// ------------------------------------------------------------------ the page

const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'inkling-chromium-'));
const fakeStats = path.join(userDataDir, 'older-engine-stats.json');
let context;
const pageErrors = [];
async function cleanup() {
    try { await context?.close(); } catch { /* already gone */ }
    for (const g of gateways) await stopGateway(g);
    fs.rmSync(userDataDir, { recursive: true, force: true });
}
const watchdog = setTimeout(async () => {
    r.fail('web-device/watchdog', 'the suite ran past 420 s');
    await cleanup();
    r.finish();
}, 420000);

try {
    context = await launchChromium(executablePath, userDataDir, { width: 1280, height: 1400 });
} catch (err) {
    r.fail('web-device/launch', err);
    await cleanup();
    clearTimeout(watchdog);
    r.finish();
}
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(30000);
page.on('pageerror', (err) => pageErrors.push(String(err)));

const text = async (id) => (await page.locator('#' + id).textContent()).trim();
const value = async (id) => {
    const v = await page.locator('#' + id).getAttribute('data-value');
    return v === null ? undefined : Number(v);
};
// "12.3 MiB" → bytes, and half its last digit: what a figure shown so may be off by.
function shownBytes(s) {
    const m = /^([\d.]+) (B|KiB|MiB|GiB|TiB)$/.exec(s);
    assert(m, `'${s}' is not a size`);
    const unit = 1024 ** ['B', 'KiB', 'MiB', 'GiB', 'TiB'].indexOf(m[2]);
    return { bytes: Number(m[1]) * unit, slack: m[2] === 'B' ? 0 : 0.05 * unit + 1e-6 };
}
function assertBytes(shown, want, what) {
    const { bytes, slack } = shownBytes(shown);
    assert(Math.abs(bytes - want) <= slack, `${what} shows '${shown}', /metrics says ${want} bytes`);
}
async function cardText() { return page.locator('#device-figures').innerText(); }
function assertNoJunk(s, where) {
    assert(!/NaN|undefined|null|Infinity|\[object/.test(s), `${where} shows junk: ${s.replace(/\s+/g, ' ')}`);
}
async function open(g) {
    const res = await page.goto(`${g.base}/`, { waitUntil: 'load' });
    assert(res && res.status() === 200, `GET / answered ${res && res.status()}`);
    await page.waitForFunction(() => document.getElementById('engine-state')?.textContent.trim() === 'ready', null,
        { timeout: DEADLINE_MS });
}

// One chat turn through the page's composer, to its end.
async function chatThroughPage() {
    await page.evaluate(() => { document.querySelector('details.options').open = true; });
    await page.fill('#max-tokens', '8');
    await page.fill('#temperature', '0');
    await page.fill('#prompt', 'Tell me a story.');
    await page.click('#send');
    await page.waitForFunction(() => document.getElementById('reply')?.dataset.state !== 'streaming', null,
        { timeout: DEADLINE_MS });
    assertEq(await page.getAttribute('#reply', 'data-state'), 'done', '#reply state');
}

// /metrics once the page shows the same device steps and tier uploads, after a turn. The
// page polls once a second and /metrics has the engine's last STATS: once both count the
// turn's steps and the uploads its steps started (they end on the tier's worker thread,
// maybe after the last step) they describe the same, idle, engine.
async function settled(gw) {
    let m = {};
    const same = async () => m.inkling_device_steps_total > 0 &&
        (await value('device-steps')) === m.inkling_device_steps_total &&
        Number(await page.locator('#device-tier').getAttribute('data-uploads')) === m.inkling_device_tier_uploads_total &&
        Number(await page.locator('#device-tier').getAttribute('data-evictions')) === m.inkling_device_tier_evictions_total;
    for (const end = Date.now() + DEADLINE_MS; Date.now() < end; await sleep(200)) {
        m = await metrics(gw.base);
        if (await same()) break;
    }
    assert(m.inkling_device_steps_total > 0, `/metrics counts ${m.inkling_device_steps_total} device steps after a turn`);
    assertEq(await value('device-steps'), m.inkling_device_steps_total, '#device-steps against inkling_device_steps_total');
    assert(await same(), `the page's tier uploads/evictions (${await page.locator('#device-tier').getAttribute('data-uploads')}/`
        + `${await page.locator('#device-tier').getAttribute('data-evictions')}) are not /metrics' `
        + `(${m.inkling_device_tier_uploads_total}/${m.inkling_device_tier_evictions_total})`);
    return m;
}

// The check `web-device/NAME-gateway-ready`: a gateway started and the page open on it,
// ready; the gateway, or null when that failed.
async function gatewayReady(name, extra) {
    let gw = null;
    await r.check(`web-device/${name}-gateway-ready`, async () => {
        gw = await startGateway(name, extra);
        await open(gw);
    }, DEADLINE_MS + 30000);
    return gw;
}

// ------------------------------------------------------------------ on the device (lavapipe)

let g = await gatewayReady('vulkan', ['--engine-arg=--vulkan=on']);
let slotBytes = null;  // one expert's slot, in device bytes (resident)

if (g) {
    await r.check('web-device/names-the-device', async () => {
        const info = (await stats(g.base, '')).models.demo.engine.info.device;
        assert(info && info.mode === 'vulkan' && info.name, `/v1/stats info.device is ${JSON.stringify(info)}`);
        await page.waitForFunction((name) => document.getElementById('device-name')?.textContent === name, info.name,
            { timeout: DEADLINE_MS });
        assert(await page.locator('#device-figures').isVisible(), '#device-figures is hidden on the device');
        assertEq(await text('device-type'), info.type, '#device-type');
        assert((await text('device-mem')).startsWith('Vulkan · '), `#device-mem shows '${await text('device-mem')}'`);
        return `${info.name} (${info.type})`;
    }, DEADLINE_MS);

    await r.check('web-device/chat-turn', chatThroughPage, DEADLINE_MS + 10000);

    await r.check('web-device/figures-match-metrics', async () => {
        const m = await settled(g);
        const used = m.inkling_device_memory_used_bytes, budget = m.inkling_device_memory_budget_bytes;
        const experts = m.inkling_device_expert_bytes;
        assert(used > 0 && budget >= used && experts > 0 && experts <= used, `/metrics: used ${used}, budget ${budget}, experts ${experts}`);
        for (const [id, want] of [['device-used', used], ['device-budget', budget], ['device-expert-bytes', experts],
            ['device-other-bytes', used - experts]]) {
            assertEq(await value(id), want, `#${id} data-value`);
            assertBytes(await text(id), want, '#' + id);
        }
        assert((await text('device-mem')).includes(`(${Math.round(100 * used / budget)} %)`),
            `#device-mem shows '${await text('device-mem')}', used ${used} of ${budget}`);
        // The meter: the experts' segment, then the rest's, as shares of the budget.
        const widths = await page.evaluate(() => ['device-split-experts', 'device-split-other']
            .map((id) => parseFloat(document.getElementById(id).style.width)));
        assert(Math.abs(widths[0] - 100 * experts / budget) < 1e-3 && Math.abs(widths[1] - 100 * (used - experts) / budget) < 1e-3,
            `meter segments ${widths[0]} % and ${widths[1]} %, expected ${100 * experts / budget} and ${100 * (used - experts) / budget}`);
        // The expert tier: the demo model resident on the device.
        for (const [id, name] of [['device-resident-layers', 'inkling_device_expert_layers'],
            ['device-tier-layers', 'inkling_device_tier_layers'], ['device-tier', 'inkling_device_tier_slots'],
            ['device-pairs', 'inkling_device_expert_pairs_total'], ['host-pairs', 'inkling_host_expert_pairs_total']]) {
            assertEq(await value(id), m[name], `#${id} against ${name}`);
        }
        const st = (await stats(g.base, '')).models.demo.engine.stats;
        // Resident: a slot for every expert of every MoE layer.
        assertEq(m.inkling_device_tier_slots, st.experts.rows * st.experts.cols, 'inkling_device_tier_slots');
        slotBytes = experts / m.inkling_device_tier_slots;
        assertEq(await value('device-moe-layers'), st.experts.rows, '#device-moe-layers against the residency map\'s rows');
        assert(m.inkling_device_expert_layers === st.experts.rows, `${m.inkling_device_expert_layers} of ${st.experts.rows} MoE layers resident`);
        assertEq(await text('device-format'), st.device.expert_format, '#device-format');
        assert(['f32', 'bf16', 'int8', 'int4'].includes(st.device.expert_format), `STATS expert_format '${st.device.expert_format}'`);
        assert(m.inkling_device_expert_pairs_total > 0 && m.inkling_host_expert_pairs_total === 0,
            `pairs: ${m.inkling_device_expert_pairs_total} on the device, ${m.inkling_host_expert_pairs_total} on the host`);
        assertEq(await text('device-pairs-share'), 'device 100 % of routed pairs', '#device-pairs-share');
        assert((await value('device-pairs-step')) > 0 && (await text('device-pairs-step')).endsWith(' 0.0 host'),
            `#device-pairs-step shows '${await text('device-pairs-step')}'`);
        // Resident: one wait a step, over the page's window and over every step.
        assertEq(m.inkling_device_waits_per_step, 1, 'inkling_device_waits_per_step');
        assertEq(await value('device-waits-step'), 1, '#device-waits-step');
        assertEq(await text('device-waits-step'), '1.00', '#device-waits-step text');
        assert((await value('device-frames-step')) >= 1, `#device-frames-step shows '${await text('device-frames-step')}'`);
        assert(/^per step: (the last|all) [\d,]+ steps/.test(await text('device-window')), `#device-window: '${await text('device-window')}'`);
        assertNoJunk(await cardText(), '#device-figures');
        await page.locator('#device-card').screenshot({ path: screenshot });
        return `used ${used}, budget ${budget}, experts ${experts}; ${m.inkling_device_expert_pairs_total} device pairs, `
            + `${m.inkling_device_steps_total} steps; frames/step ${await text('device-frames-step')}`;
    }, DEADLINE_MS + 30000);
    await stopGateway(g);
}

// ------------------------------------------------------------------ a tier: fewer slots than experts

// A 14 MiB budget leaves the routed experts ~5 MiB of their 8.4 MiB: every MoE layer gets a
// bank of fewer slots than experts, the host routes and computes the misses. The tier starts
// empty (the demo model has no usage file), so the first step's pairs are all the host's;
// how many the device computes later depends on the uploads' pace, so only the agreement
// with /metrics is checked for those.
g = await gatewayReady('tier', ['--engine-arg=--vulkan=on', '--engine-arg=--vk-budget-mb=14']);

if (g) {
    await r.check('web-device/tier-figures-match-metrics', async () => {
        await chatThroughPage();
        const m = await settled(g);
        assert(m.inkling_device_expert_layers === 0 && m.inkling_device_tier_layers > 0,
            `/metrics: ${m.inkling_device_expert_layers} resident layers, ${m.inkling_device_tier_layers} with slots`);
        for (const [id, name] of [['device-resident-layers', 'inkling_device_expert_layers'],
            ['device-tier-layers', 'inkling_device_tier_layers'], ['device-tier', 'inkling_device_tier_slots'],
            ['device-pairs', 'inkling_device_expert_pairs_total'], ['host-pairs', 'inkling_host_expert_pairs_total'],
            ['device-expert-bytes', 'inkling_device_expert_bytes']]) {
            assertEq(await value(id), m[name], `#${id} against ${name}`);
        }
        const d = m.inkling_device_expert_pairs_total, h = m.inkling_host_expert_pairs_total;
        assert(h > 0, `${h} host pairs in a tier that started empty`);
        const st = (await stats(g.base, '')).models.demo.engine.stats;
        assert(m.inkling_device_tier_slots > 0 && m.inkling_device_tier_slots < st.experts.rows * st.experts.cols,
            `${m.inkling_device_tier_slots} slots for ${st.experts.rows * st.experts.cols} experts`);
        if (slotBytes !== null) {
            assertEq(m.inkling_device_expert_bytes, slotBytes * m.inkling_device_tier_slots,
                'the tier\'s expert bytes against its slots × a resident slot\'s bytes');
        }
        const tierText = await text('device-tier');
        assert(tierText.includes(`${m.inkling_device_tier_uploads_total} uploads`) &&
            tierText.includes(`${m.inkling_device_tier_evictions_total} evictions`),
        `#device-tier shows '${tierText}', /metrics ${m.inkling_device_tier_uploads_total} uploads, ${m.inkling_device_tier_evictions_total} evictions`);
        // The share as a whole percent, under 100 while the host computed some.
        const share = await text('device-pairs-share');
        const shown = /^device (< 1|\d+) % of routed pairs$/.exec(share);
        assert(shown, `#device-pairs-share shows '${share}'`);
        const want = 100 * d / (d + h);
        assert(shown[1] === '< 1' ? d > 0 && want < 0.5 : Math.abs(Number(shown[1]) - want) <= 1 && Number(shown[1]) < 100,
            `#device-pairs-share shows '${share}' for ${d} device and ${h} host pairs`);
        assertEq(await value('device-pairs-share'), d / (d + h), '#device-pairs-share data-value');
        assertNoJunk(await cardText(), '#device-figures');
        return `${share}: ${d} device, ${h} host pairs; ${tierText}`;
    }, 2 * DEADLINE_MS + 30000);
    await stopGateway(g);
}

// ------------------------------------------------------------------ on the CPU

g = await gatewayReady('cpu', ['--engine-arg=--vulkan=off']);

if (g) {
    await r.check('web-device/cpu-only', async () => {
        const res = await request(`${g.base}/v1/chat/completions`, {
            method: 'POST', headers: { 'Content-Type': 'application/json' }, timeoutMs: DEADLINE_MS,
            body: { model: 'demo', max_tokens: 4, temperature: 0, messages: [{ role: 'user', content: 'Hi.' }] },
        });
        assertEq(res.status, 200, 'the chat request\'s status');
        // A poll after the turn: its stats frame rendered (not the page's first state).
        await page.waitForFunction(() => Number((document.getElementById('tokens-generated')?.textContent || '')
            .replace(/,/g, '')) > 0, null, { timeout: DEADLINE_MS });
        const device = (await stats(g.base, '')).models.demo.engine.stats.device;
        assert(!device || device.mode === 'cpu', `/v1/stats device is ${JSON.stringify(device)}`);
        assertEq(await text('device-mem'), 'CPU only', '#device-mem');
        assert(await page.locator('#device-figures').isHidden(), '#device-figures shows on the CPU');
    }, DEADLINE_MS + 10000);
    await stopGateway(g);
}

// ------------------------------------------------------------------ an older engine

const OLD = { name: 'Older GPU', memory_used: 123456789, memory_budget: 4294967296, layers: 6 };
fs.writeFileSync(fakeStats, JSON.stringify({ kind: 'stats', active: 0, rss_gb: 0.25, device: OLD }));
g = await gatewayReady('older', ['--engine', path.join(here, 'fake_engine.py'), '--engine-arg=--fake-stats',
    `--engine-arg=${fakeStats}`]);

if (g) {
    await r.check('web-device/older-engine-dashes', async () => {
        await page.waitForFunction((name) => document.getElementById('device-name')?.textContent === name, OLD.name,
            { timeout: DEADLINE_MS });
        assertEq(await value('device-used'), OLD.memory_used, '#device-used');
        assertEq(await value('device-budget'), OLD.memory_budget, '#device-budget');
        assertBytes(await text('device-used'), OLD.memory_used, '#device-used');
        for (const id of ['device-type', 'device-expert-bytes', 'device-other-bytes', 'device-resident-layers',
            'device-tier-layers', 'device-tier', 'device-format', 'device-pairs', 'host-pairs', 'device-pairs-share',
            'device-frames-step', 'device-waits-step', 'device-steps']) {
            const t = await text(id);
            assert(t === '—', `#${id} shows '${t}' for a figure the engine did not send`);
            assertEq(await value(id), undefined, `#${id} data-value`);
        }
        assertEq(await text('device-pairs-step'), '— device · — host', '#device-pairs-step');
        assertEq(await text('device-layers'), '6', '#device-layers');
        assertNoJunk(await cardText(), '#device-figures');
        assertNoJunk(await text('device-mem'), '#device-mem');
    }, DEADLINE_MS);
    await stopGateway(g);
}

await r.check('web-device/no-page-errors', async () => {
    assert(!pageErrors.length, `uncaught errors: ${pageErrors.join(' | ')}`);
});

clearTimeout(watchdog);
await cleanup();
r.finish();
