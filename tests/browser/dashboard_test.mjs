// The dashboard in a real browser (Debian's chromium, driven by npm's
// playwright-core): a training job on four node processes, watched, unlocked
// with the cluster secret, a stage's node killed from the page, the failure
// and the recovery on the timeline and the bars moved to the survivors; then
// a federated and a serving page whose curves fill.
//
//   node tests/browser/dashboard_test.mjs SALAMANDER_BIN ARTIFACT_DIR
//
// Exits 77 (ctest: skipped) naming what is missing when chromium or
// playwright-core is not installed (deploy/install-deps.sh installs both).
// Every process it starts is stopped on the way out, whatever happens.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const [bin, artifacts = path.join(os.tmpdir(), 'salamander-dashboard-artifacts')] =
  process.argv.slice(2);
const chromiumPath = process.env.SALAMANDER_CHROMIUM || '/usr/bin/chromium';
const SKIP = 77;

if (!bin) {
  console.error('usage: dashboard_test.mjs SALAMANDER_BIN [ARTIFACT_DIR]');
  process.exit(2);
}
if (!fs.existsSync(chromiumPath)) {
  console.log(`SKIP: no chromium at ${chromiumPath} (deploy/install-deps.sh installs Debian's)`);
  process.exit(SKIP);
}
let chromium;
try {
  ({ chromium } = await import(path.join(here, 'node_modules/playwright-core/index.mjs')));
} catch (err) {
  console.log('SKIP: playwright-core is not installed in tests/browser (deploy/install-deps.sh ' +
    'runs npm ci there): ' + err.message);
  process.exit(SKIP);
}

fs.mkdirSync(artifacts, { recursive: true });
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'salamander-dashboard-'));
const secret = 'browser-test-' + Math.random().toString(16).slice(2);
const env = { ...process.env, SALAMANDER_SECRET: secret, OMP_NUM_THREADS: '1',
  OPENBLAS_NUM_THREADS: '1' };
delete env.SALAMANDER_TLS;

// ---- processes: each in its own group, all stopped at the end
const procs = [];
function start(name, args) {
  const out = fs.openSync(path.join(work, name + '.out'), 'w');
  const err = fs.openSync(path.join(work, name + '.err'), 'w');
  const p = spawn(bin, args, { cwd: work, env, detached: true, stdio: ['ignore', out, err] });
  p.name = name;
  p.exited = new Promise((resolve) => p.on('exit', (code, sig) => resolve({ code, sig })));
  p.done = false;
  p.exited.then(() => { p.done = true; });
  procs.push(p);
  return p;
}
function stopAll() {
  for (const p of procs) {
    if (!p.done) {
      try { process.kill(-p.pid, 'SIGKILL'); } catch { /* gone */ }
    }
  }
}
process.on('exit', stopAll);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { stopAll(); process.exit(1); });

const read = (name, ext = 'out') => {
  try { return fs.readFileSync(path.join(work, `${name}.${ext}`), 'utf8'); } catch { return ''; }
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Waits for `check()` to give a truthy value; the limit only guards against
// a hang (ctest's timeout is the real bound) and the failure says what was
// awaited, with the logs.
async function until(what, check, limitS = 180) {
  const end = Date.now() + limitS * 1000;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error('gave up waiting for ' + what);
    await sleep(200);
  }
}
function fail(why) {
  throw new Error(why);
}
async function printed(p, pattern) {
  return until(`${p.name} to print ${pattern}`, () => {
    if (p.done) fail(`${p.name} exited: ${read(p.name, 'err').slice(-2000)}`);
    const m = read(p.name).match(pattern) || read(p.name, 'err').match(pattern);
    return m;
  }, 120);
}

const pageErrors = [];
let browser;
async function openPage(url, width = 1280) {
  const page = await browser.newPage({ viewport: { width, height: 800 } });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  // the page's own errors; a stream cut when its process exits is not one
  page.on('console', (m) => {
    if (m.type() === 'error' && !/^Failed to load resource/.test(m.text())) pageErrors.push(m.text());
  });
  await page.goto(url);
  return page;
}
async function shot(page, name) {
  await page.screenshot({ path: path.join(artifacts, name), fullPage: true });
  console.log('screenshot:', path.join(artifacts, name));
}
// Points of a chart of the page (by its data-chart key), dataset `i`.
const points = (page, key, i = 0) => page.evaluate(([k, n]) => {
  const canvas = document.querySelector(`[data-chart="${k}"] canvas`);
  const chart = canvas && window.Chart.getChart(canvas);
  return chart ? chart.data.datasets[n].data.filter((p) => p !== null) : [];
}, [key, i]);

