// The web UI's Device card: the engine's STATS `device` object (docs/vulkan.md, "STATS") as
// the stats panel shows it — name and type; memory used of the budget, split into the routed
// experts' slots (the expert tier's share) and the rest (dense weights, K/V mirrors, scratch);
// MoE layers resident and with slots, the slots and the experts' format; routed (row, expert)
// pairs computed on the device and on the host; frames and waits a step; steps.
//
// Per-step figures are over the steps run between the two latest polls that saw steps run
// (a decode step is one token a session), so they follow what the device does now; until a
// poll has seen steps run they are the averages over every step. On the CPU the card says
// "CPU only" and hides the figures. A figure an older engine's STATS lacks shows "—".
//
// Ids the black-box tests read (tests/gateway/web_device.test.mjs): #device-mem,
// #device-figures and the figures below it; a number's exact value is its data-value
// (#device-tier: data-value the slots, data-uploads, data-evictions).
import { fmt, isNum } from './format.mjs';

// A device chain runs: mode "vulkan", or (an engine from before `mode`) memory figures sent.
function onDevice(dev) {
  if (!dev || typeof dev !== 'object' || dev.mode === 'cpu') return false;
  return dev.mode === 'vulkan' || (isNum(dev.memory_used) && isNum(dev.memory_budget) && dev.memory_budget > 0);
}

const COUNTS = ['steps', 'frames', 'waits', 'device_pairs', 'host_pairs'];
const pct = (part, whole) => (100 * part / whole).toFixed(0) + ' %';

