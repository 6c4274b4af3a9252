// The dashboard in a real browser (ctest dashboard_browser, run.sh): Debian's
// chromium driven by puppeteer-core against the stack of
// tests/gateway/stack.sh (redis-server, openai-sim A, llmq-gateway) plus what
// this script starts: a second openai-sim (B), two endpoints of gpt-4o-mini
// (ep-a on A, tier 1; ep-b on B, tier 2: spillover sends everything to ep-a
// while it is up), two workers holding both endpoints' keys, and a steady
// load of jobs for two tenants. Sim A answers its first call 500 and the
// first job has max_attempts 1 and is pinned to ep-a, so it is dead before
// the load starts; its
// prompt holds a <script>.
// Checks: login; the figures (llmq's own 429s too) equal `llmq status
// --json`; each user's use against its fair share of its tenant; the utilisation
// chart moves; the dead job retried from the page succeeds, and its calls
// show one by one (the 500, the 200); the workers view shows each worker's
// endpoints and version; ep-a disabled
// from the page and traffic moves to sim B; a viewer's action gets a 403
// that the page shows; a tenant's viewer sees no other tenant; the prompt is
// shown as text; the live stream survives a gateway restart and a Redis
// restart (the page says so, then recovers). Prints TAP-like lines and
// "N passed, N failed".
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

const BIN = process.env.LLMQ_BIN_DIR;
const STACK = process.env.STACK_DIR;
const SHOTS = process.env.DASH_SHOTS_DIR;
let gwPort = process.env.GW_PORT;
const base = () => `http://127.0.0.1:${gwPort}`;
const spawnPrefix = (process.env.LLMQ_SPAWN || '').split(' ').filter(Boolean);
let pass = 0, fail = 0;
const children = [];

function check(name, ok, detail) {
  if (ok) { pass++; console.log('ok - ' + name); }
  else { fail++; console.log('not ok - ' + name + (detail !== undefined ? ': ' + detail : '')); }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Polls fn until it returns a truthy value; generous bounds (a busy host).
async function waitFor(what, fn, timeoutMs = 120000) {
  const t0 = Date.now();
  let last;
  while (Date.now() - t0 < timeoutMs) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e.message; }
    await sleep(250);
  }
  throw new Error('timed out waiting for ' + what + ' (last: ' + JSON.stringify(last) + ')');
}
function llmq(...args) { return execFileSync(path.join(BIN, 'llmq'), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }); }
function start(cmd, args, env, log) {
  const all = [...spawnPrefix, cmd, ...args];
  const c = spawn(all[0], all.slice(1), { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', fs.openSync(log, 'a')] });
  children.push(c);
  return c;
}
function lines(file) { try { return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).length; } catch { return 0; } }
function status() { return JSON.parse(llmq('status', '--json')); }
function jobLine(id, tenant, content, extra = {}) {
  return JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions',
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content }] }, llmq: { tenant, ...extra } });
}
function enqueue(name, ls) {
  const f = path.join(STACK, name + '.jsonl');
  fs.writeFileSync(f, ls.join('\n') + '\n');
  llmq('enqueue', f, '--quiet');
}
async function shot(page, name) {
  const f = path.join(SHOTS, name + '.png');
  await page.screenshot({ path: f, fullPage: true });
  console.log('# screenshot: ' + f);
}

