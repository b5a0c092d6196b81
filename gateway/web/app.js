// Inkling web UI: a chat pane that streams from /v1/chat/completions (fetch + the SSE parser
// of sse.mjs, shared with the gateway's node tests, over the response's ReadableStream) and a
// stats panel that polls /v1/stats once a second while the tab is visible. No framework and no
// build step: an ES module (index.html loads it with type="module"); the gateway serves this
// file, sse.mjs, format.mjs, device.mjs, index.html and style.css from its binary.
//
// Ids the black-box tests rely on (tests/gateway/web_ui.test.mjs): #prompt #send #stop
// #reply (the latest assistant message; data-state = streaming|done|stopped|error)
// #engine-state #throughput #expert-map (data-rows/data-cols once drawn) #rss; the Device
// card's (device.mjs, tests/gateway/web_device.test.mjs) #device-mem #device-figures ….
import { sseEvents } from './sse.mjs';
import { fmt } from './format.mjs';
import { deviceCard } from './device.mjs';

(() => {
  const $ = (id) => document.getElementById(id);
  const KEY_STORAGE = 'inkling.apiKey';
  const POLL_MS = 1000;
  const STATS_TIMEOUT_MS = 5000;

  // ---------------------------------------------------------------- API key and fetch

  const keyInput = $('api-key');
  try { keyInput.value = localStorage.getItem(KEY_STORAGE) || ''; } catch { /* storage off */ }
  const saveKey = () => {
    try {
      if (keyInput.value) localStorage.setItem(KEY_STORAGE, keyInput.value);
      else localStorage.removeItem(KEY_STORAGE);
    } catch { /* storage off: the key lives for this page only */ }
    modelId = null;
    pollNow();
  };
  keyInput.addEventListener('change', saveKey);
  $('key-form').addEventListener('submit', (e) => { e.preventDefault(); saveKey(); });

  function headers(extra) {
    const h = Object.assign({}, extra);
    const key = keyInput.value.trim();
    if (key) h['Authorization'] = 'Bearer ' + key;
    return h;
  }

  // The OpenAI error object's message, or the HTTP status line when the body is not one.
  async function errorText(res) {
    let msg = 'HTTP ' + res.status + (res.statusText ? ' ' + res.statusText : '');
    try {
      const body = await res.json();
      if (body && body.error && body.error.message) msg = body.error.message + ' (HTTP ' + res.status + ')';
    } catch { /* not JSON */ }
    const retry = res.headers.get('Retry-After');
    if (retry && (res.status === 429 || res.status === 503)) msg += ' — retry in ' + retry + ' s';
    if (res.status === 401) msg += ' — set the API key above';
    return msg;
  }

  // ---------------------------------------------------------------- model id

  let modelId = null;
  async function ensureModel() {
    if (modelId) return modelId;
    const res = await fetch('/v1/models', { headers: headers(), cache: 'no-store' });
    if (!res.ok) throw new Error(await errorText(res));
    const body = await res.json();
    if (!body || !Array.isArray(body.data) || !body.data.length || typeof body.data[0].id !== 'string') {
      throw new Error('/v1/models listed no model');
    }
    modelId = body.data[0].id;
    $('model-id').textContent = modelId;
    return modelId;
  }

  // ---------------------------------------------------------------- chat

  const messagesEl = $('messages');
  const promptEl = $('prompt');
  const sendBtn = $('send');
  const stopBtn = $('stop');
  const history = [];          // [{role, content}] sent with every turn
  let controller = null;       // AbortController of the turn in flight

  function addMessage(role) {
    $('empty-hint')?.remove();
    const el = document.createElement('article');
    el.className = 'msg ' + role;
    const who = document.createElement('div');
    who.className = 'who';
    who.textContent = role === 'user' ? 'You' : 'Inkling';
    el.append(who);
    messagesEl.append(el);
    return el;
  }

  function scrollToEnd() {
    const nearEnd = messagesEl.scrollHeight - messagesEl.scrollTop - messagesEl.clientHeight < 120;
    if (nearEnd) messagesEl.scrollTop = messagesEl.scrollHeight;
  }

  function setBusy(busy) {
    sendBtn.disabled = busy;
    stopBtn.disabled = !busy;
  }

  function numberField(id, lo, hi, integer) {
    const raw = $(id).value.trim();
    if (raw === '') return undefined;
    const v = Number(raw);
    if (!Number.isFinite(v) || v < lo || v > hi || (integer && !Number.isInteger(v))) {
      throw new Error($(id).labels[0].textContent + ' must be ' + (integer ? 'an integer' : 'a number') + ' in [' + lo + ', ' + hi + ']');
    }
    return v;
  }

  async function send() {
    const text = promptEl.value;
    if (!text.trim() || controller) return;

    const userEl = addMessage('user');
    const t = document.createElement('div');
    t.className = 'text';
    t.textContent = text;
    userEl.append(t);
    history.push({ role: 'user', content: text });
    promptEl.value = '';

    // The new assistant message becomes #reply; the previous one gives the id up.
    document.getElementById('reply')?.removeAttribute('id');
    const reply = addMessage('assistant');
    reply.id = 'reply';
    reply.setAttribute('aria-live', 'polite');
    reply.setAttribute('aria-busy', 'true');
    reply.dataset.state = 'streaming';
    reply.dataset.chunks = '0';
    const reasoningEl = document.createElement('div');
    reasoningEl.className = 'reasoning';
    const contentEl = document.createElement('div');
    contentEl.className = 'content';
    const metaEl = document.createElement('div');
    metaEl.className = 'meta';
    reply.append(reasoningEl, contentEl, metaEl);
    scrollToEnd();

    controller = new AbortController();
    setBusy(true);
    const started = performance.now();
    let content = '';
    let finish = null;
    let usage = null;
    let chunks = 0;
    let sawDone = false;

    const fail = (msg, state) => {
      const e = document.createElement('div');
      e.className = 'error';
      e.setAttribute('role', 'alert');
      e.textContent = msg;
      reply.append(e);
      reply.dataset.state = state || 'error';
    };

    try {
      const messages = [];
      const system = $('system').value.trim();
      if (system) messages.push({ role: 'system', content: system });
      messages.push(...history);
      const req = {
        model: await ensureModel(),
        messages,
        stream: true,
        stream_options: { include_usage: true },
      };
      const maxTokens = numberField('max-tokens', 1, 1048576, true);
      if (maxTokens !== undefined) req.max_tokens = maxTokens;
      const temperature = numberField('temperature', 0, 2, false);
      if (temperature !== undefined) req.temperature = temperature;
      if ($('effort').value) req.reasoning_effort = $('effort').value;

      const res = await fetch('/v1/chat/completions', {
        method: 'POST',
        headers: headers({ 'Content-Type': 'application/json', 'Accept': 'text/event-stream' }),
        body: JSON.stringify(req),
        signal: controller.signal,
        cache: 'no-store',
      });
      if (!res.ok) throw new Error(await errorText(res));
      if (!res.body) throw new Error('the response has no body');

      for await (const ev of sseEvents(res.body)) {
        if (ev.data === '[DONE]') { sawDone = true; break; }
        let obj;
        try { obj = JSON.parse(ev.data); } catch { throw new Error('bad event from the server: ' + ev.data.slice(0, 80)); }
        if (obj.error) throw new Error((obj.error.message || 'error') + ' (the reply above is cut here)');
        if (obj.usage) usage = obj.usage;
        const choice = obj.choices && obj.choices[0];
        if (!choice) continue;
        const d = choice.delta || {};
        if (typeof d.reasoning_content === 'string' && d.reasoning_content) {
          reasoningEl.textContent += d.reasoning_content;
          chunks++;
        }
        if (typeof d.content === 'string' && d.content) {
          contentEl.textContent += d.content;
          content += d.content;
          chunks++;
        }
        if (choice.finish_reason) finish = choice.finish_reason;
        reply.dataset.chunks = String(chunks);
        scrollToEnd();
      }
      if (!sawDone) throw new Error('the stream ended without [DONE] (connection lost?)');
      reply.dataset.state = 'done';
    } catch (err) {
      if (err && err.name === 'AbortError') {
        reply.dataset.state = 'stopped';
        finish = finish || 'stopped';
      } else {
        fail(String(err && err.message || err));
      }
    } finally {
      controller = null;
      setBusy(false);
      reply.setAttribute('aria-busy', 'false');
      if (content || reply.dataset.state === 'done') {
        // What the user saw is what the model said: keep it, even a partial reply.
        history.push({ role: 'assistant', content });
      } else {
        // Nothing came back (an error, or stopped before the first word): the turn is not
        // part of the conversation; the next send starts from the turn before.
        history.pop();
        userEl.classList.add('dropped');
        userEl.title = 'not part of the conversation: no reply';
      }
      const secs = (performance.now() - started) / 1000;
      const parts = [];
      if (usage) {
        parts.push(usage.prompt_tokens + ' in', usage.completion_tokens + ' out');
        if (secs > 0) parts.push((usage.completion_tokens / secs).toFixed(1) + ' tok/s');
      }
      if (finish) parts.push(finish);
      parts.push(secs.toFixed(2) + ' s');
      metaEl.textContent = parts.join(' · ');
      scrollToEnd();
      promptEl.focus();
    }
  }

  $('chat-form').addEventListener('submit', (e) => { e.preventDefault(); send(); });
  promptEl.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  });
  stopBtn.addEventListener('click', () => { if (controller) controller.abort(); });
  $('new-chat').addEventListener('click', () => {
    if (controller) controller.abort();
    history.length = 0;
    messagesEl.replaceChildren();
    const p = document.createElement('p');
    p.className = 'empty';
    p.id = 'empty-hint';
    p.textContent = 'New conversation.';
    messagesEl.append(p);
    promptEl.focus();
  });

  // ---------------------------------------------------------------- stats

  const set = (id, text) => { const el = $(id); if (el.textContent !== text) el.textContent = text; };
  const renderDevice = deviceCard(document);

  function setState(state) {
    const el = $('engine-state');
    const s = ['ready', 'starting', 'restarting', 'failed', 'unreachable'].includes(state) ? state : 'unknown';
    el.className = 'badge state-' + s;
    set('engine-state', state || 'unknown');
  }

  function render(stats) {
    const g = stats.gateway || {};
    const e = stats.engine || {};
    const info = e.info || {};
    const es = e.stats || {};

    setState(e.state);
    set('engine-reason', e.reason ? String(e.reason) : '—');
    const restarts = typeof e.restarts === 'number' ? e.restarts : g.restarts;
    set('restarts', fmt.int(restarts) + (g.device_losses ? ' (' + fmt.int(g.device_losses) + ' device lost)' : ''));
    set('backend', [info.backend, info.isa, info.model].filter(Boolean).join(' · ') || '—');
    set('uptime', fmt.secs(g.uptime_s));
    if (!modelId && info.model) set('model-id', info.model);

    set('rss', typeof es.rss_gb === 'number' ? es.rss_gb.toFixed(2) + ' GB' : '—');
    renderDevice(es.device || info.device, es.experts && es.experts.rows, info.layers);

    set('decode-rate', fmt.num(es.decode_tok_s, 1) + ' tok/s');
    set('prefill-rate', fmt.num(es.prefill_tok_s, 1) + ' tok/s');
    set('tokens-generated', fmt.int(es.tokens_generated));
    set('tokens-io', fmt.int(g.tokens_in) + ' / ' + fmt.int(g.tokens_out));

    const slots = Array.isArray(es.slots) ? es.slots.length : info.slots;
    set('active', fmt.int(g.active) + (typeof slots === 'number' ? ' of ' + slots + ' slots' : ''));
    set('queued', fmt.int(g.queued) + (typeof g.queue_limit === 'number' ? ' of ' + g.queue_limit : ''));
    set('requests-total', fmt.int(g.requests_total));

    drawExperts(es.experts);
    drawPhases(es.phases_ms);
  }

  // Tier colours at full heat; heat 0 draws at HEAT_FLOOR of them (style.css legend matches),
  // brightness grows with the square root of heat (0..63).
  const TIER_RGB = [[132, 143, 165], [240, 170, 40], [60, 200, 110]];
  const TIER_NAME = ['disk', 'RAM', 'device'];
  const UNKNOWN_RGB = [200, 60, 200];
  const HEAT_FLOOR = 0.35;
  const canvas = $('expert-map');
  let lastMap = null;    // {rows, cols, bytes} of the last map drawn, for hover and resize

  function drawExperts(ex) {
    const ok = ex && Number.isInteger(ex.rows) && Number.isInteger(ex.cols) && ex.rows > 0 && ex.cols > 0 &&
      typeof ex.map === 'string' && ex.map.length === 2 * ex.rows * ex.cols && /^[0-9a-fA-F]*$/.test(ex.map);
    if (!ok) {
      set('expert-summary', ex ? 'the engine sent a malformed map' : 'no residency map reported');
      return;
    }
    const n = ex.rows * ex.cols;
    const bytes = new Uint8Array(n);
    const perTier = [0, 0, 0];
    for (let i = 0; i < n; i++) {
      bytes[i] = parseInt(ex.map.substr(2 * i, 2), 16);
      const tier = bytes[i] >> 6;
      if (tier < 3) perTier[tier]++;
    }
    lastMap = { rows: ex.rows, cols: ex.cols, bytes };
    const resident = typeof ex.resident === 'number' ? ex.resident : perTier[1] + perTier[2];
    const total = typeof ex.total === 'number' ? ex.total : n;
    set('expert-summary', ex.rows + ' MoE layers × ' + ex.cols + ' experts · ' + resident + ' / ' + total +
      ' resident (' + perTier[2] + ' device, ' + perTier[1] + ' RAM, ' + perTier[0] + ' disk)');
    paintMap();
  }

  function paintMap() {
    if (!lastMap) return;
    const { rows, cols, bytes } = lastMap;
    const dpr = window.devicePixelRatio || 1;
    const cssW = Math.max(120, canvas.clientWidth || 320);
    const cellW = cssW / cols;
    const cellH = Math.max(3, Math.min(18, cellW, 360 / rows));
    const W = Math.round(cssW * dpr);
    const H = Math.max(1, Math.round(rows * cellH * dpr));
    if (canvas.width !== W) canvas.width = W;
    if (canvas.height !== H) canvas.height = H;
    const ctx = canvas.getContext('2d');
    ctx.fillStyle = '#0c0e11';
    ctx.fillRect(0, 0, W, H);
    const gap = cellW * dpr >= 6 && cellH * dpr >= 6 ? 1 : 0;
    for (let r = 0; r < rows; r++) {
      const y0 = Math.round(r * H / rows), y1 = Math.round((r + 1) * H / rows);
      for (let c = 0; c < cols; c++) {
        const b = bytes[r * cols + c];
        const tier = b >> 6;
        const heat = b & 63;
        const base = TIER_RGB[tier] || UNKNOWN_RGB;
        // Square root: the engine's heat is mostly small numbers; this keeps them visible.
        const f = HEAT_FLOOR + (1 - HEAT_FLOOR) * Math.sqrt(heat / 63);
        ctx.fillStyle = 'rgb(' + Math.round(base[0] * f) + ',' + Math.round(base[1] * f) + ',' + Math.round(base[2] * f) + ')';
        const x0 = Math.round(c * W / cols), x1 = Math.round((c + 1) * W / cols);
        ctx.fillRect(x0, y0, Math.max(1, x1 - x0 - gap), Math.max(1, y1 - y0 - gap));
      }
    }
    canvas.dataset.rows = String(rows);
    canvas.dataset.cols = String(cols);
  }

  canvas.addEventListener('mousemove', (e) => {
    if (!lastMap) return;
    const rect = canvas.getBoundingClientRect();
    const c = Math.floor((e.clientX - rect.left) / rect.width * lastMap.cols);
    const r = Math.floor((e.clientY - rect.top) / rect.height * lastMap.rows);
    if (r < 0 || c < 0 || r >= lastMap.rows || c >= lastMap.cols) return;
    const b = lastMap.bytes[r * lastMap.cols + c];
    set('expert-hover', 'MoE layer ' + r + ' · expert ' + c + ' · ' + (TIER_NAME[b >> 6] || 'tier ' + (b >> 6)) + ' · heat ' + (b & 63) + '/63');
  });
  canvas.addEventListener('mouseleave', () => set('expert-hover', '\u00a0'));
  window.addEventListener('resize', () => paintMap());

  function drawPhases(phases) {
    const list = $('phases');
    if (!phases || typeof phases !== 'object') return;
    const entries = Object.entries(phases).filter(([, v]) => typeof v === 'number' && Number.isFinite(v));
    if (!entries.length) return;
    entries.sort((a, b) => b[1] - a[1]);
    const max = Math.max(...entries.map(([, v]) => v)) || 1;
    const items = entries.map(([name, ms]) => {
      const li = document.createElement('li');
      const label = document.createElement('span');
      label.textContent = name.replace(/_/g, ' ');
      const bar = document.createElement('span');
      bar.className = 'bar';
      bar.style.width = (100 * ms / max).toFixed(1) + '%';
      const val = document.createElement('span');
      val.className = 'ms';
      val.textContent = ms.toFixed(1) + ' ms';
      li.append(label, bar, val);
      return li;
    });
    list.replaceChildren(...items);
  }

  // Polling: one request at a time, once a second, paused while the tab is hidden.
  let pollTimer = null;
  let polling = false;
  let lastOk = 0;

  async function poll() {
    pollTimer = null;
    if (polling || document.hidden) return;
    polling = true;
    const ac = new AbortController();
    const timeout = setTimeout(() => ac.abort(), STATS_TIMEOUT_MS);
    try {
      const res = await fetch('/v1/stats', { headers: headers(), cache: 'no-store', signal: ac.signal });
      if (!res.ok) {
        const msg = await errorText(res);
        set('stats-status', msg);
        if (res.status !== 401) setState('unreachable');
      } else {
        render(await res.json());
        lastOk = Date.now();
        set('stats-status', 'live · updated ' + new Date(lastOk).toLocaleTimeString());
      }
    } catch (err) {
      setState('unreachable');
      set('stats-status', 'gateway unreachable: ' + (err && err.name === 'AbortError' ? 'timed out' : (err && err.message || err)));
    } finally {
      clearTimeout(timeout);
      polling = false;
      schedule();
    }
  }
  function schedule() {
    if (!document.hidden && pollTimer === null) pollTimer = setTimeout(poll, POLL_MS);
  }
  function pollNow() {
    if (pollTimer !== null) { clearTimeout(pollTimer); pollTimer = null; }
    poll();
  }
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) {
      if (pollTimer !== null) { clearTimeout(pollTimer); pollTimer = null; }
      set('stats-status', 'paused while the tab is hidden');
    } else {
      pollNow();
    }
  });

  pollNow();
  ensureModel().catch((err) => set('model-id', 'model unknown: ' + (err.message || err)));
})();
