// The web UI in headless Chromium (Debian's /usr/bin/chromium driven by playwright-core): the
// page loads, the engine shows ready, a chat turn streams into #reply, Stop aborts a turn, the
// conversation is sent each turn, the stats panel fills (#throughput, #rss, #expert-map).
//
//   node web_ui.test.mjs --base URL [--api-key K] [--screenshot PATH] [--chromium PATH] [--hold N]
//
// --hold N: the gateway's engine runs with --fault-hold-after N (tests/gateway/run.sh starts
// it so): a turn of more than N tokens holds until stopped, so Stop meets it in flight. The
// other turns ask for N or fewer. Without it the Stop check races the model's end of turn.
// The page's clock is Playwright's (page.clock): it runs as usual, and the polling check
// pauses it and runs the page's timers itself, so no window of real time decides a check.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launchChromium } from './browser.mjs';
import { config, Reporter, assert, sleep } from './lib.mjs';

const { args, base, apiKey } = config();
const hold = Number(args.hold || 0);
// Tokens for the turns that must end by themselves: no more than the hold.
const shortTurn = String(hold > 0 ? Math.min(hold, 24) : 24);
const screenshot = args.screenshot || path.join(os.tmpdir(), 'inkling-web-ui.png');
const executablePath = args.chromium || process.env.CHROMIUM || '/usr/bin/chromium';
const r = new Reporter('web-ui');

if (!fs.existsSync(executablePath)) {
    r.fail('web-ui/chromium', `${executablePath} not found (Debian package: chromium)`);
    r.finish();
}

const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'inkling-chromium-'));
let context;
const pageErrors = [];
const consoleErrors = [];
const requests = [];   // bodies of POST /v1/chat/completions

async function cleanup() {
    try { await context?.close(); } catch { /* already gone */ }
    fs.rmSync(userDataDir, { recursive: true, force: true });
}
// Never hang: whatever happens, the suite ends within 4 minutes.
const watchdog = setTimeout(async () => {
    r.fail('web-ui/watchdog', 'the suite ran past 240 s');
    await cleanup();
    r.finish();
}, 240000);

try {
    context = await launchChromium(executablePath, userDataDir, { width: 1280, height: 860 });
} catch (err) {
    r.fail('web-ui/launch', err);
    await cleanup();
    clearTimeout(watchdog);
    r.finish();
}

const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(20000);
page.on('pageerror', (err) => pageErrors.push(String(err)));
page.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()); });
page.on('request', (req) => {
    if (req.method() === 'POST' && req.url().endsWith('/v1/chat/completions')) requests.push(req.postData());
});
// Installed before the page loads so that every timer of the page is on it; it runs in
// step with real time until the polling check pauses it.
await page.clock.install();
if (apiKey) {
    // The key the UI keeps in localStorage, set before the page's script reads it.
    await context.addInitScript((key) => { localStorage.setItem('inkling.apiKey', key); }, apiKey);
}

const text = (sel) => page.locator(sel).textContent();

await r.check('web-ui/page-loads', async () => {
    const res = await page.goto(`${base}/`, { waitUntil: 'load' });
    assert(res && res.status() === 200, `GET / answered ${res && res.status()}`);
    const type = res.headers()['content-type'] || '';
    assert(type.startsWith('text/html'), `GET / Content-Type is '${type}'`);
    for (const id of ['#prompt', '#send', '#stop', '#engine-state', '#throughput', '#expert-map', '#rss']) {
        assert(await page.locator(id).count() === 1, `${id} is missing`);
    }
    assert(await page.locator('label[for="prompt"]').count() === 1, '#prompt has no label');
});

await r.check('web-ui/assets', async () => {
    for (const [file, type] of [['/app.js', 'javascript'], ['/sse.mjs', 'javascript'], ['/format.mjs', 'javascript'],
        ['/device.mjs', 'javascript'], ['/style.css', 'text/css']]) {
        const res = await page.request.get(`${base}${file}`);
        assert(res.status() === 200, `GET ${file} answered ${res.status()}`);
        const ct = res.headers()['content-type'] || '';
        assert(ct.includes(type), `GET ${file} Content-Type is '${ct}'`);
    }
});

await r.check('web-ui/engine-ready', async () => {
    await page.waitForFunction(() => document.getElementById('engine-state')?.textContent.trim() === 'ready', null, { timeout: 30000 });
});

// The generation options live in a collapsed <details>.
async function setOption(id, value) {
    await page.evaluate(() => { document.querySelector('details.options').open = true; });
    await page.fill(id, value);
}

