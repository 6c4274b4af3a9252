// llmq dashboard: one page, no framework, no build step. Everything that
// comes from Redis or jobs is put in the page with textContent (never as
// HTML); the server's Content-Security-Policy forbids inline script anyway.
'use strict';

const $ = (id) => document.getElementById(id);
const PRIOS = ['high', 'normal', 'low'];
const COLORS = ['#2d6cdf', '#d9822b', '#2f9e44', '#c92a2a', '#7048e8', '#0c8599', '#e64980', '#5c940d'];
const LIVE_MS = 30000; // a worker seen within this is live (LLMQ_WORKER_LIVE_MS)

let me = null; // {role, tenant, csrf}
let snap = null; // the last snapshot
let points = []; // the charts' points, oldest first (15 minutes)
let es = null; // the EventSource
let view = 'overview';

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function cell(tr, text, cls) { const td = el('td', text, cls); tr.appendChild(td); return td; }
function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
function fmtInt(n) { return n === undefined || n === null ? '-' : Number(n).toLocaleString('en-US'); }
function fmtAge(ms) {
  if (!(ms > 0)) return '-';
  const s = Math.round(ms / 1000);
  if (s < 120) return s + ' s';
  if (s < 7200) return Math.round(s / 60) + ' min';
  return (s / 3600).toFixed(1) + ' h';
}
function fmtTime(ms) { return ms > 0 ? new Date(Number(ms)).toLocaleTimeString() : '-'; }
function asList(x) { return Array.isArray(x) ? x : x ? Object.values(x) : []; }

let toastTimer = null;
function toast(msg, isErr, status) {
  const t = $('toast');
  t.textContent = msg;
  t.className = isErr ? 'err' : '';
  t.dataset.status = status ? String(status) : '';
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, 8000);
}

async function api(path, body) {
  const opt = body === undefined ? { credentials: 'same-origin' } : {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': me ? me.csrf : '' },
    body: JSON.stringify(body),
  };
  const r = await fetch('/dashboard/api/' + path, opt);
  let j = null;
  try { j = await r.json(); } catch (e) { j = null; }
  if (!r.ok) {
    const err = new Error(j && j.error ? j.error.message : 'HTTP ' + r.status);
    err.status = r.status;
    throw err;
  }
  return j;
}

// An action: POSTs, then says what happened (the refusal too, with its status).
async function act(path, body, what) {
  try {
    const j = await api(path, body);
    toast(what + ': done', false, 200);
    return j;
  } catch (e) {
    toast(what + ' refused (' + (e.status || 'network') + '): ' + e.message, true, e.status);
    return null;
  }
}

// ---- login and the live stream ----

function showLogin(msg) {
  me = null;
  if (es) { es.close(); es = null; }
  $('app').hidden = true; $('tabs').hidden = true; $('logout').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = msg || '';
  $('who').textContent = '';
  setConn('offline', false);
}

function loggedIn() {
  $('login').hidden = true; $('app').hidden = false; $('tabs').hidden = false;
  $('logout').hidden = false;
  $('who').textContent = me.role + (me.tenant ? ' of tenant ' + me.tenant : ' (whole account)');
  document.body.dataset.role = me.role;
  document.body.dataset.tenant = me.tenant;
  for (const id of ['view-endpoints', 'view-workers'])
    document.querySelector('nav button[data-view="' + id.slice(5) + '"]').hidden = !!me.tenant;
  // account-wide series: a tenant's viewer has none
  for (const id of ['chart-done', 'chart-queue', 'chart-429'])
    $(id).parentNode.hidden = !!me.tenant;
  connect();
}

function setConn(text, live) {
  const c = $('conn');
  c.textContent = text;
  c.className = 'conn' + (live ? ' live' : '');
  c.dataset.state = text;
}

function banner(text) {
  const b = $('banner');
  b.textContent = text || '';
  b.hidden = !text;
}

