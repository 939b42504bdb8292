// Huddle's dashboard: polls the server's JSON (GET /v1/huddle/cluster, /v1/huddle/requests,
// /v1/huddle/ops) and draws the devices, the plan, a per-device timeline of each request's steps
// (and one step op by op on every device) and recent tokens/s;
// the chat box streams a reply (Server-Sent Events) from /v1/completions or
// /v1/chat/completions. Plain browser JavaScript, no libraries. Text from the server is only
// ever set as textContent.
'use strict';

const state = {
  key: sessionStorage.getItem('huddle-api-key') || '',
  requests: new Map(), // id -> request, as /v1/huddle/requests gives it
  selected: null, // the request the timeline shows; null: the latest
  opStep: null, // {request, step} picked on the timeline; else the shown request's last kept
  ops: null, // the step shown op by op, as /v1/huddle/ops gives it
  streaming: false,
  devices: [],
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

function svg(tag, attrs = {}) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

function bytes(n) {
  if (n === null || n === undefined) return '—';
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}

function num(v, digits = 1) {
  return v === null || v === undefined ? '—' : Number(v).toFixed(digits);
}

function headers(extra = {}) {
  const h = { ...extra };
  if (state.key) h.Authorization = `Bearer ${state.key}`;
  return h;
}

function showError(message) {
  const e = $('error');
  e.textContent = message;
  e.hidden = !message;
}

class NeedKey extends Error {}

// GET a data route as JSON; a 401 shows the key form, unless a key was entered while the request
// was on its way (its stale 401 would show the form again over a working key).
async function getJson(path) {
  const key = state.key;
  const res = await fetch(path, { headers: headers() });
  if (res.status === 401) {
    if (state.key === key) $('key-form').hidden = false;
    throw new NeedKey('this server needs an API key');
  }
  const body = await res.json();
  if (!res.ok) throw new Error(body.error ? body.error.message : `HTTP ${res.status}`);
  return body;
}

// ---- devices, links, plan

function renderCluster(c) {
  $('model-name').textContent =
    `${c.model.id} · ${c.model.architecture}, ${c.model.layers} layers, context ${c.model.context}`;
  state.devices = c.devices;
  const devices = $('devices');
  devices.replaceChildren();
  for (const d of c.devices) {
    const speed = d.speed
      ? `${num(d.speed.prefill_tokens_per_s, 0)} tok/s prefill · ` +
        `${num(d.speed.decode_compute_ms, 2)} ms/decode step`
      : 'after the first request';
    const rows = [
      ['address', d.address],
      ['role', d.role],
      ['weights', bytes(d.weight_bytes)],
      ['resident', bytes(d.rss_bytes || null)],
      ['free memory', bytes(d.free_memory_bytes)],
      ['speed', speed],
      ['sent, last request', bytes(d.bytes_sent_last_request)],
    ];
    const dl = el('dl');
    for (const [k, v] of rows) dl.append(el('dt', {}, k), el('dd', {}, String(v)));
    devices.append(el('div', { class: 'device', id: `device-${d.index}` },
                      el('h4', {}, `${d.index}: ${d.name}`), dl));
  }
  const links = $('links');
  links.replaceChildren();
  for (const l of c.links) {
    links.append(el('li', {}, `${l.a_name} ⟷ ${l.b_name} (${l.transport})`));
  }
  if (c.links.length === 0) links.append(el('li', { class: 'muted' }, 'none: one device'));

  $('plan-strategy').textContent = c.plan.strategy;
  const plan = $('plan');
  plan.replaceChildren();
  c.plan.devices.forEach((d, i) => {
    const holds = el('ul');
    for (const h of d.holds) holds.append(el('li', {}, h));
    plan.append(el('div', { class: 'plan-device', id: `plan-device-${i}` },
                   el('strong', {}, `${i}: ${d.name}`),
                   ` — ${(d.share * 100).toFixed(0)}% of the tokens`, holds));
  });
}

// ---- requests: table and timeline

function latestId() {
  let id = 0;
  for (const k of state.requests.keys()) id = Math.max(id, k);
  return id;
}

function mergeRequests(list) {
  for (const r of list) state.requests.set(r.id, r);
  // Keep the 16 newest, as the server does.
  const ids = [...state.requests.keys()].sort((a, b) => a - b);
  for (const id of ids.slice(0, Math.max(0, ids.length - 16))) state.requests.delete(id);
}

function renderRequests() {
  const body = $('requests').tBodies[0];
  body.replaceChildren();
  const list = [...state.requests.values()].sort((a, b) => b.id - a.id);
  for (const r of list) {
    const started = new Date(r.started_unix_ms).toLocaleTimeString();
    const row = el('tr', { class: r.running ? 'running' : '', id: `request-${r.id}` },
                   el('td', {}, String(r.id)), el('td', {}, started),
                   el('td', {}, String(r.prompt_tokens)), el('td', {}, String(r.completion_tokens)),
                   el('td', {}, num(r.prefill_ms)), el('td', {}, num(r.decode_tokens_per_s)),
                   el('td', {}, num(r.tokens_per_s)),
                   el('td', {}, r.running ? 'running' : r.finish_reason));
    body.append(row);
  }
  const select = $('timeline-request');
  const chosen = state.selected;
  select.replaceChildren(el('option', { value: '' }, 'latest'));
  for (const r of list) select.append(el('option', { value: String(r.id) }, `request ${r.id}`));
  select.value = chosen === null ? '' : String(chosen);
  renderTimeline();
}

// One row per device; each step a bar from its start over its wall time on that device, the
// compute part solid (the prompt's step in its own colour).
function renderTimeline() {
  const id = state.selected === null ? latestId() : state.selected;
  const r = state.requests.get(id);
  const box = $('timeline');
  box.replaceChildren();
  if (!r) return;
  const devices = Math.max(state.devices.length, ...r.steps.map((s) => s.length > 2 ? s[2].length : 0));
  let end = 1;
  for (const [start, , per] of r.steps) {
    for (const [wall] of per) end = Math.max(end, start + wall);
  }
  end = Math.max(end, r.elapsed_ms);
  $('timeline-summary').textContent =
    `request ${r.id}: ${r.prompt_tokens} prompt tokens, ${r.completion_tokens} generated, ` +
    `${r.steps.length} steps in ${num(r.elapsed_ms)} ms` +
    (r.running ? ' (running)' : `, ${r.finish_reason}`) +
    (r.dropped_steps ? ` (${r.dropped_steps} later steps not kept)` : '');
  const width = 1000;
  const label = 120;
  const rowHeight = 26;
  const height = devices * rowHeight + 22;
  const scale = (width - label - 10) / end;
  const chart = svg('svg', { viewBox: `0 0 ${width} ${height}`, id: 'timeline-chart',
                             role: 'img', 'aria-label': `timeline of request ${r.id}` });
  for (let d = 0; d < devices; d += 1) {
    const name = state.devices[d] ? state.devices[d].name : `device ${d}`;
    const t = svg('text', { x: 4, y: d * rowHeight + 17, class: 'row-label' });
    t.textContent = name;
    chart.append(t);
    chart.append(svg('line', { x1: label, x2: width - 10, y1: (d + 1) * rowHeight - 2,
                               y2: (d + 1) * rowHeight - 2, stroke: '#eee' }));
  }
  const picked = opStepOf(r);
  r.steps.forEach(([start, tokens, per, kept], i) => {
    per.forEach(([wall, compute], d) => {
      const x = label + start * scale;
      const y = d * rowHeight + 4;
      const w = Math.max(0.5, wall * scale);
      const marks = `${kept ? ' kept' : ''}${kept && i === picked ? ' picked' : ''}`;
      const bar = svg('rect', { x, y, width: w, height: rowHeight - 10, class: `wait step${marks}`,
                                'data-step': String(i) });
      const title = svg('title');
      title.textContent = `step ${i}: ${tokens} token(s), ${num(wall, 2)} ms, ` +
                          `${num(compute, 2)} ms compute` + (kept ? ' (click: op by op)' : '');
      bar.append(title);
      chart.append(bar);
      const solid = svg('rect', { x, y, width: Math.max(0.5, Math.min(wall, compute) * scale),
                                  height: rowHeight - 10,
                                  class: `${i === 0 ? 'prefill' : 'compute'}${marks}` });
      chart.append(solid);
      if (kept) {
        for (const e of [bar, solid]) e.addEventListener('click', () => pickStep(r.id, i));
      }
    });
  });
  timeAxis(chart, label, width, height, end);
  box.append(chart);
}

// Five ticks from 0 to `end` ms under a chart whose plot starts `label` px in.
function timeAxis(chart, label, width, height, end) {
  for (let k = 0; k <= 4; k += 1) {
    const t = svg('text', { x: label + (k * (width - label - 10)) / 4, y: height - 4,
                            class: 'axis',
                            'text-anchor': k === 0 ? 'start' : k === 4 ? 'end' : 'middle' });
    t.textContent = `${num((k * end) / 4, end < 10 ? 2 : 0)} ms`;
    chart.append(t);
  }
}

// ---- one step op by op

function shownRequest() {
  return state.requests.get(state.selected === null ? latestId() : state.selected);
}

// The step of request `r` to show op by op: the one picked on the timeline, else its last step
// kept op by op (-1: none).
function opStepOf(r) {
  if (state.opStep && state.opStep.request === r.id) return state.opStep.step;
  let last = -1;
  r.steps.forEach((s, i) => { if (s[3]) last = i; });
  return last;
}

function pickStep(request, step) {
  state.opStep = { request, step };
  renderTimeline();
  refreshOps().catch((e) => { if (!(e instanceof NeedKey)) showError(`the server: ${e.message}`); });
}

let opsKey = ''; // "request:step" of the step fetched or being fetched (kept steps never change)
async function refreshOps() {
  const r = shownRequest();
  const step = r ? opStepOf(r) : -1;
  if (step < 0) {
    // Nothing of this request op by op (yet, or ever: a request cancelled before its prompt).
    if (r && state.ops && state.ops.request !== r.id) {
      state.ops = null;
      opsKey = '';
      renderOps();
      $('ops-summary').textContent = `request ${r.id}: no step op by op`;
    }
    return;
  }
  const key = `${r.id}:${step}`;
  if (key === opsKey) return;
  opsKey = key;
  let ops;
  try {
    ops = await getJson(`/v1/huddle/ops?request=${r.id}&step=${step}`);
  } catch (e) {
    if (opsKey === key) opsKey = '';
    throw e;
  }
  if (opsKey !== key) return; // another step was picked meanwhile
  state.ops = ops;
  renderOps();
}

// One row per device: each op a bar from its start within the step (on that device's clock)
// over its duration; ops that compute on top, alternating shades, ops that move data below.
function renderOps() {
  const o = state.ops;
  const box = $('ops');
  box.replaceChildren();
  if (!o) return;
  let end = 0.001;
  let count = 0;
  for (const d of o.devices) {
    count += d.ops.length;
    for (const [, start, duration] of d.ops) end = Math.max(end, start + duration);
  }
  $('ops-summary').textContent =
    `request ${o.request}, step ${o.step} (${o.step === 0 ? 'the prompt' : 'a decode step'}, ` +
    `${o.tokens} token(s)): ${count} ops on ${o.devices.length} device(s) in ${num(end, 2)} ms, ` +
    'each device from its own start of the step';
  const width = 1000;
  const label = 120;
  const rowHeight = 30;
  const height = o.devices.length * rowHeight + 22;
  const scale = (width - label - 10) / end;
  const chart = svg('svg', { viewBox: `0 0 ${width} ${height}`, id: 'ops-chart', role: 'img',
                             'aria-label': `request ${o.request}, step ${o.step}, op by op` });
  o.devices.forEach((d, row) => {
    const t = svg('text', { x: 4, y: row * rowHeight + 18, class: 'row-label' });
    t.textContent = d.name;
    chart.append(t);
    chart.append(svg('line', { x1: label, x2: width - 10, y1: (row + 1) * rowHeight - 2,
                               y2: (row + 1) * rowHeight - 2, stroke: '#eee' }));
    d.ops.forEach(([name, start, duration, kind], i) => {
      const comm = kind === 'comm';
      const bar = svg('rect', {
        x: label + start * scale, y: row * rowHeight + (comm ? 16 : 3),
        width: Math.max(0.5, duration * scale), height: comm ? 9 : 12,
        class: `op ${comm ? 'op-comm' : `op-compute${i % 2 ? ' alt' : ''}`}`,
        'data-device': String(d.index),
      });
      const title = svg('title');
      title.textContent = `${name}: ${num(duration, 3)} ms ` +
                          `${comm ? 'moving data' : 'computing'}, from ${num(start, 3)} ms`;
      bar.append(title);
      chart.append(bar);
    });
  });
  timeAxis(chart, label, width, height, end);
  box.append(chart);
}

// ---- polling

async function refreshCluster() {
  const c = await getJson('/v1/huddle/cluster');
  renderCluster(c);
}

async function refreshRequests() {
  // Requests take the model one at a time: those up to the newest finished one are final.
  let after = 0;
  for (const r of state.requests.values()) if (!r.running) after = Math.max(after, r.id);
  const body = await getJson(`/v1/huddle/requests?after=${after}`);
  mergeRequests(body.requests);
  renderRequests();
}

async function refreshHealth() {
  const h = $('health');
  try {
    const res = await fetch('/health');
    const body = await res.json();
    h.textContent = body.status === 'ok' ? 'ready' : body.status;
    h.className = `badge ${res.ok ? 'ok' : 'bad'}`;
    return res.ok;
  } catch {
    h.textContent = 'unreachable';
    h.className = 'badge bad';
    return false;
  }
}

let lastRequestsPoll = 0;
let lastClusterPoll = 0;
let ticking = false; // one poll at a time
async function tick() {
  if (ticking) return;
  ticking = true;
  const now = Date.now();
  try {
    if (now - lastClusterPoll > 5000) {
      if (!(await refreshHealth())) return;
      lastClusterPoll = now;
      await refreshCluster();
    }
    if (now - lastRequestsPoll > (state.streaming ? 250 : 1000)) {
      lastRequestsPoll = now;
      await refreshRequests();
      await refreshOps();
    }
    showError('');
  } catch (e) {
    if (!(e instanceof NeedKey)) showError(`the server: ${e.message}`);
    lastClusterPoll = 0;
  } finally {
    ticking = false;
  }
}

// ---- chat

// Reads a Server-Sent Events body, calling onData with each data: payload.
async function readEvents(res, onData) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let at;
    while ((at = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      for (const line of event.split('\n')) {
        if (line.startsWith('data: ')) onData(line.slice(6));
      }
    }
  }
}

