// salamander's dashboard: the live page of a job (served by the job's
// supervisor, apps/dashboard/dashboard.cpp) and the report of a finished run
// (`salamander plot RUN.jsonl -o report.html`, the data embedded in the page).
// No framework; chart.js 3.9.1 from Debian draws the curves.
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const S = {
    session: { actions: false, csrf: '', reads_need_secret: false },
    secret: sessionStorage.getItem('salamander-secret') || '',
    mode: null,
    charts: {},
    seen: new Set(),
    rounds: [],
    state: null,
    report: false,
  };

  // ---- numbers in words
  const pct = (x) => (x === null || x === undefined || x < 0 ? '-' : (100 * x).toFixed(2) + '%');
  const secs = (s) => {
    if (s === null || s === undefined || !isFinite(s)) return '-';
    if (s < 1 && s > 0) return (1000 * s).toFixed(0) + ' ms';
    if (s < 90) return s.toFixed(s < 10 ? 1 : 0) + ' s';
    if (s < 5400) return (s / 60).toFixed(1) + ' min';
    return (s / 3600).toFixed(1) + ' h';
  };
  const bytes = (b) => {
    if (!b) return '-';
    const u = ['B', 'KB', 'MB', 'GB'];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return b.toFixed(i ? 1 : 0) + ' ' + u[i];
  };

  // ---- charts
  const palette = ['#2f6fde', '#d92d20', '#1f9d55', '#d97706', '#7a5af8', '#0e9384', '#c11574'];
  function chartBox(key, title) {
    const box = el('div', 'chart-box');
    box.dataset.chart = key;
    box.appendChild(el('h3', '', title));
    const wrap = el('div');
    wrap.style.position = 'relative';
    wrap.style.height = 'calc(100% - 1.4em)';
    const canvas = el('canvas');
    wrap.appendChild(canvas);
    box.appendChild(wrap);
    $('charts').appendChild(box);
    return canvas;
  }
  function lineChart(key, title, series, xLabel) {
    const chart = new Chart(chartBox(key, title), {
      type: 'line',
      data: { datasets: series.map((s, i) => ({ label: s.label, data: [], borderColor: palette[i],
        backgroundColor: palette[i], pointRadius: s.points ? 2 : 0, borderWidth: 1.5, spanGaps: true })) },
      options: { animation: false, maintainAspectRatio: false, parsing: false, normalized: true,
        scales: { x: { type: 'linear', title: { display: true, text: xLabel || 'seconds' } },
          y: { beginAtZero: true } },
        plugins: { legend: { display: series.length > 1, labels: { boxWidth: 10 } } } },
    });
    S.charts[key] = { chart, series };
    return chart;
  }
  function barChart(key, title, label) {
    const chart = new Chart(chartBox(key, title), {
      type: 'bar',
      data: { labels: [], datasets: [{ label, data: [], backgroundColor: palette[0] }] },
      options: { animation: false, maintainAspectRatio: false,
        scales: { y: { beginAtZero: true } }, plugins: { legend: { display: false } } },
    });
    S.charts[key] = { chart, series: [] };
    return chart;
  }
  function setupCharts(mode) {
    if (S.mode === mode) return;
    S.mode = mode;
    for (const k of Object.keys(S.charts)) S.charts[k].chart.destroy();
    S.charts = {};
    $('charts').textContent = '';
    if (mode === 'train') {
      lineChart('throughput', 'throughput (samples/s)', [{ label: 'samples/s', key: 'samples_per_s' }]);
      lineChart('loss', 'loss', [{ label: 'loss', key: 'loss' }]);
      lineChart('accuracy', 'test accuracy (%)', [{ label: 'accuracy', key: 'accuracy', scale: 100, points: true }]);
    } else if (mode === 'serve') {
      lineChart('rps', 'requests/s', [{ label: 'requests/s', key: 'requests_per_s' }]);
      lineChart('latency', 'latency (ms)', [{ label: 'p50', key: 'p50_ms' }, { label: 'p99', key: 'p99_ms' }]);
      lineChart('queue', 'queue (requests waiting)', [{ label: 'queue', key: 'queue' }]);
    } else if (mode === 'federate') {
      lineChart('round_accuracy', 'test accuracy per round (%)', [{ label: 'accuracy', points: true }], 'round');
      lineChart('pace', 'round time vs pace (s)', [{ label: 'round', points: true }, { label: 'pace' }], 'round');
      barChart('keep', 'last round: kept fraction per client', 'keep');
    } else if (mode === 'split') {
      lineChart('round_accuracy', 'test accuracy per round (%)', [{ label: 'accuracy', points: true }], 'round');
      lineChart('bytes', 'bytes across the cut (MB)', [{ label: 'MB', points: true }], 'round');
      barChart('client_accuracy', 'last round: accuracy per client (%)', 'accuracy');
    }
    const stage = S.charts.stage;
    if (!stage) {
      S.charts.stage = { chart: new Chart($('stage-chart'), {
        type: 'bar',
        data: { labels: [], datasets: ['compute', 'waiting', 'sending'].map((l, i) => ({ label: l, data: [], backgroundColor: palette[i === 0 ? 0 : i === 1 ? 3 : 2] })) },
        options: { animation: false, maintainAspectRatio: false, indexAxis: 'y',
          scales: { x: { stacked: true, title: { display: true, text: 'ms per batch' } }, y: { stacked: true } } },
      }), series: [] };
    }
  }
  function addSample(x) {
    if (!x) return;
    for (const k of Object.keys(S.charts)) {
      const c = S.charts[k];
      let touched = false;
      c.series.forEach((s, i) => {
        if (!s.key || x[s.key] === undefined || x[s.key] === null) return;
        const data = c.chart.data.datasets[i].data;
        const y = x[s.key] * (s.scale || 1);
        const last = data[data.length - 1];
        if (s.points && last && last.y === y) return; // accuracy: a point per evaluation
        data.push({ x: x.t, y });
        touched = true;
      });
      if (touched) c.chart.update('none');
    }
  }
  function addRound(e) {
    S.rounds.push(e);
    const put = (key, i, y) => {
      const c = S.charts[key];
      if (c && y !== undefined && y !== null) c.chart.data.datasets[i].data.push({ x: e.round, y });
    };
    if (e.accuracy !== undefined && e.accuracy >= 0) put('round_accuracy', 0, 100 * e.accuracy);
    put('pace', 0, e.round_s);
    if (S.state && S.state.job && S.state.job.rounds) put('pace', 1, S.state.job.rounds.pace_s);
    if (e.bytes !== undefined) put('bytes', 0, e.bytes / 1048576);
    const keep = S.charts.keep;
    if (keep && Array.isArray(e.contributions)) {
      keep.chart.data.labels = e.contributions.map((c) => 'client ' + c.client);
      keep.chart.data.datasets[0].data = e.contributions.map((c) => c.keep);
    }
    const ca = S.charts.client_accuracy;
    if (ca && Array.isArray(e.client_accuracy)) {
      ca.chart.data.labels = e.client_accuracy.map((_, i) => 'client ' + i);
      ca.chart.data.datasets[0].data = e.client_accuracy.map((a) => (a >= 0 ? 100 * a : null));
    }
    for (const k of Object.keys(S.charts)) S.charts[k].chart.update('none');
  }

  // ---- the state: header, nodes, stages
  function render(state) {
    S.state = state;
    const job = state.job;
    $('banner').classList.toggle('hidden', !(state.stale || (job && job.error)));
    $('banner').textContent = state.stale ? 'not updating: ' + state.stale
      : job && job.error ? 'last failure: ' + job.error : '';
    if (!job) {
      $('phase').textContent = state.waiting ? 'waiting ' + state.waiting : 'waiting';
      return;
    }
    setupCharts(job.mode);
    $('mode').textContent = job.mode + (state.models && state.models.length ? ' · ' + state.models.join(', ') : '') + (job.pipeline && job.pipeline.schedule ? ' · ' + job.pipeline.schedule : '')
      + (job.rounds && job.rounds.strategy ? ' · ' + job.rounds.strategy : '');
    $('phase').textContent = job.phase;
    $('phase').className = 'phase ' + job.phase;
    $('health').textContent = job.health === 'ok' ? '' : job.health;
    $('health').classList.toggle('hidden', job.health === 'ok');
    const p = job.progress;
    const frac = p.total > 0 ? Math.min(1, p.done / p.total) : 0;
    $('progress-bar').style.width = (100 * frac).toFixed(1) + '%';
    $('progress-text').textContent = p.total > 0
      ? `${p.done} of ${p.total} ${p.unit}` + (job.finished ? '' : `, ETA ${secs(p.eta_s)}`)
      : `${p.done} ${p.unit}`;
    $('plan-text').textContent = job.plan ? 'plan: ' + job.plan : '';
    renderNodes(state);
    document.querySelector('.legend').classList.toggle('hidden', !job.stages.length);
    renderStages(job);
  }

  function nodeFacts(n) {
    const parts = [n.role || '', n.address || '', 'cpu ' + n.cpu_share.toFixed(2)];
    if (n.speed > 0) parts.push('speed ' + n.speed.toFixed(2));
    parts.push('mem ' + bytes(n.memory_bytes));
    if (n.link_bytes_per_s > 0) parts.push('link ' + bytes(n.link_bytes_per_s) + '/s');
    parts.push(n.last_heartbeat_s < 0 ? 'no heartbeat yet' : 'heartbeat ' + n.last_heartbeat_s.toFixed(1) + ' s ago');
    if (n.emulation && n.emulation !== 'none') parts.push('EMULATED ' + n.emulation);
    return parts.filter((x) => x).join(' · ');
  }

  function renderNodes(state) {
    const job = state.job;
    const layers = Math.max(1, ...job.stages.map((s) => s.end));
    const box = $('nodes');
    const cards = new Map([...box.children].map((c) => [c.dataset.node, c]));
    for (const n of state.nodes) {
      let card = cards.get(n.name);
      if (!card) {
        card = el('div', 'node');
        card.dataset.node = n.name;
        const head = el('div', 'head');
        head.appendChild(el('span', 'name', n.name));
        head.appendChild(el('span', 'state'));
        card.appendChild(head);
        card.appendChild(el('div', 'facts'));
        card.appendChild(el('div', 'bar'));
        card.appendChild(el('div', 'holds'));
        const buttons = el('div', 'buttons');
        const kill = el('button', 'danger kill-node', 'kill');
        kill.dataset.node = n.name;
        kill.title = 'drill: kill -9 this node\'s process';
        kill.addEventListener('click', () => act('kill', ['node', n.name],
          `Kill node ${n.name}? Its process dies (a drill); the job recovers without it.`));
        buttons.appendChild(kill);
        const crash = el('button', 'danger kill-worker');
        crash.addEventListener('click', () => {
          const w = crash.dataset;
          act('kill', [w.kind, w.index], `Crash ${w.kind} ${w.index} on ${n.name}? (a drill)`);
        });
        buttons.appendChild(crash);
        card.appendChild(buttons);
        box.appendChild(card);
      }
      cards.delete(n.name);
      card.className = 'node ' + n.state;
      card.dataset.state = n.state;
      const st = card.querySelector('.state');
      st.textContent = n.state;
      st.className = 'state ' + n.state;
      card.querySelector('.facts').textContent = nodeFacts(n);
      const bar = card.querySelector('.bar');
      bar.textContent = '';
      const holds = [];
      for (const l of n.layers) {
        const seg = el('div', 'seg run');
        seg.dataset.stage = l.stage;
        seg.dataset.begin = l.begin;
        seg.dataset.end = l.end;
        seg.style.left = (100 * l.begin / layers) + '%';
        seg.style.width = (100 * (l.end - l.begin) / layers) + '%';
        seg.title = `stage ${l.stage}: layers [${l.begin},${l.end})`;
        bar.appendChild(seg);
        holds.push(`stage ${l.stage} [${l.begin},${l.end})`);
      }
      for (const r of n.replicas) {
        const seg = el('div', 'seg replica');
        seg.dataset.replicaOf = r.stage;
        seg.style.left = (100 * r.begin / layers) + '%';
        seg.style.width = (100 * (r.end - r.begin) / layers) + '%';
        seg.title = `chain replica of stage ${r.stage}: layers [${r.begin},${r.end})`;
        bar.appendChild(seg);
        holds.push(`replica of stage ${r.stage}`);
      }
      if (n.clients.length) holds.push('client ' + n.clients.join(', '));
      bar.classList.toggle('hidden', !job.stages.length);
      card.querySelector('.holds').textContent = holds.length ? holds.join('; ') : 'holds nothing of the plan';
      const locked = !S.unlocked || n.state === 'lost' || S.report;
      card.querySelector('.kill-node').classList.toggle('hidden', locked);
      // the worker it runs: a stage (training, serving) or a client (rounds)
      const crash = card.querySelector('.kill-worker');
      const worker = n.layers.length ? ['stage', n.layers[0].stage]
        : n.clients.length ? ['client', n.clients[0]] : null;
      crash.classList.toggle('hidden', locked || !worker || job.mode === 'serve');
      if (worker) {
        crash.dataset.kind = worker[0];
        crash.dataset.index = worker[1];
        crash.textContent = `crash ${worker[0]} ${worker[1]}`;
      }
    }
    for (const gone of cards.values()) gone.remove();
    const pick = $('slow-node');
    const names = state.nodes.filter((n) => n.state !== 'lost').map((n) => n.name);
    if ([...pick.options].map((o) => o.value).join() !== names.join()) {
      const chosen = pick.value;
      pick.textContent = '';
      for (const name of names) {
        const o = el('option', '', name);
        o.value = name;
        pick.appendChild(o);
      }
      if (names.includes(chosen)) pick.value = chosen;
    }
  }

  function renderStages(job) {
    const c = S.charts.stage;
    if (!c) return;
    const rows = job.pipeline ? job.pipeline.stage_time : [];
    $('stages-section').classList.toggle('hidden', !job.stages.length);
    c.chart.data.labels = rows.map((r) => {
      const s = job.stages.find((x) => x.index === r.stage);
      return 'stage ' + r.stage + (s ? ' · ' + s.node : '');
    });
    c.chart.data.datasets[0].data = rows.map((r) => 1e3 * r.compute_s);
    c.chart.data.datasets[1].data = rows.map((r) => 1e3 * r.wait_s);
    c.chart.data.datasets[2].data = rows.map((r) => 1e3 * r.send_s);
    c.chart.update('none');
  }

  // ---- the timeline
  const quiet = new Set(['peer', 'profile', 'link', 'batch', 'round_start', 'serve']);
  function describe(e) {
    const f = (k) => (e[k] === undefined ? '' : e[k]);
    switch (e.event) {
      case 'failure': return 'failure: ' + (f('what') || f('node') || 'a worker died');
      case 'recovered': return `recovered in ${secs(e.recovery_s)}` + (e.plan ? ': ' + e.plan : '');
      case 'resumed': return `resumed in ${secs(e.resume_s)}` + (e.plan ? ': ' + e.plan : '');
      case 'replan': return 're-plan' + (e.reason ? ' (' + e.reason + ')' : '') +
        (e.pause_s !== undefined ? `, paused ${secs(e.pause_s)}` : '') + (e.plan ? ': ' + e.plan : '');
      case 'plan': return 'plan v' + f('plan_version') + ': ' + f('plan');
      case 'join': return 'join: ' + f('node');
      case 'checkpoint': return 'checkpoint ' + f('path');
      case 'round': return `round ${e.round}: accuracy ${pct(e.accuracy)}, ${secs(e.round_s)}`;
      case 'eval': return 'evaluation: accuracy ' + pct(e.accuracy);
      case 'end': return 'end' + (e.why ? ': ' + e.why : e.phase ? ': ' + e.phase : '');
      case 'stop': return 'stop: ' + f('why');
      case 'evaluated': return 'evaluated: accuracy ' + pct(e.accuracy) + (e.epoch ? ', epoch ' + e.epoch : '');
      case 'planned': return 'planned: predicted ' + Math.round(e.predicted_samples_per_s || 0) + ' samples/s' +
        (e.data_parallel ? ' (data parallel)' : '');
      default: {
        const show = (v) => (typeof v === 'object' ? JSON.stringify(v).slice(0, 60)
          : typeof v === 'number' && !Number.isInteger(v) ? v.toPrecision(4) : v);
        const rest = Object.keys(e).filter((k) => !['seq', 't', 'unix_ms', 'event'].includes(k))
          .slice(0, 4).map((k) => `${k} ${show(e[k])}`);
        return e.event + (rest.length ? ': ' + rest.join(', ') : '');
      }
    }
  }
  function addEvents(list) {
    const ol = $('timeline');
    for (const e of list) {
      const key = e.seq !== undefined ? 's' + e.seq : 't' + e.t + e.event;
      if (S.seen.has(key)) continue;
      S.seen.add(key);
      if (e.event === 'round') addRound(e);
      if (quiet.has(e.event)) continue;
      const li = el('li', e.event);
      li.dataset.event = e.event;
      li.appendChild(el('span', 'when', secs(e.t)));
      li.appendChild(el('span', 'what', describe(e)));
      ol.insertBefore(li, ol.firstChild);
    }
  }

  // ---- actions
  function confirmThen(text, then) {
    const d = $('confirm');
    $('confirm-text').textContent = text;
    const ok = $('confirm-ok');
    const cancel = $('confirm-cancel');
    const close = () => { ok.onclick = null; cancel.onclick = null; d.close(); };
    ok.onclick = () => { close(); then(); };
    cancel.onclick = close;
    d.showModal();
  }
  function say(text, isError) {
    $('action-result').textContent = text;
    $('action-result').classList.toggle('error', !!isError);
  }
  function act(name, args, question) {
    confirmThen(question || `${name} ${args.join(' ')}?`, async () => {
      say(`${name}: sent…`);
      try {
        const r = await fetch('api/actions/' + name, {
          method: 'POST', credentials: 'same-origin',
          headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + S.secret,
            'X-Salamander-Token': S.session.csrf },
          body: JSON.stringify({ args }),
        });
        const body = await r.json().catch(() => ({}));
        if (r.ok) say(`${name}: ${body.answer}`);
        else say(`${name}: ${body.error || 'HTTP ' + r.status}`, true);
        if (r.status === 403 && /secret does not match/.test(body.error || '')) {
          relock('The secret was refused: enter it again.');
        }
      } catch (err) { say(`${name}: ${err}`, true); }
    });
  }
  // The secret kept for this tab no longer works (wrong, or the server lost
  // its session): forget it and ask again.
  function relock(why) {
    S.unlocked = false;
    S.secret = '';
    sessionStorage.removeItem('salamander-secret');
    $('unlock').classList.remove('hidden');
    $('action-buttons').classList.add('hidden');
    $('actions-note').textContent = why;
    if (S.state && S.state.job) renderNodes(S.state);
  }
  function unlocked() {
    S.unlocked = true;
    $('unlock').classList.add('hidden');
    $('action-buttons').classList.remove('hidden');
    $('actions-note').textContent = 'Unlocked for this tab. Each action asks before it is sent.';
    if (S.state) renderNodes(S.state);
  }
  function setupActions() {
    if (S.report) { $('actions-section').classList.add('hidden'); return; }
    if (!S.session.actions) {
      $('actions-note').textContent = 'Read-only: this cluster has no secret, so the dashboard takes no actions.';
      $('unlock').classList.add('hidden');
    } else if (S.secret) {
      unlocked();
    }
    for (const b of document.querySelectorAll('#action-buttons button[data-action]')) {
      b.addEventListener('click', () => {
        const name = b.dataset.action;
        let args = [];
        if (name === 'repartition' && $('balance').value.trim()) args = [$('balance').value.trim()];
        if (name === 'slow') {
          const f = $('slow-factor').value.trim();
          if (!$('slow-node').value || !f) { say('slow: pick a node and give a factor (0 < f <= 1)', true); return; }
          args = ['node', $('slow-node').value, f];
        }
        if (name === 'cut') {
          const s = $('cut-seconds').value.trim();
          if (!$('slow-node').value || !s) { say('cut: pick a node and give seconds (0 < s <= 600)', true); return; }
          args = ['node', $('slow-node').value, s];
        }
        if (name === 'checkpoint') {
          const path = $('checkpoint-path').value.trim();
          if (!path) { say('checkpoint: give a path under the run\'s directory', true); return; }
          args = [path];
        }
        act(name, args);
      });
    }
  }
  $('unlock').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const secret = $('secret').value;
    if (!secret) return;
    // checked at once (and, beyond loopback, a session for the reads)
    const r = await fetch('api/login', { method: 'POST', credentials: 'same-origin',
      headers: { Authorization: 'Bearer ' + secret } });
    if (!r.ok) { say('the secret was refused', true); return; }
    S.secret = secret;
    sessionStorage.setItem('salamander-secret', secret);
    $('secret').value = '';
    unlocked();
    if (!S.live) start();
  });

  // ---- live, from the job's supervisor
  async function getJSON(path) {
    const r = await fetch(path, { credentials: 'same-origin', cache: 'no-store' });
    if (r.status === 401) throw Object.assign(new Error('the secret is needed'), { login: true });
    if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
    return r.json();
  }
  async function start() {
    try {
      const state = await getJSON('api/state');
      S.live = true;
      render(state);
      const history = await getJSON('api/history');
      for (const x of history.samples) addSample(x);
      const ev = await getJSON('api/events?since=0');
      addEvents(ev.events);
      S.next = ev.next;
    } catch (err) {
      if (err.login) {
        $('actions-note').textContent = 'This dashboard listens beyond loopback: enter the cluster secret to see the job.';
        return;
      }
      $('banner').textContent = String(err);
      $('banner').classList.remove('hidden');
    }
    const stream = new EventSource('api/stream?since=' + (S.next || 0));
    stream.addEventListener('state', (m) => {
      const state = JSON.parse(m.data);
      render(state);
      addSample(state.sample);
    });
    stream.addEventListener('events', (m) => addEvents(JSON.parse(m.data)));
    stream.onerror = async () => {
      if (S.state && S.state.job && S.state.job.finished) {
        stream.close();
        return;
      }
      // the browser retries by itself; say why nothing moves meanwhile
      const r = await fetch('api/state', { credentials: 'same-origin', cache: 'no-store' })
        .catch(() => null);
      if (r && r.status === 401) {
        stream.close();
        S.live = false; // the unlock starts it again
        relock('The session ended: enter the cluster secret to see the job again.');
        return;
      }
      $('banner').textContent = 'disconnected: the supervisor does not answer (the job ended, ' +
        'or its process is gone); retrying';
      $('banner').classList.remove('hidden');
    };
  }

  // ---- a report: the data embedded in the page
  function fromReport(data) {
    S.report = true;
    document.title = 'salamander report: ' + (data.title || '');
    if (data.state) render(data.state);
    else setupCharts(data.mode || 'train');
    for (const x of data.samples || []) addSample(x);
    addEvents(data.events || []);
    setupActions();
  }

  const embedded = document.getElementById('report-data');
  if (embedded) {
    fromReport(JSON.parse(embedded.textContent));
  } else {
    getJSON('api/session').then((s) => { S.session = s; setupActions(); start(); })
      .catch((err) => { $('banner').textContent = String(err); $('banner').classList.remove('hidden'); });
  }
})();