function connect() {
  if (es) es.close();
  es = new EventSource('/dashboard/api/events');
  setConn('connecting', false);
  es.addEventListener('history', (ev) => {
    const h = JSON.parse(ev.data);
    points = h.points || [];
    setConn('live', true);
  });
  es.addEventListener('snap', (ev) => {
    snap = JSON.parse(ev.data);
    points.push(pointOf(snap));
    const cut = snap.now_ms - 15 * 60 * 1000;
    while (points.length && points[0].t < cut) points.shift();
    banner('');
    setConn('live', true);
    document.body.dataset.snapAt = String(snap.now_ms);
    render();
  });
  es.addEventListener('redis', (ev) => {
    const r = JSON.parse(ev.data);
    banner('Redis is unreachable (' + r.error + '): the figures shown are from ' +
      (snap ? fmtTime(snap.now_ms) : 'before') + '. The page recovers by itself.');
    setConn('redis down', false);
  });
  es.onerror = () => {
    setConn('reconnecting', false);
    if (es.readyState === EventSource.CLOSED) {
      // refused (a session gone) or the gateway away: ask again in a while
      es = null;
      setTimeout(() => {
        api('me').then((m) => { me = m; connect(); }).catch((e) => {
          if (e.status === 401 || e.status === 403) showLogin('The session ended: log in again.');
          else setTimeout(() => connect(), 2000);
        });
      }, 2000);
    }
  };
}

// The chart point of a snapshot (the same shape the gateway keeps).
function pointOf(s) {
  const p = { t: s.now_ms, b: {} };
  if (s.stats) {
    p.done = s.stats.done; p.http_429 = s.stats.http_429;
    p.insufficient_quota = s.stats.insufficient_quota;
    p.http_429_spurious = s.stats.http_429_spurious;
    p.own_429_wait = s.stats.own_429_wait; p.own_429_budget = s.stats.own_429_budget;
    p.queued = {};
    for (const k of Object.keys(s.queues || {})) p.queued[k] = s.queues[k].queued;
  }
  for (const b of s.buckets || [])
    p.b[b.name] = [b.requests_used, b.requests_limit, b.tokens_used, b.tokens_limit];
  for (const e of asList(s.endpoints && s.endpoints.endpoints))
    for (const m of asList(e.models))
      p.b[m.bucket] = [m.requests_used, m.requests_limit, m.tokens_used, m.tokens_limit];
  return p;
}

// ---- charts: inline SVG ----

const SVG = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const k of Object.keys(attrs)) e.setAttribute(k, String(attrs[k]));
  return e;
}

// series: [{name, values: [[t, v], ...]}]; draws them over the span of the
// points kept (up to 15 minutes).
function lineChart(svg, series, legend, ymaxMin, unit) {
  clear(svg);
  const W = 600, H = 160;
  const now = points.length ? points[points.length - 1].t : Date.now();
  // the span of the points kept (15 minutes at most), at least a minute
  const t0 = Math.min(Math.max(now - 15 * 60 * 1000, points.length ? points[0].t : now), now - 60000);
  let ymax = ymaxMin || 1;
  for (const s of series) for (const [, v] of s.values) if (v > ymax) ymax = v;
  for (let i = 1; i < 4; i++)
    svg.appendChild(svgEl('line', { x1: 0, x2: W, y1: (H * i) / 4, y2: (H * i) / 4, class: 'grid' }));
  const last = {};
  series.forEach((s, i) => {
    const pts = s.values.filter(([t]) => t >= t0)
      .map(([t, v]) => ((t - t0) / (now - t0 || 1)) * W + ',' + (H - (v / ymax) * (H - 4)).toFixed(1));
    if (pts.length) {
      svg.appendChild(svgEl('polyline', { points: pts.join(' '), class: 'line', stroke: COLORS[i % COLORS.length] }));
      last[s.name] = s.values[s.values.length - 1][1];
    }
  });
  const top = svgEl('text', { x: 4, y: 12, 'font-size': 11, fill: '#5b6478' });
  top.textContent = String(Math.round(ymax * 10) / 10) + (unit || '');
  svg.appendChild(top);
  svg.dataset.points = String(points.length);
  svg.dataset.last = JSON.stringify(last);
  if (legend) {
    clear(legend);
    series.forEach((s, i) => {
      const item = el('span');
      const sw = el('i');
      sw.style.background = COLORS[i % COLORS.length];
      item.appendChild(sw);
      item.appendChild(document.createTextNode(s.name));
      legend.appendChild(item);
    });
  }
}