// ---- the rest of the stack ----
const simB = path.join(STACK, 'simB');
start(path.join(BIN, 'openai-sim'), ['--port', '0', '--port-file', simB + '.port', '--quiet', '--access-log', simB + '.log'], {}, simB + '.err');
await waitFor('sim B', () => fs.existsSync(simB + '.port') && fs.readFileSync(simB + '.port', 'utf8').trim());
const simBUrl = `http://127.0.0.1:${fs.readFileSync(simB + '.port', 'utf8').trim()}/v1`;
llmq('endpoints', 'add', 'ep-a', '--base-url', process.env.SIM_URL);
llmq('endpoints', 'add', 'ep-b', '--base-url', simBUrl, '--tier', '2');
// a third endpoint no worker holds a key for: its model's jobs wait, a
// figure that stays put while the comparison with `llmq status` is made
llmq('endpoints', 'add', 'ep-h', '--base-url', simBUrl);
llmq('limits', 'set', 'gpt-4o-mini', '--endpoint', 'ep-a', '--rpm', '6000', '--period-ms', '60000');
llmq('limits', 'set', 'gpt-4o-mini', '--endpoint', 'ep-b', '--rpm', '6000', '--period-ms', '60000');
llmq('limits', 'set', 'gpt-held', '--endpoint', 'ep-h', '--rpm', '600', '--period-ms', '60000');
const XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">';
enqueue('dead', [jobLine('dead-1', 'acme', XSS + ' hello', { max_attempts: 1, endpoints: 'ep-a' })]);
enqueue('held', Array.from({ length: 7 }, (_, i) => JSON.stringify({ custom_id: 'held-' + i, method: 'POST',
  url: '/v1/chat/completions', body: { model: 'gpt-held', messages: [{ role: 'user', content: 'wait' }] },
  llmq: { tenant: 'acme', priority: 'low' } })));
const admin = llmq('keys', 'create', '--role', 'admin').trim();
const viewer = llmq('keys', 'create', '--role', 'viewer').trim();
const acmeViewer = llmq('keys', 'create', '--role', 'viewer', '--tenant', 'acme').trim();
const clientKey = process.env.GW_KEY;
for (let i = 1; i <= 2; i++)
  start(path.join(BIN, 'llmq-worker'), ['--endpoint-key', 'ep-a=KA', '--endpoint-key', 'ep-b=KB', '--consumer', 'dw' + i, '--log-level', 'warn'],
    { KA: 'not-a-real-key-a', KB: 'not-a-real-key-b' }, path.join(STACK, 'dworker' + i + '.err'));
await waitFor('the first job dead (sim A answers its first call 500)', () => status().totals.dead === 1);
check('the dead job is dead before the load starts', true);

// a steady load: 20 jobs a second, two tenants, until the end
let seq = 0, loading = true;
(async () => {
  while (loading) {
    const ls = [];
    // users: acme's ann and al, beta's bo (the tenants view's users)
    for (let i = 0; i < 20; i++, seq++)
      ls.push(jobLine('load-' + seq, seq % 2 ? 'acme' : 'beta', 'job ' + seq, { user: seq % 2 ? (seq % 4 === 1 ? 'ann' : 'al') : 'bo' }));
    try { enqueue('load', ls); } catch (e) { /* Redis restarting: the next round */ }
    await sleep(1000);
  }
})();