await r.check('web-ui/chat-streams', async () => {
    await setOption('#max-tokens', shortTurn);
    await setOption('#temperature', '0');
    await page.fill('#prompt', 'Hello! Say something.');
    await page.click('#send');
    await page.waitForFunction(() => document.getElementById('reply')?.dataset.state !== 'streaming', null, { timeout: 60000 });
    const state = await page.getAttribute('#reply', 'data-state');
    const body = (await text('#reply .content')) + (await text('#reply .reasoning'));
    const err = await page.locator('#reply .error').count() ? await text('#reply .error') : '';
    assert(state === 'done', `#reply ended in state '${state}' ${err}`);
    assert(body.length > 0, '#reply has no text');
    const chunks = Number(await page.getAttribute('#reply', 'data-chunks'));
    assert(chunks >= 2, `only ${chunks} streamed chunks reached #reply`);
    assert(await page.isEnabled('#send') && !(await page.isEnabled('#stop')), 'Send/Stop not reset after the turn');
    const meta = await text('#reply .meta');
    assert(/\bout\b/.test(meta), `no usage shown after the turn: '${meta}'`);
    return `${chunks} chunks, ${body.length} chars`;
}, 90000);

// With --hold the engine holds this turn after `hold` tokens: it is streaming when Stop lands.
await r.check('web-ui/stop-aborts', async () => {
    await setOption('#max-tokens', '4000');
    await page.fill('#prompt', 'Tell me a long story.');
    await page.click('#send');
    await page.waitForFunction(() => Number(document.getElementById('reply')?.dataset.chunks) > 0 ||
        document.getElementById('reply')?.dataset.state !== 'streaming', null, { timeout: 60000 });
    const before = await page.getAttribute('#reply', 'data-state');
    assert(before === 'streaming', `the long turn was over before Stop (state '${before}': ${await text('#reply')})`);
    await page.click('#stop');
    await page.waitForFunction(() => document.getElementById('reply')?.dataset.state !== 'streaming', null, { timeout: 10000 });
    assertState(await page.getAttribute('#reply', 'data-state'), 'stopped');
    assert(await page.isEnabled('#send'), 'Send not enabled after Stop');
}, 90000);

function assertState(got, want) { assert(got === want, `#reply state is '${got}', expected '${want}'`); }

await r.check('web-ui/history-sent', async () => {
    await setOption('#max-tokens', String(Math.min(8, Number(shortTurn))));
    await page.fill('#prompt', 'And a third turn.');
    await page.click('#send');
    await page.waitForFunction(() => document.getElementById('reply')?.dataset.state !== 'streaming', null, { timeout: 60000 });
    assertState(await page.getAttribute('#reply', 'data-state'), 'done');
    assert(requests.length === 3, `${requests.length} chat requests seen, expected 3`);
    const last = JSON.parse(requests[2]);
    const roles = last.messages.map((m) => m.role).join(',');
    assert(roles === 'user,assistant,user,assistant,user', `third turn sent roles ${roles}`);
    assert(last.stream === true, 'the UI did not ask for a stream');
    assert(await page.locator('#reply').count() === 1, 'more than one #reply');
    assert(await page.locator('.msg.assistant').count() === 3, 'expected 3 assistant messages');
}, 90000);

await r.check('web-ui/stats-filled', async () => {
    // The panel polls every second; give it a few polls after the turns.
    // After the turns above the engine has generated tokens: wait for a poll that shows them.
    await page.waitForFunction(() => Number((document.getElementById('tokens-generated')?.textContent || '').replace(/,/g, '')) > 0 &&
        document.getElementById('expert-map')?.dataset.rows, null, { timeout: 15000 }).catch(() => {});
    const generated = await text('#tokens-generated');
    assert(Number(generated.replace(/,/g, '')) > 0, `#tokens-generated shows '${generated}' after three turns`);
    const throughput = await page.locator('#throughput').innerText();
    assert(/\d+(\.\d+)? tok\/s/.test(throughput), `#throughput shows '${throughput.replace(/\s+/g, ' ')}'`);
    const rss = await text('#rss');
    assert(/\d+(\.\d+)? GB/.test(rss), `#rss shows '${rss}'`);
    const device = await text('#device-mem');
    assert(device === 'CPU only' || /\//.test(device), `#device-mem shows '${device}'`);
    const restarts = await text('#restarts');
    assert(/\d/.test(restarts), `#restarts shows '${restarts}'`);
    const queue = await page.locator('#queue').innerText();
    assert(/\d/.test(queue), `#queue shows '${queue}'`);
    return `${throughput.replace(/\s+/g, ' ').trim()}; rss ${rss}; device ${device}`;
}, 30000);

await r.check('web-ui/expert-map-drawn', async () => {
    const map = await page.evaluate(() => {
        const c = document.getElementById('expert-map');
        if (!c.dataset.rows) return { drawn: false, summary: document.getElementById('expert-summary').textContent };
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let lit = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] + d[i + 1] + d[i + 2] > 3 * 0x20) lit++;
        return { drawn: true, rows: +c.dataset.rows, cols: +c.dataset.cols, lit, pixels: d.length / 4, summary: document.getElementById('expert-summary').textContent };
    });
    assert(map.drawn, `#expert-map not drawn: ${map.summary}`);
    assert(map.rows > 0 && map.cols > 0, `map ${map.rows}x${map.cols}`);
    assert(map.lit > map.pixels / 4, `only ${map.lit} of ${map.pixels} pixels lit`);
    return `${map.rows}x${map.cols}; ${map.summary}`;
});