// The per-second rate over the last 5 points at each point (jobs finish in
// bursts, a one-second rate is mostly 0 or a spike) of the sum of the
// counters named in keys (an array, or one name) less those named in subs.
// A point without the first key (a tenant's) gives none.
function rateSeries(keys, subs) {
  const out = [];
  const plus = [].concat(keys), less = subs ? [].concat(subs) : [];
  const val = (p) => (p[plus[0]] === undefined ? undefined
    : plus.reduce((v, k) => v + (p[k] || 0), 0) - less.reduce((v, k) => v + (p[k] || 0), 0));
  for (let i = 1; i < points.length; i++) {
    const a = points[Math.max(0, i - 5)], b = points[i];
    const va = val(a), vb = val(b);
    if (va === undefined || vb === undefined || b.t <= a.t) continue;
    out.push([b.t, Math.max(0, ((vb - va) * 1000) / (b.t - a.t))]);
  }
  return out;
}

function drawCharts() {
  const names = new Set();
  for (const p of points) for (const n of Object.keys(p.b || {})) names.add(n);
  const util = [];
  for (const n of [...names].sort()) {
    const req = [], tok = [];
    for (const p of points) {
      const b = p.b && p.b[n];
      if (!b) continue;
      if (b[1] > 0) req.push([p.t, (100 * b[0]) / b[1]]);
      if (b[3] > 0) tok.push([p.t, (100 * b[2]) / b[3]]);
    }
    if (req.length) util.push({ name: n + ' requests', values: req });
    if (tok.length) util.push({ name: n + ' tokens', values: tok });
  }
  lineChart($('chart-util'), util, $('legend-util'), 10, ' %');
  lineChart($('chart-done'), [{ name: 'done/s', values: rateSeries('done') }], null, 1);
  lineChart($('chart-queue'), PRIOS.map((p) => ({
    name: p, values: points.filter((x) => x.queued).map((x) => [x.t, x.queued[p] || 0]),
  })), $('legend-queue'), 1);
  lineChart($('chart-429'), [
    { name: 'provider limit', values: rateSeries('http_429', ['insufficient_quota', 'http_429_spurious']) },
    { name: 'spurious', values: rateSeries('http_429_spurious') },
    { name: 'quota', values: rateSeries('insufficient_quota') },
    { name: "llmq's own", values: rateSeries(['own_429_wait', 'own_429_budget']) },
  ], $('legend-429'), 1);
}

// ---- views ----

function card(parent, id, label, value, raw) {
  const c = el('div', null, 'card');
  c.id = 'card-' + id;
  c.dataset.value = raw === undefined ? String(value) : String(raw);
  c.appendChild(el('div', label, 'k'));
  c.appendChild(el('div', value, 'v'));
  parent.appendChild(c);
}

function minuteOf(model, tenant) {
  for (const m of snap.minute || []) if (m.model === model && m.tenant === tenant) return m;
  return { jobs: 0, tokens: 0 };
}

function doneRate() { // jobs per second over the last minute
  let n = 0;
  for (const m of snap.minute || []) n += m.jobs;
  return n / 60;
}