export function deviceCard(doc) {
  const $ = (id) => doc.getElementById(id);
  let last = null;    // the previous poll's counts
  let recent = null;  // the counts' growth between the two latest polls that saw steps run

  // Text, and the exact number in data-value (absent when the engine sent none).
  function put(id, text, value) {
    const el = $(id);
    if (el.textContent !== text) el.textContent = text;
    if (isNum(value)) el.dataset.value = String(value);
    else delete el.dataset.value;
  }
  function putBytes(id, v) {
    put(id, fmt.bytes(v), v);
    $(id).title = isNum(v) ? fmt.int(v) + ' bytes' : '';
  }

  function track(dev) {
    const now = {};
    for (const k of COUNTS) now[k] = isNum(dev[k]) ? dev[k] : undefined;
    if (!isNum(now.steps)) { last = recent = null; return; }
    if (last && now.steps < last.steps) recent = null;  // a new engine: its counts start again
    else if (last && now.steps > last.steps) {
      recent = {};
      for (const k of COUNTS) recent[k] = isNum(now[k]) && isNum(last[k]) ? now[k] - last[k] : undefined;
    }
    last = now;
  }

  function memory(dev) {
    const used = isNum(dev.memory_used) ? dev.memory_used : undefined;
    const budget = isNum(dev.memory_budget) && dev.memory_budget > 0 ? dev.memory_budget : undefined;
    const experts = isNum(dev.expert_bytes) ? dev.expert_bytes : undefined;
    const other = used !== undefined && experts !== undefined ? Math.max(0, used - experts) : undefined;
    // The card's one line (the rows below have the name and the layers).
    put('device-mem', (dev.mode === 'vulkan' ? 'Vulkan' : 'device') + ' · ' + fmt.bytes(used) + ' / ' + fmt.bytes(budget) +
      (used !== undefined && budget ? ' (' + pct(used, budget) + ')' : ''));
    putBytes('device-used', used);
    putBytes('device-budget', budget);
    putBytes('device-expert-bytes', experts);
    putBytes('device-other-bytes', other);
    const width = (v) => (budget && isNum(v) ? Math.min(100, 100 * v / budget) : 0);
    $('device-split-experts').style.width = width(experts).toFixed(3) + '%';
    // Without the experts' figure (an older engine) the bar is the whole used.
    $('device-split-other').style.width = Math.min(100 - width(experts), width(other ?? used)).toFixed(3) + '%';
    $('device-split').setAttribute('aria-label', 'device memory: ' + fmt.bytes(used) + ' used of ' + fmt.bytes(budget) +
      '; routed experts ' + fmt.bytes(experts) + ', dense weights, K/V and scratch ' + fmt.bytes(other));
  }

  function experts(dev, moeLayers) {
    put('device-resident-layers', fmt.int(dev.expert_layers), dev.expert_layers);
    put('device-tier-layers', fmt.int(dev.tier_layers), dev.tier_layers);
    put('device-moe-layers', isNum(moeLayers) ? ' (of ' + moeLayers + ' MoE layers)' : '', moeLayers);
    let tier = '—';
    if (dev.tier_layers === 0) tier = 'none: the routed experts run on the host';
    else if (isNum(dev.tier_slots)) {
      const parts = [fmt.int(dev.tier_slots) + ' slots'];
      if (isNum(dev.tier_uploads)) parts.push(fmt.int(dev.tier_uploads) + ' uploads');
      if (isNum(dev.tier_evictions)) parts.push(fmt.int(dev.tier_evictions) + ' evictions');
      tier = parts.join(' · ');
    }
    put('device-tier', tier, dev.tier_slots);
    const el = $('device-tier');
    for (const k of ['uploads', 'evictions']) {
      if (isNum(dev['tier_' + k])) el.dataset[k] = String(dev['tier_' + k]);
      else delete el.dataset[k];
    }
    // "" is the engine saying no slots; a missing field an engine that does not say.
    put('device-format', typeof dev.expert_format === 'string' ? dev.expert_format || 'none' : '—');
  }

  function pairs(dev) {
    const d = dev.device_pairs, h = dev.host_pairs;
    put('device-pairs', fmt.int(d), d);
    put('host-pairs', fmt.int(h), h);
    let share = '—', value;
    if (isNum(d) && isNum(h) && d + h > 0) {
      value = d / (d + h);
      // Never "100 %" while the host computed some, nor "0 %" while the device did.
      const p = Math.round(100 * value);
      share = d > 0 && p === 0 ? 'device < 1 % of routed pairs' : 'device ' + (h > 0 ? Math.min(p, 99) : p) + ' % of routed pairs';
    } else if (d === 0 && h === 0) {
      share = 'no routed pairs yet';
    }
    put('device-pairs-share', share, value);
  }

  function perStep(dev) {
    const src = recent || last || {};
    const steps = src.steps;
    const per = (k) => (isNum(src[k]) && isNum(steps) && steps > 0 ? src[k] / steps : undefined);
    // An engine that sends only the averages: those.
    const frames = per('frames') ?? (isNum(dev.frames_per_step) ? dev.frames_per_step : undefined);
    const waits = per('waits') ?? (isNum(dev.waits_per_step) ? dev.waits_per_step : undefined);
    put('device-frames-step', fmt.num(frames, 2), frames);
    put('device-waits-step', fmt.num(waits, 2), waits);
    const dp = per('device_pairs'), hp = per('host_pairs');
    put('device-pairs-step', fmt.num(dp, 1) + ' device · ' + fmt.num(hp, 1) + ' host', dp);
    put('device-steps', fmt.int(dev.steps), dev.steps);
    put('device-window', recent ? 'per step: the last ' + fmt.int(recent.steps) + ' steps (between two polls)'
      : isNum(steps) && steps > 0 ? 'per step: all ' + fmt.int(steps) + ' steps' : 'per step: no steps yet');
  }

  // dev: STATS `device` (or the info frame's); moeLayers: the residency map's rows;
  // modelLayers: the info frame's layer count.
  return function render(dev, moeLayers, modelLayers) {
    const figures = $('device-figures');
    if (!onDevice(dev)) {
      put('device-mem', 'CPU only');
      figures.hidden = true;
      last = recent = null;
      return;
    }
    figures.hidden = false;
    track(dev);
    memory(dev);
    put('device-name', dev.name ? String(dev.name) : '—');
    put('device-type', dev.type ? String(dev.type) : '—');
    const head = dev.lm_head === true ? ' + lm_head' : dev.lm_head === false ? ' (lm_head on the host)' : '';
    put('device-layers', fmt.int(dev.layers) + (isNum(modelLayers) ? ' of ' + modelLayers : '') + (isNum(dev.layers) ? head : ''),
      dev.layers);
    experts(dev, moeLayers);
    pairs(dev);
    perStep(dev);
  };
}