const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
try {
  // ---- admin ----
  const ctx = await browser.createBrowserContext();
  const page = await ctx.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('dialog', (d) => { errors.push('dialog: ' + d.message()); d.dismiss(); });
  const first = await page.goto(base() + '/dashboard', { waitUntil: 'load' });
  check('the page loads (200)', first.status() === 200, first.status());
  const size = Object.values(await page.evaluate(async () => {
    const out = {};
    for (const f of ['/dashboard', '/dashboard/app.js', '/dashboard/app.css'])
      out[f] = (await (await fetch(f)).arrayBuffer()).byteLength;
    return out;
  })).reduce((a, b) => a + b, 0);
  check('the whole page is under 200 KB', size < 200 * 1024, size);
  await page.waitForSelector('#login-key', { visible: true });
  await page.type('#login-key', clientKey);
  await page.click('#login-form button');
  await page.waitForFunction(() => document.getElementById('login-error').textContent.length > 0);
  check('a client key is refused by the login',
    (await page.$eval('#login-error', (e) => e.textContent)).includes('client key'));
  await page.type('#login-key', admin);
  await page.click('#login-form button');
  await page.waitForFunction(() => document.getElementById('conn').dataset.state === 'live', { timeout: 60000 });
  const cookies = await ctx.cookies(base());
  const c = cookies.find((x) => x.name === 'llmq_dash');
  check('the session cookie is HttpOnly and SameSite=Strict', c && c.httpOnly && c.sameSite === 'Strict', JSON.stringify(c));
  check('the key is not kept in the page', !(await page.content()).includes(admin));

  // the figures equal `llmq status --json` at a moment both agree is still
  const agree = await waitFor('page figures equal to llmq status --json', async () => {
    const s1 = status();
    const at = await page.evaluate(() => Number(document.body.dataset.snapAt));
    await page.waitForFunction((t) => Number(document.body.dataset.snapAt) > t, { timeout: 30000 }, at);
    const p = await page.evaluate(() => {
      const v = (id) => Number(document.getElementById('card-' + id).dataset.value);
      return { high: v('queued-high'), normal: v('queued-normal'), low: v('queued-low'), dead: v('dead-letters'), delayed: v('delayed'),
        ownWait: Number(document.getElementById('card-429-own').dataset.wait),
        ownBudget: Number(document.getElementById('card-429-own').dataset.budget) };
    });
    const s2 = status();
    const same = JSON.stringify(s1.queues) === JSON.stringify(s2.queues) && s1.totals.dead === s2.totals.dead;
    const ok = same && p.high === s2.queues.high.queued && p.normal === s2.queues.normal.queued &&
      p.low === s2.queues.low.queued && p.dead === s2.totals.dead && p.delayed === s2.totals.delayed &&
      p.ownWait === s2.totals.own_429_wait && p.ownBudget === s2.totals.own_429_budget;
    return ok ? { p, s: s2.queues } : false;
  });
  check("queued per priority, delayed, dead letters and llmq's own 429s equal llmq status --json", agree.p.low === 7 && agree.p.dead === 1, JSON.stringify(agree));

  // the utilisation chart moves as jobs run
  const u1 = await page.$eval('#chart-util', (s) => ({ n: Number(s.dataset.points), last: s.dataset.last }));
  const u2 = await waitFor('the utilisation chart to move', async () => {
    const u = await page.$eval('#chart-util', (s) => ({ n: Number(s.dataset.points), last: s.dataset.last, lines: s.querySelectorAll('polyline').length }));
    const last = JSON.parse(u.last || '{}');
    return u.n > u1.n + 5 && u.lines > 0 && (last['gpt-4o-mini@ep-a requests'] || 0) > 0 && u.last !== u1.last ? u : false;
  });
  check('the utilisation chart moves as jobs run (ep-a requests > 0 %)', true, JSON.stringify(u2));
  await waitFor('jobs done per second above 0', () => page.$eval('#card-rate', (e) => Number(e.dataset.value) > 0));
  await shot(page, 'overview');

  // ---- jobs: the <script> prompt as text, then the dead job retried ----
  await page.click('nav button[data-view="jobs"]');
  await page.waitForSelector('#table-dead tbody tr[data-id="dead-1"]', { timeout: 60000 });
  await page.click('#table-dead tbody tr[data-id="dead-1"] td:nth-child(2)');
  await page.waitForSelector('#job-body');
  const body = await page.$eval('#job-body', (e) => e.textContent);
  check('the prompt with <script> is shown as text', body.includes('<script>window.__xss = 1</script>'), body.slice(0, 200));
  check('and nothing of it ran or became an element', (await page.evaluate(() => window.__xss === undefined &&
    document.querySelectorAll('#job-out script, #job-out img').length === 0)));
  await shot(page, 'jobs');
  await page.click('#table-dead tbody tr[data-id="dead-1"] input[type=checkbox]');
  await page.click('#dead-retry-sel');
  await page.waitForFunction(() => !document.getElementById('toast').hidden && document.getElementById('toast').textContent.startsWith('Retried'));
  check('the page says the job was retried', (await page.$eval('#toast', (e) => e.textContent)).includes('queued'));
  await waitFor('the retried job done', () => llmq('results', 'dead-1').includes('"status_code":200'));
  check('the dead job retried from the page succeeded', true);
  // its calls one by one: the 500 that killed it, then the retry's 200
  await page.$eval('#job-id', (e) => { e.value = 'dead-1'; });
  await page.click('#job-form button');
  await page.waitForSelector('#job-calls tr[data-mode="done"]', { timeout: 60000 });
  const calls = await page.$$eval('#job-calls tr[data-mode]', (rs) => rs.map((r) => [r.dataset.mode, r.dataset.status, r.dataset.endpoint].join(' ')));
  check("the job's calls one by one: dead on a 500 from ep-a, then done (200) from ep-a",
    JSON.stringify(calls) === JSON.stringify(['dead 500 ep-a', 'done 200 ep-a']), JSON.stringify(calls));
  await shot(page, 'job-calls');

  // ---- endpoints: ep-a disabled from the page, traffic moves to sim B ----
  await page.click('nav button[data-view="endpoints"]');
  await page.waitForSelector('#table-endpoints tr[data-endpoint="ep-a"]');
  const a0 = lines(process.env.SIM_LOG), b0 = lines(simB + '.log');
  await waitFor('traffic on ep-a (sim A) while it is up', () => lines(process.env.SIM_LOG) > a0 + 20);
  check('before: the traffic is on ep-a (sim B idle)', lines(simB + '.log') === b0, lines(simB + '.log') - b0);
  await page.click('#table-endpoints tr[data-endpoint="ep-a"] button');
  await page.waitForSelector('#table-endpoints tr[data-endpoint="ep-a"][data-state="disabled"]', { timeout: 60000 });
  check('ep-a shows disabled', true);
  const eps = JSON.parse(llmq('endpoints', 'list', '--json'));
  const epa = eps.endpoints.find((e) => e.name === 'ep-a');
  check('llmq endpoints list says ep-a is disabled', epa.state === 'disabled', JSON.stringify(epa));
  await waitFor('traffic on sim B', () => lines(simB + '.log') > b0 + 20);
  const a1 = lines(process.env.SIM_LOG), b1 = lines(simB + '.log');
  await waitFor('more traffic on sim B', () => lines(simB + '.log') > b1 + 40);
  check('after: sim B takes the traffic, sim A none', lines(process.env.SIM_LOG) === a1, lines(process.env.SIM_LOG) - a1);
  await shot(page, 'endpoints');
  // ---- workers: what each serves, its version ----
  const version = execFileSync(path.join(BIN, 'llmq-worker'), ['--version'], { encoding: 'utf8' }).trim().split(' ')[1];
  await page.click('nav button[data-view="workers"]');
  await page.waitForSelector('#table-workers tr[data-worker="dw1"]');
  const w1 = await page.$eval('#table-workers tr[data-worker="dw1"]', (r) =>
    r.querySelector('[data-field=endpoints]').textContent + ' | ' + r.querySelector('[data-field=version]').textContent);
  check('the workers view: dw1 serves ep-a and ep-b, and its version', w1 === 'ep-a, ep-b | ' + version, w1);
  await shot(page, 'workers');
  // ---- tenants: each user's use against its fair share of its tenant ----
  await page.click('nav button[data-view="tenants"]');
  const users = await waitFor("acme's users ann and al with jobs done this minute", async () => {
    const u = await page.evaluate(() => {
      const rows = {};
      for (const r of document.querySelectorAll('#table-users tbody tr')) {
        const f = (n) => r.querySelector('[data-field=' + n + ']').textContent;
        rows[r.dataset.tenant + '/' + r.dataset.user] = { jobs: f('jobs'), use: f('use'), fair: f('fair') };
      }
      // the snapshot the page drew them from
      const snapJobs = {};
      for (const x of snap.users || []) snapJobs[x.tenant + '/' + x.user] = x.jobs;
      return { rows, snapJobs };
    });
    const a = u.rows['acme/ann'], b = u.rows['acme/al'];
    return a && b && u.rows['beta/bo'] && Number(a.jobs) > 0 && Number(b.jobs) > 0 ? u : false;
  });
  check("the users view: acme's ann and al each owed 50 % of acme, beta's bo 100 % of beta",
    users.rows['acme/ann'].fair === '50 %' && users.rows['acme/al'].fair === '50 %' && users.rows['beta/bo'].fair === '100 %',
    JSON.stringify(users.rows));
  check("and each user's jobs/min is the snapshot's",
    Object.entries(users.rows).every(([k, r]) => Number(r.jobs.replace(/,/g, '')) === users.snapJobs[k]), JSON.stringify(users));
  check("and a use share of its tenant's jobs", /^\d+ %$/.test(users.rows['acme/ann'].use), users.rows['acme/ann'].use);
  await shot(page, 'tenants');
  await page.click('nav button[data-view="endpoints"]');
  await page.click('#table-endpoints tr[data-endpoint="ep-a"] button');
  await page.waitForSelector('#table-endpoints tr[data-endpoint="ep-a"][data-state="ok"]', { timeout: 60000 });
  check('ep-a enabled again from the page', true);
  await page.click('nav button[data-view="overview"]');
  await sleep(2000);
  await shot(page, 'overview-later'); // the README's picture (docs/img/dashboard.png)

  // ---- a viewer: sees, cannot act ----
  const vctx = await browser.createBrowserContext();
  const vpage = await vctx.newPage();
  await vpage.setViewport({ width: 1280, height: 900 });
  await vpage.goto(base() + '/dashboard');
  await vpage.waitForSelector('#login-key', { visible: true });
  await vpage.type('#login-key', viewer);
  await vpage.click('#login-form button');
  await vpage.waitForFunction(() => document.getElementById('conn').dataset.state === 'live', { timeout: 60000 });
  await vpage.click('nav button[data-view="endpoints"]');
  await vpage.waitForSelector('#table-endpoints tr[data-endpoint="ep-b"] button');
  await vpage.click('#table-endpoints tr[data-endpoint="ep-b"] button');
  await vpage.waitForFunction(() => !document.getElementById('toast').hidden);
  const vt = await vpage.$eval('#toast', (e) => ({ status: e.dataset.status, text: e.textContent }));
  check("a viewer's action is refused with a 403 the page shows", vt.status === '403' && vt.text.includes('refused'), JSON.stringify(vt));
  await shot(vpage, 'viewer-refused');
  check('ep-b is still enabled', JSON.parse(llmq('endpoints', 'list', '--json')).endpoints.find((e) => e.name === 'ep-b').state === 'ok');

  // ---- a tenant's viewer: sees no other tenant ----
  const tctx = await browser.createBrowserContext();
  const tpage = await tctx.newPage();
  await tpage.setViewport({ width: 390, height: 844 }); // a phone
  await tpage.goto(base() + '/dashboard');
  await tpage.waitForSelector('#login-key', { visible: true });
  await tpage.type('#login-key', acmeViewer);
  await tpage.click('#login-form button');
  await tpage.waitForFunction(() => document.getElementById('conn').dataset.state === 'live', { timeout: 60000 });
  await tpage.waitForSelector('#table-rows tbody tr');
  await sleep(3000); // a few snapshots
  const seen = await tpage.evaluate(() => ({ snap: JSON.stringify(snap), points: JSON.stringify(points), text: document.body.innerText }));
  check("the tenant's viewer sees its tenant", seen.snap.includes('acme'));
  check('and nothing of another tenant (snapshot, charts, page)', !seen.snap.includes('beta') && !seen.points.includes('beta') && !seen.text.includes('beta'));
  check('nor the account-wide figures', !seen.snap.includes('"endpoints"') && !seen.snap.includes('"workers"'));
  await tpage.click('nav button[data-view="tenants"]');
  await tpage.waitForSelector('#table-users tbody tr');
  const tusers = await tpage.$$eval('#table-users tbody tr', (rs) => rs.map((r) => r.dataset.tenant + '/' + r.dataset.user).sort());
  check("the tenant's viewer: its users only (ann, al)", JSON.stringify(tusers) === JSON.stringify(['acme/al', 'acme/ann']), JSON.stringify(tusers));
  await tpage.click('nav button[data-view="jobs"]');
  await sleep(1500);
  const tdead = await tpage.$$eval('#table-dead tbody tr', (rs) => rs.map((r) => r.dataset.id));
  check("its dead letters list only its tenant's", tdead.every((id) => id.startsWith('dead') || id.startsWith('load')), JSON.stringify(tdead));
  await tpage.click('nav button[data-view="overview"]');
  await shot(tpage, 'tenant-viewer-phone');

  // ---- the live stream survives a gateway restart ----
  const before = await page.evaluate(() => Number(document.body.dataset.snapAt));
  await page.click('nav button[data-view="overview"]');
  process.kill(Number(process.env.GW_PID), 'SIGTERM');
  await page.waitForFunction(() => document.getElementById('conn').dataset.state !== 'live', { timeout: 60000 });
  check('the page notices the gateway is gone', true);
  fs.rmSync(path.join(STACK, 'gw2.port'), { force: true });
  const gw2 = start(path.join(BIN, 'llmq-gateway'), ['--listen', '127.0.0.1:' + gwPort, '--port-file', path.join(STACK, 'gw2.port'), '--log-level', 'warn'], {}, path.join(STACK, 'gateway2.err'));
  await waitFor('the new gateway', () => fs.existsSync(path.join(STACK, 'gw2.port')));
  await page.waitForFunction((t) => document.getElementById('conn').dataset.state === 'live' && Number(document.body.dataset.snapAt) > t, { timeout: 120000 }, before);
  check('the page reconnects to the restarted gateway, same session', true);

  // ---- and a Redis restart: the page says so, then recovers ----
  const redisDir = path.join(STACK, 'redis');
  const port = process.env.REDIS_PORT;
  execFileSync('redis-cli', ['-p', port, 'shutdown', 'save']);
  await page.waitForFunction(() => document.getElementById('conn').dataset.state === 'redis down' && !document.getElementById('banner').hidden, { timeout: 60000 });
  check('the page says Redis is unreachable', (await page.$eval('#banner', (e) => e.textContent)).includes('Redis is unreachable'));
  await shot(page, 'redis-down');
  execFileSync(process.env.REDIS_SERVER || 'redis-server', ['--port', port, '--bind', '127.0.0.1', '--dir', redisDir, '--daemonize', 'yes',
    '--pidfile', path.join(redisDir, 'redis.pid'), '--logfile', path.join(redisDir, 'redis.log'), '--save', '', '--appendonly', 'no']);
  const downAt = await page.evaluate(() => Number(document.body.dataset.snapAt));
  await page.waitForFunction((t) => document.getElementById('conn').dataset.state === 'live' && document.getElementById('banner').hidden &&
    Number(document.body.dataset.snapAt) > t, { timeout: 120000 }, downAt);
  check('the page recovers after Redis is back', true);
  const doneA = await page.$eval('#card-done', (e) => Number(e.dataset.value));
  await waitFor('jobs done again after the restart', async () => (await page.$eval('#card-done', (e) => Number(e.dataset.value))) > doneA);
  check('and jobs run again', true);
  check('no script error in the page', errors.length === 0, JSON.stringify(errors));
  gw2.unref();
} catch (e) {
  check('the browser test ran to the end', false, e.stack);
} finally {
  loading = false;
  await browser.close();
  for (const c of children) { try { c.kill('SIGTERM'); } catch { /* gone */ } }
}
console.log(`${pass} passed, ${fail} failed`);
process.exit(fail === 0 ? 0 : 1);