function renderOverview() {
  const cards = $('cards');
  clear(cards);
  const rate = doneRate();
  let queued = 0, oldest = 0;
  if (snap.stats) {
    card(cards, 'done', 'jobs done (total)', fmtInt(snap.stats.done), snap.stats.done);
    card(cards, 'in-flight', 'in flight', fmtInt(snap.in_flight), snap.in_flight);
    for (const p of PRIOS) {
      const q = (snap.queues || {})[p] || { queued: 0, in_flight: 0, oldest_enq_ms: 0 };
      queued += q.queued;
      if (q.oldest_enq_ms > 0 && (!oldest || q.oldest_enq_ms < oldest)) oldest = q.oldest_enq_ms;
      card(cards, 'queued-' + p, 'queued ' + p, fmtInt(q.queued), q.queued);
    }
    card(cards, 'delayed', 'delayed', fmtInt(snap.delayed), snap.delayed);
    card(cards, 'dead-letters', 'dead letters', fmtInt(snap.dead_letters), snap.dead_letters);
    const spur = snap.stats.http_429_spurious || 0;
    const prov = snap.stats.http_429 - snap.stats.insufficient_quota - spur;
    card(cards, '429-limit', "429s: provider's limit", fmtInt(prov), prov);
    card(cards, '429-spurious', '429s: spurious (the API had room)', fmtInt(spur), spur);
    card(cards, '429-quota', '429s: insufficient quota', fmtInt(snap.stats.insufficient_quota), snap.stats.insufficient_quota);
    // the gateway's own answers, not the API's: not part of the three above
    const ownWait = snap.stats.own_429_wait || 0, ownBudget = snap.stats.own_429_budget || 0;
    card(cards, '429-own', "429s: llmq's own (" + fmtInt(ownWait) + ' waited, ' + fmtInt(ownBudget) + ' budget)',
      fmtInt(ownWait + ownBudget), ownWait + ownBudget);
    $('card-429-own').dataset.wait = String(ownWait);
    $('card-429-own').dataset.budget = String(ownBudget);
  } else {
    for (const r of snap.rows || []) {
      queued += r.queued;
      if (r.oldest_enq_ms > 0 && (!oldest || r.oldest_enq_ms < oldest)) oldest = r.oldest_enq_ms;
    }
    card(cards, 'queued', 'queued', fmtInt(queued), queued);
  }
  card(cards, 'rate', 'jobs/s (last min)', rate.toFixed(2), rate);
  card(cards, 'oldest', 'oldest waiting job', fmtAge(oldest ? snap.now_ms - oldest : 0), oldest ? snap.now_ms - oldest : 0);
  card(cards, 'eta', 'backlog ETA', queued === 0 ? 'none' : rate > 0 ? fmtAge((queued / rate) * 1000) : 'stalled',
    rate > 0 ? Math.round(queued / rate) : -1);
  drawCharts();

  const tb = document.querySelector('#table-rows tbody');
  clear(tb);
  for (const r of snap.rows || []) {
    const tr = el('tr');
    const m = minuteOf(r.model, r.tenant);
    cell(tr, r.model); cell(tr, r.tenant || '-');
    cell(tr, fmtInt(r.queued), 'num');
    cell(tr, r.blocked ? 'a limit or budget' : '');
    cell(tr, fmtAge(r.oldest_enq_ms ? snap.now_ms - r.oldest_enq_ms : 0), 'num');
    cell(tr, fmtInt(m.jobs), 'num'); cell(tr, fmtInt(m.tokens), 'num');
    cell(tr, r.queued === 0 ? '-' : m.jobs > 0 ? fmtAge((r.queued / m.jobs) * 60000) : 'stalled', 'num');
    tb.appendChild(tr);
  }
  const bb = document.querySelector('#table-buckets tbody');
  clear(bb);
  const all = (snap.buckets || []).slice();
  for (const e of asList(snap.endpoints && snap.endpoints.endpoints))
    for (const m of asList(e.models)) all.push({ ...m, name: m.bucket });
  for (const b of all) {
    const tr = el('tr');
    tr.dataset.bucket = b.name;
    cell(tr, b.name);
    cell(tr, fmtInt(b.requests_used) + ' / ' + (b.requests_limit >= 0 ? fmtInt(b.requests_limit) : '∞'), 'num');
    cell(tr, fmtInt(b.tokens_used) + ' / ' + (b.tokens_limit >= 0 ? fmtInt(b.tokens_limit) : '∞'), 'num');
    cell(tr, b.period_ms ? fmtAge(b.period_ms) : '-', 'num');
    bb.appendChild(tr);
  }
}