let exchanges = 0;
async function send(event) {
  event.preventDefault();
  const text = $('chat-input').value;
  if (!text.trim() || state.streaming) return;
  const mode = $('chat-mode').value;
  const options = {
    max_tokens: Number($('chat-max-tokens').value) || 32,
    temperature: Number($('chat-temperature').value),
    stream: true,
  };
  exchanges += 1;
  const reply = el('div', { class: 'reply', id: `chat-reply-${exchanges}`, 'data-state': 'waiting',
                            'data-chunks': '0' });
  $('chat-log').append(el('div', { class: 'exchange' }, el('div', { class: 'prompt' }, text), reply));
  const body = mode === 'chat'
    ? { ...options, messages: [{ role: 'user', content: text }] }
    : { ...options, prompt: text };
  const route = mode === 'chat' ? '/v1/chat/completions' : '/v1/completions';
  state.streaming = true;
  $('chat-send').disabled = true;
  $('chat-status').textContent = 'streaming…';
  let chunks = 0;
  try {
    const res = await fetch(route, {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/json' }),
      body: JSON.stringify(body),
    });
    if (!res.ok) {
      const err = await res.json().catch(() => ({}));
      if (res.status === 401) $('key-form').hidden = false;
      throw new Error(err.error ? err.error.message : `HTTP ${res.status}`);
    }
    reply.dataset.state = 'streaming';
    let finish = null;
    await readEvents(res, (data) => {
      if (data === '[DONE]') return;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      const choice = chunk.choices && chunk.choices[0];
      if (!choice) return;
      const piece = mode === 'chat' ? (choice.delta && choice.delta.content) || '' : choice.text;
      if (piece) {
        chunks += 1;
        reply.textContent += piece;
        reply.dataset.chunks = String(chunks);
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    });
    reply.dataset.state = 'done';
    $('chat-status').textContent = `done (${finish || 'no finish reason'}, ${chunks} chunks)`;
  } catch (e) {
    reply.dataset.state = 'error';
    reply.textContent = `error: ${e.message}`;
    $('chat-status').textContent = '';
  } finally {
    state.streaming = false;
    $('chat-send').disabled = false;
    lastRequestsPoll = 0;
    lastClusterPoll = 0; // the devices' figures come from the last request
  }
}

// ---- start

$('chat-form').addEventListener('submit', send);
$('chat-input').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) send(e);
});
$('timeline-request').addEventListener('change', (e) => {
  state.selected = e.target.value === '' ? null : Number(e.target.value);
  renderTimeline();
  refreshOps().catch((err) => {
    if (!(err instanceof NeedKey)) showError(`the server: ${err.message}`);
  });
});
$('key-form').addEventListener('submit', (e) => {
  e.preventDefault();
  state.key = $('key-input').value;
  sessionStorage.setItem('huddle-api-key', state.key);
  $('key-form').hidden = true;
  lastClusterPoll = 0;
  lastRequestsPoll = 0;
  tick();
});

tick();
setInterval(tick, 250);
