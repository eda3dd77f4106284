// Workron dashboard: the charts page (#/charts). Plain JavaScript and SVG
// drawn by hand, no chart library. It reads GET /stats/series, which every
// node computes from its own copy of the job records, so the charts look the
// same whichever node answers, before and after a failover. app.js mounts it
// as pages.charts with the helpers it shares (kit).
'use strict';

window.workronCharts = (view, params, kit) => {
  const { get, h, s, replace, empty } = kit;
  const FETCH_MS = 10000; // the series are asked for again this often
  const SPANS = [['1h', 60, '1m'], ['3h', 180, '1m'], ['6h', 360, '1m'], ['24h', 1440, '5m']];
  const COLORS = ['#2454d6', '#d97706', '#059669', '#c2352b', '#7c3aed', '#0891b2', '#db2777', '#65a30d'];
  const W = 640;
  const H = 170;
  const PAD = { l: 44, r: 8, t: 10, b: 22 };

  const span = SPANS.find(([k]) => k === params.get('span')) || SPANS[1];
  const queue = params.get('queue') || '';
  const setParam = (k, v) => {
    const p = new URLSearchParams(params);
    if (v) p.set(k, v);
    else p.delete(k);
    const q = p.toString();
    location.hash = `#/charts${q ? '?' + q : ''}`;
  };

  const spanSelect = h('select', { id: 'charts-span', dataset: { test: 'charts-span' }, onchange: (e) => setParam('span', e.target.value) },
    SPANS.map(([k]) => h('option', { value: k, selected: k === span[0] }, `Last ${k}`)));
  const queueSelect = h('select', { id: 'charts-queue', dataset: { test: 'charts-queue' }, onchange: (e) => setParam('queue', e.target.value) },
    h('option', { value: '' }, 'All queues'));
  const note = h('div', { id: 'charts-note' });
  const grid = h('div', { class: 'charts-grid', id: 'charts' });
  view.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Charts'), h('div', { class: 'row' }, queueSelect, spanSelect)),
    note, grid,
    h('p', { class: 'muted' }, 'Counted from the job records every node holds: a job deleted by its retention no longer counts. ',
      'Depth is the jobs due and waiting for their first attempt at the end of each step; latency is submit (or run_at) to first start.'),
  );

  let data = null;
  let fetched = 0;
  let queues = [];

  // fmtTime gives hh:mm of a step's start.
  const fmtTime = (t) => new Date(t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  const fmtNum = (v, unit) => {
    if (unit === 'ms') {
      if (v >= 3600e3) return `${(v / 3600e3).toFixed(1)}h`;
      if (v >= 60e3) return `${(v / 60e3).toFixed(1)}m`;
      if (v >= 1e3) return `${(v / 1e3).toFixed(1)}s`;
      return `${v}ms`;
    }
    return v >= 1e4 ? `${Math.round(v / 1e3)}k` : String(v);
  };

  // pathOf is an SVG path through the values; with gaps, a 0 (no sample in
  // the step) breaks the line rather than drawing it down to 0.
  function pathOf(values, x, y, gaps) {
    let d = '';
    let pen = false;
    values.forEach((v, i) => {
      if (gaps && !v) {
        pen = false;
        return;
      }
      d += `${pen ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true;
    });
    return d;
  }

  // chart draws lines, each { name, values, color, gaps }, over the steps.
  function chart(test, title, lines, unit) {
    const n = data.total.done.length;
    const max = Math.max(1, ...lines.flatMap((l) => l.values));
    const x = (i) => PAD.l + (n <= 1 ? 0 : (i * (W - PAD.l - PAD.r)) / (n - 1));
    const y = (v) => PAD.t + (H - PAD.t - PAD.b) * (1 - v / max);
    const from = new Date(data.from).getTime();
    const step = data.step_seconds * 1000;
    const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': title },
      s('line', { x1: PAD.l, y1: y(0), x2: W - PAD.r, y2: y(0), class: 'axis' }),
      s('line', { x1: PAD.l, y1: y(max), x2: W - PAD.r, y2: y(max), class: 'grid' }),
      s('text', { x: PAD.l - 6, y: y(max) + 4, 'text-anchor': 'end', class: 'tick' }, fmtNum(max, unit)),
      s('text', { x: PAD.l - 6, y: y(0) + 4, 'text-anchor': 'end', class: 'tick' }, '0'),
      s('text', { x: PAD.l, y: H - 6, class: 'tick' }, fmtTime(from)),
      s('text', { x: W - PAD.r, y: H - 6, 'text-anchor': 'end', class: 'tick' }, fmtTime(from + (n - 1) * step)),
      lines.map((l) => s('path', {
        d: pathOf(l.values, x, y, l.gaps),
        fill: 'none', stroke: l.color, 'stroke-width': 1.6, 'stroke-linejoin': 'round', 'stroke-linecap': 'round',
        dataset: { series: l.name, total: l.values.reduce((a, b) => a + b, 0), max: Math.max(0, ...l.values) },
      }, s('title', null, l.name))),
      // Lines with gaps mark each sample: a step alone between gaps shows.
      lines.filter((l) => l.gaps).map((l) => l.values.map((v, i) => v && s('circle', { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 2.2, fill: l.color }))));
    return h('div', { class: 'card chart-card', dataset: { test } },
      h('h2', null, title),
      svg,
      h('div', { class: 'legend' }, lines.map((l) => h('span', null, s('svg', { width: 12, height: 4, class: 'swatch' }, s('rect', { width: 12, height: 4, rx: 1, fill: l.color })), l.name))));
  }

  // perQueue gives one line per queue of a field (the total when a single
  // queue was asked for, or when there are none).
  function perQueue(field) {
    const qs = data.queues.length ? data.queues : [{ ...data.total, queue: 'all' }];
    return qs.map((q, i) => ({ name: q.queue, values: q[field], color: COLORS[i % COLORS.length] }));
  }

  const render = () => replace(grid, { data }, () => {
    if (!data) return empty('Loading…');
    if (!data.total.submitted.some((v) => v) && !data.total.depth.some((v) => v) && !data.total.done.some((v) => v)) {
      return empty(`No job activity in the last ${span[0]}.`, 'Jobs submitted, run and finished show here per step.');
    }
    const lat = queue ? data.queues[0] || data.total : data.total;
    return [
      chart('chart-done', `Done per ${data.step_seconds / 60} min`, perQueue('done')),
      chart('chart-failed', `Failed per ${data.step_seconds / 60} min`, perQueue('failed')),
      chart('chart-depth', 'Queue depth', perQueue('depth')),
      chart('chart-latency', 'Submit → start', [
        { name: 'p50', values: lat.latency_p50_ms, color: COLORS[0], gaps: true },
        { name: 'p95', values: lat.latency_p95_ms, color: COLORS[1], gaps: true },
      ], 'ms'),
    ];
  });

  const renderNote = () => replace(note, { d: data && [data.partial, data.complete_from, data.scanned, data.queues_left_out] }, () => {
    if (!data) return null;
    const parts = [];
    if (data.partial) parts.push(`Examined ${data.scanned} jobs, the most one request may: steps before ${data.complete_from ? fmtTime(data.complete_from) : 'the oldest'} miss some jobs.`);
    if (data.queues_left_out) parts.push('More queues than the charts draw: the others count in the totals only; pick a queue to see it.');
    return parts.length ? h('p', { class: 'muted small-note', dataset: { test: 'charts-note' } }, parts.join(' ')) : null;
  });

  const renderQueues = () => replace(queueSelect, { queues, queue }, () => [
    h('option', { value: '' }, 'All queues'),
    [...new Set([...queues, queue].filter(Boolean))].sort().map((q) => h('option', { value: q, selected: q === queue }, q)),
  ]);

  render();
  return {
    refresh: async () => {
      if (data && Date.now() - fetched < FETCH_MS) return;
      const q = new URLSearchParams({ step: span[2], from: new Date(Date.now() - span[1] * 60e3).toISOString() });
      if (queue) q.set('queue', queue);
      data = await get(`stats/series?${q}`);
      fetched = Date.now();
      if (!queue) queues = data.queues.map((x) => x.queue);
      render();
      renderNote();
      renderQueues();
    },
  };
};