// Rows are kept across snapshots and updated in place: a table rebuilt every
// second would replace a button between a click's press and release (no
// click then).
const epRows = new Map();
function renderEndpoints() {
  const tb = document.querySelector('#table-endpoints tbody');
  const eps = asList(snap.endpoints && snap.endpoints.endpoints);
  let total = 0;
  for (const e of eps) total += e.n_ok;
  const seen = new Set();
  for (const e of eps) {
    seen.add(e.name);
    let row = epRows.get(e.name);
    if (!row) {
      const tr = el('tr');
      tr.dataset.endpoint = e.name;
      const cells = [];
      for (let i = 0; i < 9; i++) cells.push(cell(tr, ''));
      const b = el('button', '', 'act');
      cell(tr, '').appendChild(b);
      b.addEventListener('click', () => {
        const op = b.dataset.action;
        act('endpoint', { name: e.name, op }, (op === 'enable' ? 'Enable ' : 'Disable ') + e.name);
      });
      row = { tr, cells, b };
      epRows.set(e.name, row);
      tb.appendChild(tr);
    }
    const c = row.cells;
    row.tr.dataset.state = e.state;
    c[0].textContent = e.name;
    c[1].textContent = e.state === 'cooling' ? 'cooling until ' + fmtTime(e.cool_until_ms) : e.state;
    c[1].className = 'state-' + e.state;
    c[2].textContent = e.why || '';
    c[3].textContent = e.lat_ms >= 0 ? Math.round(e.lat_ms) + ' ms' : '-';
    c[4].textContent = fmtInt(e.n_ok);
    c[5].textContent = fmtInt(e.n_fail);
    c[6].textContent = fmtInt(e.n_429);
    c[7].textContent = total ? Math.round((100 * e.n_ok) / total) + ' %' : '-';
    for (const i of [3, 4, 5, 6, 7]) c[i].className = 'num';
    c[8].textContent = asList(e.models).map((m) => m.model).join(', ');
    const disabled = e.state === 'disabled';
    row.b.textContent = disabled ? 'Enable' : 'Disable';
    row.b.className = 'act' + (disabled ? '' : ' danger');
    row.b.dataset.action = disabled ? 'enable' : 'disable';
  }
  for (const [name, row] of epRows) {
    if (!seen.has(name)) { row.tr.remove(); epRows.delete(name); }
  }
}

function renderTenants() {
  const by = new Map();
  const get = (t) => {
    if (!by.has(t)) by.set(t, { queued: 0, parked: 0, jobs: 0, tokens: 0 });
    return by.get(t);
  };
  for (const r of snap.rows || []) {
    const x = get(r.tenant);
    x.queued += r.queued;
    if (r.blocked) x.parked += r.queued;
  }
  let total = 0;
  for (const m of snap.minute || []) {
    const x = get(m.tenant);
    x.jobs += m.jobs; x.tokens += m.tokens; total += m.jobs;
  }
  const active = [...by.values()].filter((x) => x.queued > 0 || x.jobs > 0).length;
  const tb = document.querySelector('#table-tenants tbody');
  clear(tb);
  for (const [t, x] of [...by.entries()].sort()) {
    const tr = el('tr');
    tr.dataset.tenant = t;
    cell(tr, t || '(none)');
    cell(tr, fmtInt(x.queued), 'num'); cell(tr, fmtInt(x.parked), 'num');
    cell(tr, fmtInt(x.jobs), 'num');
    cell(tr, total ? Math.round((100 * x.jobs) / total) + ' %' : '-', 'num');
    cell(tr, active && (x.queued > 0 || x.jobs > 0) ? Math.round(100 / active) + ' %' : '-', 'num');
    cell(tr, fmtInt(x.tokens), 'num');
    const use = (snap.buckets || []).filter((b) => b.name.endsWith('/t/' + t))
      .map((b) => b.name + ': ' + fmtInt(b.requests_used) + '/' + (b.requests_limit >= 0 ? fmtInt(b.requests_limit) : '∞'));
    cell(tr, use.join('; '));
    tb.appendChild(tr);
  }
  renderUsers(by);
}