await r.check('web-ui/polling-pauses-when-hidden', async () => {
    // The page's clock stands still from here on: only clock.runFor moves its timers. Polls
    // are counted by the requests the page makes, and none may be in flight when hidden.
    let started = 0, open = 0;
    const onReq = (req) => { if (req.url().endsWith('/v1/stats')) { started++; open++; } };
    const onEnd = (req) => { if (req.url().endsWith('/v1/stats')) open--; };
    page.on('request', onReq);
    page.on('requestfinished', onEnd);
    page.on('requestfailed', onEnd);
    const setHidden = (hidden) => page.evaluate((h) => {
        Object.defineProperty(document, 'hidden', { configurable: true, get: () => h });
        Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => (h ? 'hidden' : 'visible') });
        document.dispatchEvent(new Event('visibilitychange'));
    }, hidden);
    try {
        await page.clock.pauseAt(Date.now() + 1000);
        // Fake a hidden tab: override document.hidden and fire visibilitychange.
        await setHidden(true);
        // A poll already in flight ends (its answer schedules nothing while hidden).
        for (const t0 = Date.now(); open > 0 && Date.now() - t0 < 10000;) await sleep(20);
        assert(open === 0, `a /v1/stats request still in flight 10 s after hiding`);
        const before = started;
        await page.clock.runFor(10000);  // ten poll periods of page time
        const hiddenPolls = started - before;
        const back = page.waitForRequest((req) => req.url().endsWith('/v1/stats'), { timeout: 10000 });
        await setHidden(false);
        await back;  // becoming visible polls at once
        assert(hiddenPolls === 0, `${hiddenPolls} polls in 10 s of page time while hidden`);
        return `0 polls in 10 s hidden, one at once when visible`;
    } finally {
        page.off('request', onReq);
        page.off('requestfinished', onEnd);
        page.off('requestfailed', onEnd);
        await page.clock.resume();
    }
}, 30000);

await r.check('web-ui/screenshot', async () => {
    fs.mkdirSync(path.dirname(screenshot), { recursive: true });
    await page.screenshot({ path: screenshot, fullPage: true });
    assert(fs.statSync(screenshot).size > 1000, 'screenshot is empty');
    return screenshot;
});

// An error answer shows in #reply, and the failed turn is not sent with the next one.
await r.check('web-ui/error-shown-and-turn-dropped', async () => {
    const before = requests.length;
    await page.fill('#api-key', 'wrong-key-for-this-test');
    await page.dispatchEvent('#api-key', 'change');
    await page.fill('#prompt', 'This turn must fail.');
    await page.click('#send');
    await page.waitForFunction(() => document.getElementById('reply')?.dataset.state !== 'streaming', null, { timeout: 20000 });
    const state = await page.getAttribute('#reply', 'data-state');
    const err = await page.locator('#reply .error').count() ? await text('#reply .error') : '';
    await page.fill('#api-key', apiKey);
    await page.dispatchEvent('#api-key', 'change');
    if (apiKey) {
        assert(state === 'error', `#reply state '${state}' after a request with a wrong key`);
        assert(/401/.test(err), `the error shown is '${err}'`);
        assert(await page.locator('.msg.user.dropped').count() === 1, 'the failed user turn is not marked as dropped');
    }
    await setOption('#max-tokens', '4');
    await page.fill('#prompt', 'After the failure.');
    await page.click('#send');
    await page.waitForFunction(() => document.getElementById('reply')?.dataset.state !== 'streaming', null, { timeout: 60000 });
    assertState(await page.getAttribute('#reply', 'data-state'), 'done');
    const last = JSON.parse(requests[requests.length - 1]);
    const users = last.messages.filter((m) => m.role === 'user').map((m) => m.content);
    assert(!users.includes('This turn must fail.') || !apiKey, `the failed turn was sent again: ${JSON.stringify(users)}`);
    // (With a wrong key the page already fails on /v1/models, before posting the turn.)
    assert(requests.length > before, 'the follow-up turn was not posted');
    return apiKey ? err : 'no API key: only the follow-up turn checked';
}, 90000);

await r.check('web-ui/no-page-errors', async () => {
    assert(!pageErrors.length, `uncaught errors: ${pageErrors.join(' | ')}`);
    // A 429/503 while polling is reported by the browser as a console error; anything else is ours.
    const ours = consoleErrors.filter((e) => !/Failed to load resource/.test(e));
    assert(!ours.length, `console errors: ${ours.join(' | ')}`);
});

clearTimeout(watchdog);
await cleanup();
r.finish();