// ---- 1. training on four nodes: bars, a kill from the page, the recovery
async function training() {
  const nodes = [];
  let cluster = '';
  for (let i = 1; i <= 4; i++) {
    const n = start(`node${i}`, ['node', '--name', `node${i}`, '--listen', '127.0.0.1:0']);
    const m = await printed(n, /listening on 127\.0\.0\.1:(\d+)/);
    cluster += `[[node]]\nname = "node${i}"\naddress = "127.0.0.1:${m[1]}"\n\n`;
    nodes.push(n);
  }
  fs.writeFileSync(path.join(work, 'cluster.toml'), cluster);
  // many epochs: the job is stopped from the page, never ends by itself first;
  // no capacity re-plans: the node killed must still hold the stage it held
  // when the console showed the plan (on a loaded host the job may move)
  const sup = start('supervisor', ['supervisor', '--cluster', 'cluster.toml', '--model', 'cnn',
    '--epochs', '200', '--plan', 'pipeline', '--micro-batches', '4', '--hang-timeout', '3',
    '--replan-gain', '0',
    '--listen', '127.0.0.1:0', '--dashboard', '127.0.0.1:0', '--metrics', 'train.jsonl']);
  const url = (await printed(sup, /dashboard: (http:\/\/\S+)/))[1];
  const listen = (await printed(sup, /supervisor listening on (127\.0\.0\.1:\d+)/))[1];
  const page = await openPage(url);
  await until('four online nodes and the plan\'s bars', () => page.evaluate(() => {
    const cards = [...document.querySelectorAll('.node')];
    return cards.length === 4 && cards.every((c) => c.dataset.state === 'online') &&
      document.querySelectorAll('.seg.run').length > 0 &&
      document.getElementById('phase').textContent === 'training';
  }));
  // the bars are the plan the console shows
  const plan = execFileSync(bin, ['console', listen, '--exec', 'plan'], { env }).toString();
  const want = [...plan.matchAll(/^\s*(\d+)\s+(\S+)\s+\[(\d+),(\d+)\)/gm)]
    .map((m) => ({ stage: +m[1], node: m[2], begin: +m[3], end: +m[4] }));
  if (!want.length) fail('console printed no plan:\n' + plan);
  const bars = await page.evaluate(() => [...document.querySelectorAll('.seg.run')].map((s) => ({
    stage: +s.dataset.stage, node: s.closest('.node').dataset.node,
    begin: +s.dataset.begin, end: +s.dataset.end })).sort((a, b) => a.stage - b.stage));
  if (JSON.stringify(bars) !== JSON.stringify(want)) {
    fail(`the bars ${JSON.stringify(bars)} are not the console's plan ${JSON.stringify(want)}`);
  }
  console.log('bars equal the console\'s plan:', plan.split('\n').slice(1, 1 + want.length).join(' | '));
  await shot(page, 'dashboard-train.png');

  // the secret, typed once; then kill the node of the last stage from the page
  if (await page.isVisible('.kill-node')) fail('kill buttons show before the secret was given');
  await page.fill('#secret', secret);
  await page.click('#unlock-button');
  await page.waitForSelector('#action-buttons:not(.hidden)');
  const victim = want[want.length - 1].node;
  const layers = Math.max(...want.map((w) => w.end));
  await page.click(`.node[data-node="${victim}"] .kill-node`);
  await page.waitForSelector('#confirm[open]');
  await page.click('#confirm-ok');
  await until(`the failure and the recovery of ${victim} on the timeline`, () => page.evaluate(() =>
    document.querySelector('#timeline li[data-event="failure"]') &&
    document.querySelector('#timeline li[data-event="recovered"]')));
  const moved = await until('the bars to move to the survivors', () => page.evaluate(([v, l]) => {
    const lost = document.querySelector(`.node[data-node="${v}"]`);
    if (!lost || lost.dataset.state !== 'lost' || lost.querySelector('.seg.run')) return false;
    const segs = [...document.querySelectorAll('.seg.run')]
      .map((s) => [+s.dataset.begin, +s.dataset.end]).sort((a, b) => a[0] - b[0]);
    let at = 0;
    for (const [b, e] of segs) { if (b !== at) return false; at = e; }
    return at === l && document.getElementById('phase').textContent === 'training' ? segs : false;
  }, [victim, layers]));
  console.log(`killed ${victim} from the page; the survivors run`, JSON.stringify(moved));
  const said = await page.textContent('#action-result');
  if (!/kill/.test(said)) fail('the page did not report the kill: ' + said);
  await shot(page, 'dashboard-train-recovered.png');

  // stop, from the page: the supervisor ends the job at a flush and exits
  // as a stopped job does (128 + SIGINT, the log naming who stopped it)
  await page.click('button[data-action="stop"]');
  await page.waitForSelector('#confirm[open]');
  await page.click('#confirm-ok');
  const end = await until('the supervisor to exit after stop', () => (sup.done ? sup.exited : null));
  if (end.code !== 130 || !/stopped by the dashboard/.test(read('supervisor', 'err'))) {
    fail(`the supervisor exited ${end.code} after stop: ${read('supervisor', 'err').slice(-1500)}`);
  }
  await page.close();
  for (const n of nodes) if (!n.done) process.kill(-n.pid, 'SIGTERM');
  await Promise.all(nodes.map((n) => n.exited));
}