// Each named user against its tenant (by: the tenants' figures above): its
// share of the tenant's jobs done in the last minute against an equal share
// among the tenant's users with work.
function renderUsers(by) {
  const users = snap.users || [];
  const active = new Map(); // tenant -> users with work
  for (const u of users)
    if (u.queued > 0 || u.jobs > 0) active.set(u.tenant, (active.get(u.tenant) || 0) + 1);
  const tb = document.querySelector('#table-users tbody');
  clear(tb);
  for (const u of users.slice().sort((a, b) => (a.tenant + '|' + a.user < b.tenant + '|' + b.user ? -1 : 1))) {
    const tr = el('tr');
    tr.dataset.tenant = u.tenant;
    tr.dataset.user = u.user;
    const tjobs = (by.get(u.tenant) || { jobs: 0 }).jobs;
    const busy = u.queued > 0 || u.jobs > 0;
    const use = tjobs ? Math.round((100 * u.jobs) / tjobs) : -1;
    const fair = busy ? Math.round(100 / active.get(u.tenant)) : -1;
    cell(tr, u.tenant || '(none)'); cell(tr, u.user);
    cell(tr, fmtInt(u.queued), 'num').dataset.field = 'queued';
    cell(tr, fmtInt(u.parked), 'num').dataset.field = 'parked';
    cell(tr, fmtInt(u.jobs), 'num').dataset.field = 'jobs';
    cell(tr, use >= 0 ? use + ' %' : '-', 'num').dataset.field = 'use';
    cell(tr, fair >= 0 ? fair + ' %' : '-', 'num').dataset.field = 'fair';
    tb.appendChild(tr);
  }
}

function renderWorkers() {
  const tb = document.querySelector('#table-workers tbody');
  clear(tb);
  for (const w of (snap.workers || []).slice().sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const tr = el('tr');
    tr.dataset.worker = w.name;
    cell(tr, w.name);
    cell(tr, w.seen_ms_ago <= LIVE_MS ? 'live' : 'stopped', w.seen_ms_ago <= LIVE_MS ? 'state-ok' : 'state-disabled');
    cell(tr, fmtAge(w.seen_ms_ago) + ' ago', 'num');
    cell(tr, fmtInt(w.in_flight), 'num');
    const eps = (w.endpoints || []).map((e) => (e === '' ? '(account key)' : e));
    cell(tr, eps.join(', ') || '-').dataset.field = 'endpoints';
    cell(tr, w.version || '-').dataset.field = 'version';
    tb.appendChild(tr);
  }
  $('workers-inflight').textContent = fmtInt(snap.in_flight);
}

function render() {
  if (!snap) return;
  if (view === 'overview') renderOverview();
  else if (view === 'endpoints') renderEndpoints();
  else if (view === 'tenants') renderTenants();
  else if (view === 'workers') renderWorkers();
}

// ---- jobs ----

// The job's calls one by one (lua/lib/attempts.lua: the last 8 kept).
function renderCalls(out, j) {
  const calls = j.calls || [];
  const shown = calls.length < (j.calls_total || 0) ? ' (the last ' + calls.length + ' of ' + j.calls_total + ')' : '';
  out.appendChild(el('h3', 'Calls' + shown));
  if (!calls.length) { out.appendChild(el('p', 'No call made yet.')); return; }
  const t = el('table');
  t.id = 'job-calls';
  const head = el('tr');
  for (const h of ['#', 'started', 'endpoint', 'model', 'status', 'outcome', 'took', 'tokens in / out']) head.appendChild(el('th', h));
  t.appendChild(head);
  const first = (j.calls_total || calls.length) - calls.length;
  calls.forEach((c, i) => {
    const tr = el('tr');
    tr.dataset.endpoint = c.endpoint;
    tr.dataset.status = c.status;
    tr.dataset.mode = c.mode;
    cell(tr, String(first + i + 1));
    cell(tr, fmtTime(c.start_ms));
    cell(tr, c.endpoint || '(account key)');
    cell(tr, c.model);
    cell(tr, c.status);
    cell(tr, c.mode);
    cell(tr, c.took_ms >= 0 ? c.took_ms + ' ms' : '-');
    cell(tr, (c.in_tokens >= 0 ? fmtInt(c.in_tokens) : '-') + ' / ' + (c.out_tokens >= 0 ? fmtInt(c.out_tokens) : '-'));
    t.appendChild(tr);
  });
  out.appendChild(t);
}

async function findJob(id) {
  const out = $('job-out');
  clear(out);
  try {
    const j = await api('job?id=' + encodeURIComponent(id));
    if (j.matches) { // a custom_id several gateway batches have: choose one
      out.appendChild(el('p', 'Jobs of several batches have this custom_id:'));
      const ul = el('ul');
      ul.id = 'job-matches';
      for (const m of j.matches) {
        const li = el('li', m, 'link');
        li.dataset.id = m;
        li.addEventListener('click', () => { $('job-id').value = m; findJob(m); });
        ul.appendChild(li);
      }
      out.appendChild(ul);
      return;
    }
    const t = el('table');
    t.id = 'job-fields';
    for (const k of Object.keys(j)) {
      if (k === 'body' || k === 'calls' || k === 'calls_total') continue;
      const tr = el('tr');
      tr.dataset.field = k;
      cell(tr, k);
      cell(tr, /_ms$/.test(k) && Number(j[k]) > 1e12 ? fmtTime(j[k]) + ' (' + j[k] + ')' : j[k]);
      t.appendChild(tr);
    }
    out.appendChild(t);
    renderCalls(out, j);
    if (j.body !== undefined) {
      out.appendChild(el('h3', 'Request'));
      const pre = el('pre', j.body);
      pre.id = 'job-body';
      out.appendChild(pre);
    }
  } catch (e) {
    out.appendChild(el('p', e.message, 'err'));
  }
}

async function loadDead() {
  const q = 'dead?model=' + encodeURIComponent($('dead-model').value) +
    '&reason=' + encodeURIComponent($('dead-reason').value);
  const tb = document.querySelector('#table-dead tbody');
  try {
    const j = await api(q);
    clear(tb);
    for (const d of asList(j.dead)) {
      const tr = el('tr');
      tr.dataset.id = d.id;
      const td = cell(tr, '');
      const cb = el('input');
      cb.type = 'checkbox';
      cb.value = d.id;
      td.appendChild(cb);
      const a = cell(tr, d.id);
      a.className = 'link';
      a.addEventListener('click', () => { $('job-id').value = d.id; findJob(d.id); });
      cell(tr, d.model); cell(tr, d.tenant || '-'); cell(tr, d.reason); cell(tr, d.error);
      cell(tr, fmtTime(d.ts));
      tb.appendChild(tr);
    }
    tb.dataset.loaded = String(Date.now());
  } catch (e) {
    toast('Dead letters: ' + e.message, true, e.status);
  }
}

function money(unit, n) {
  return unit === 'usd' ? '$' + (n / 1e9).toFixed(2) : fmtInt(n) + ' tokens';
}

async function loadBudgets() {
  try {
    const j = await api('budgets');
    const tb = document.querySelector('#table-budgets tbody');
    clear(tb);
    for (const b of asList(j.data)) {
      const tr = el('tr');
      tr.dataset.budget = b.id;
      cell(tr, b.scope); cell(tr, b.period);
      cell(tr, money(b.unit, b.spent) + ' / ' + money(b.unit, b.limit), 'num');
      cell(tr, b.limit > 0 ? Math.round((100 * b.spent) / b.limit) + ' %' : '-', 'num');
      cell(tr, fmtTime(b.period_end_ms));
      cell(tr, fmtInt(b.waiting_jobs), 'num');
      tb.appendChild(tr);
    }
  } catch (e) {
    toast('Budgets: ' + e.message, true, e.status);
  }
}