// ---- 2. a federated page: per-round accuracy and keep fractions fill
async function federated() {
  const fed = start('federate', ['federate', '--clients', '3', '--client-shares', '1,1,0.3',
    '--strategy', 'elfish', '--rounds', '200', '--max-samples', '256', '--test-samples', '500',
    '--dashboard', '127.0.0.1:0', '--metrics', 'fed.jsonl']);
  const url = (await printed(fed, /dashboard: (http:\/\/\S+)/))[1];
  const page = await openPage(url, 390); // a phone's width
  await until('two rounds on the accuracy curve', async () => (await points(page, 'round_accuracy')).length >= 2);
  const keep = await page.evaluate(() => window.Chart.getChart(
    document.querySelector('[data-chart="keep"] canvas')).data.datasets[0].data);
  if (!keep.length || keep.some((k) => !(k > 0 && k <= 1))) fail('keep fractions ' + JSON.stringify(keep));
  await shot(page, 'dashboard-federated.png');
  await page.close();
  process.kill(-fed.pid, 'SIGTERM');
  await fed.exited;
}

// ---- 3. a serving page under requests: requests/s and latency fill
async function serving() {
  const srv = start('serve', ['serve', '--stages', '2', '--listen', '127.0.0.1:0',
    '--dashboard', '127.0.0.1:0', '--metrics', 'serve.jsonl']);
  const base = (await printed(srv, /listening: (http:\/\/\S+)/))[1];
  const url = (await printed(srv, /dashboard: (http:\/\/\S+)/))[1];
  await until('the model to be ready', async () => {
    try { return (await fetch(base + '/v2/models/cnn/ready')).ok; } catch { return false; }
  });
  const meta = await (await fetch(base + '/v2/models/cnn')).json();
  const input = meta.inputs[0];
  const shape = input.shape.map((d) => (d < 0 ? 1 : d));
  const body = JSON.stringify({ inputs: [{ name: input.name, shape, datatype: 'FP32',
    data: new Array(shape.reduce((a, b) => a * b, 1)).fill(0.5) }] });
  let sending = true;
  let answered = 0;
  const load = (async () => {
    while (sending) {
      const r = await fetch(base + '/v2/models/cnn/infer', { method: 'POST', body,
        headers: { 'Content-Type': 'application/json' } });
      if (r.ok) answered++;
      await r.arrayBuffer();
    }
  })();
  const page = await openPage(url);
  await until('requests/s and latency on the serving page', async () =>
    (await points(page, 'rps')).some((p) => p.y > 0) &&
    (await points(page, 'latency', 1)).some((p) => p.y > 0));
  sending = false;
  await load;
  console.log(`serving page filled (${answered} requests answered)`);
  await shot(page, 'dashboard-serve.png');
  await page.close();
  process.kill(-srv.pid, 'SIGTERM');
  await srv.exited;
}

let code = 0;
try {
  browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox',
    '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'] });
  await training();
  await federated();
  await serving();
  if (pageErrors.length) fail('the pages reported errors:\n' + pageErrors.join('\n'));
  console.log('dashboard browser test: ok');
} catch (err) {
  console.error('FAIL:', err.message);
  for (const p of procs) {
    console.error(`--- ${p.name} (stderr, last lines)\n${read(p.name, 'err').split('\n').slice(-25).join('\n')}`);
  }
  code = 1;
} finally {
  if (browser) await browser.close();
  stopAll();
  if (code === 0) fs.rmSync(work, { recursive: true, force: true });
  else console.error('logs kept in', work);
}
process.exit(code);