async function loadBatches() {
  try {
    const j = await api('batches?limit=50');
    const tb = document.querySelector('#table-batches tbody');
    clear(tb);
    for (const b of asList(j.data)) {
      const tr = el('tr');
      tr.dataset.batch = b.id;
      cell(tr, b.id); cell(tr, b.tenant || '-'); cell(tr, b.status);
      const done = b.completed + b.failed;
      const td = cell(tr, fmtInt(done) + ' / ' + fmtInt(b.total) +
        (b.total ? ' (' + Math.round((100 * done) / b.total) + ' %)' : ''), 'num');
      const bar = el('progress');
      bar.max = b.total || 1;
      bar.value = done;
      td.appendChild(bar);
      cell(tr, fmtInt(b.failed), 'num');
      cell(tr, fmtTime(b.created_at * 1000));
      tb.appendChild(tr);
    }
    const p = await api('pbatches');
    const pb = document.querySelector('#table-pbatches tbody');
    clear(pb);
    for (const b of asList(p.data)) {
      const tr = el('tr');
      for (const k of ['id', 'model', 'state', 'n', 'status', 'done', 'retried', 'dead'])
        cell(tr, b[k] === undefined ? '-' : b[k]);
      pb.appendChild(tr);
    }
    $('pbatches-title').hidden = $('table-pbatches').hidden = !!me.tenant;
  } catch (e) {
    toast('Batches: ' + e.message, true, e.status);
  }
}

async function deadAct(kind, all) {
  let body;
  if (all) {
    body = { all: true, model: $('dead-model').value, reason: $('dead-reason').value };
  } else {
    const ids = [...document.querySelectorAll('#table-dead tbody input:checked')].map((c) => c.value);
    if (!ids.length) { toast('Select dead letters first', true); return; }
    body = { ids };
  }
  const j = await act('dead/' + kind, body, (kind === 'retry' ? 'Retry' : 'Purge'));
  if (j) {
    const n = j.results.length;
    const outcomes = {};
    for (const r of j.results) outcomes[r.outcome] = (outcomes[r.outcome] || 0) + 1;
    toast((kind === 'retry' ? 'Retried ' : 'Purged ') + n + ' job(s): ' + JSON.stringify(outcomes), false, 200);
    loadDead();
  }
}

// ---- wiring ----

document.addEventListener('DOMContentLoaded', () => {
  $('login-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const key = $('login-key').value.trim();
    $('login-key').value = '';
    try {
      me = await api('login', { key });
      loggedIn();
    } catch (e) {
      $('login-error').textContent = e.message;
    }
  });
  $('logout').addEventListener('click', async () => {
    await act('logout', {}, 'Log out');
    showLogin();
  });
  for (const b of document.querySelectorAll('nav button')) {
    b.addEventListener('click', () => {
      view = b.dataset.view;
      for (const x of document.querySelectorAll('nav button')) x.classList.toggle('on', x === b);
      for (const s of document.querySelectorAll('.view')) s.hidden = s.id !== 'view-' + view;
      if (view === 'jobs') { loadDead(); loadBatches(); }
      if (view === 'tenants') loadBudgets();
      render();
    });
  }
  $('job-form').addEventListener('submit', (ev) => { ev.preventDefault(); findJob($('job-id').value.trim()); });
  $('dead-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadDead(); });
  $('dead-retry-sel').addEventListener('click', () => deadAct('retry', false));
  $('dead-purge-sel').addEventListener('click', () => deadAct('purge', false));
  $('dead-retry-all').addEventListener('click', () => deadAct('retry', true));
  $('dead-purge-all').addEventListener('click', () => deadAct('purge', true));
  api('me').then((m) => { me = m; loggedIn(); }).catch(() => showLogin());
});
