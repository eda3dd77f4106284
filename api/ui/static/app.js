// Workron dashboard. Plain JavaScript, no framework and no build step: hash
// routes (#/jobs, #/jobs/ID, #/queues, #/charts, #/workers, #/schedules, #/cluster),
// one fetch helper for the node's JSON API, and small DOM builders. Every
// page has a refresh() that the timer calls every 2 s unless paused.
'use strict';

(() => {
  const REFRESH_MS = 2000;
  const PAGE_SIZES = [25, 50, 100];
  const DEPENDENTS_SCAN = 200; // newest jobs searched for a job's dependents
  // SCAN_REQUESTS bounds the requests one refresh of the jobs list makes
  // for a page the server's scan budget cuts short, and COUNT_REQUESTS
  // those for the counts of a filter: past them the page says how far it
  // got and Older › goes on, the counts show "N+".
  const SCAN_REQUESTS = 5;
  const COUNT_REQUESTS = 2;
  const COUNT_EVERY_MS = 10000; // a filter's counts are asked for again this often
  const MAX_PARENTS = 12; // parents fetched for the dependency graph
  const STEPS_PAGE = 100; // steps a page of a long journal shows (GET /jobs/{id}/steps)
  const TOKEN_KEY = 'workron.token';
  const PAUSED_KEY = 'workron.refreshPaused';
  const STATUSES = ['blocked', 'scheduled', 'pending', 'running', 'cancelling', 'done', 'failed', 'cancelled'];
  const CANCELLABLE = new Set(['blocked', 'scheduled', 'pending', 'running']);
  const RETRYABLE = new Set(['failed', 'cancelled']);
  const API_BASE = new URL('../', document.baseURI); // the page is /ui/, the API is /
  const API_ROOT = API_BASE.href.replace(/\/$/, ''); // for hints people copy

  // ---- DOM helpers -------------------------------------------------------

  const $ = (sel, root = document) => root.querySelector(sel);

  // h builds an element. attrs: class, dataset (object), on* handlers,
  // boolean attributes (true/false), anything else as an attribute.
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    appendAll(el, children);
    return el;
  }

  // s builds an SVG element the same way.
  function s(tag, attrs, ...children) {
    const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    setAttrs(el, attrs);
    appendAll(el, children);
    return el;
  }

  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }

  function appendAll(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : String(c));
    }
  }

  // replace swaps a container's content, unless the data it was built from
  // did not change: then the DOM (and any text the user selected) stays.
  const rendered = new WeakMap(); // container -> JSON of the data it shows

  function replace(container, data, build) {
    const key = JSON.stringify(data);
    if (rendered.get(container) === key) return;
    rendered.set(container, key);
    container.replaceChildren(...[build()].flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  }

  // ---- formatting --------------------------------------------------------

  function isZeroTime(t) {
    return !t || t.startsWith('0001-01-01');
  }

  function duration(ms) {
    const neg = ms < 0;
    ms = Math.abs(ms);
    let out;
    if (ms < 1000) out = `${Math.round(ms)}ms`;
    else if (ms < 60e3) out = `${(ms / 1000).toFixed(ms < 10e3 && ms % 1000 ? 1 : 0)}s`;
    else if (ms < 3600e3) out = `${Math.floor(ms / 60e3)}m ${Math.floor((ms % 60e3) / 1000)}s`;
    else if (ms < 86400e3) out = `${Math.floor(ms / 3600e3)}h ${Math.floor((ms % 3600e3) / 60e3)}m`;
    else out = `${Math.floor(ms / 86400e3)}d ${Math.floor((ms % 86400e3) / 3600e3)}h`;
    return neg ? '-' + out : out;
  }

  function relative(t) {
    let ms = Date.now() - new Date(t).getTime();
    if (Math.abs(ms) < 1000) return 'just now';
    if (Math.abs(ms) < 60e3) ms = Math.round(ms / 1000) * 1000; // "3s ago", not "3.2s ago"
    return ms > 0 ? `${duration(ms)} ago` : `in ${duration(-ms)}`;
  }

  // when renders a timestamp as "3s ago" with the exact time on hover; the
  // text is kept current by updateTimes.
  function when(t) {
    if (isZeroTime(t)) return h('span', { class: 'muted' }, '—');
    return h('time', { datetime: t, title: new Date(t).toLocaleString() }, relative(t));
  }

  function updateTimes() {
    for (const el of document.querySelectorAll('time[datetime]')) {
      el.textContent = relative(el.getAttribute('datetime'));
    }
  }

  function mib(n) {
    if (!n) return '—';
    return n >= 1024 ? `${(n / 1024).toFixed(n % 1024 ? 1 : 0)} GiB` : `${n} MiB`;
  }

  function badge(status, test = 'status') {
    return h('span', { class: `badge st-${status}`, dataset: { test } }, status);
  }

  function jobTitle(j) {
    if (j.command) return j.command;
    if (!j.type) return '—';
    const payload = j.payload ? ' ' + JSON.stringify(j.payload) : '';
    return `${j.type}${payload}`;
  }

  // head builds a table header; labels starting with '#' or listed in nums
  // are right-aligned like their numbers.
  function head(labels, nums = []) {
    return h('thead', null, h('tr', null, labels.map((c) => h('th', { class: nums.includes(c) ? 'num' : null }, c))));
  }

  function empty(text, hint) {
    return h('div', { class: 'empty', dataset: { test: 'empty' } }, h('p', null, text), hint && h('p', { class: 'muted' }, hint));
  }

  function jobLink(id) {
    return h('a', { href: `#/jobs/${encodeURIComponent(id)}`, class: 'mono' }, id);
  }

  // ---- API ----------------------------------------------------------------

  class APIError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  // Set when a consistent read fails (no leader, or the node is behind)
  // and reads fall back to ?stale=1.
  let staleReads = false;

  // call sends one request; payload, when given, goes as JSON.
  async function call(method, path, payload) {
    const headers = { Accept: 'application/json' };
    const token = localStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    const init = { method, headers, cache: 'no-store' };
    if (payload !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(payload);
    }
    let res;
    try {
      res = await fetch(new URL(path, API_BASE), init);
    } catch (err) {
      throw new APIError(0, 'unreachable', `cannot reach the node (${err.message})`);
    }
    const text = await res.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      // not JSON: the status line has to do
    }
    if (!res.ok) {
      if (res.status === 401) askForToken();
      const msg = (body && body.error) || `${res.status} ${res.statusText}`.trim();
      throw new APIError(res.status, (body && body.code) || `http_${res.status}`, msg);
    }
    return body;
  }

  // get makes a consistent read; when the node cannot (no leader, or it
  // is behind) it reads this node's own, possibly stale, state rather
  // than showing nothing.
  async function get(path) {
    try {
      const body = await call('GET', path);
      staleReads = false;
      return body;
    } catch (err) {
      if (!(err instanceof APIError) || (err.code !== 'no_leader' && err.code !== 'catching_up')) throw err;
      staleReads = true;
      return call('GET', path + (path.includes('?') ? '&' : '?') + 'stale=1');
    }
  }

  const post = (path, body) => call('POST', path, body);

  // LIST_BOUND bounds what a page loads of a list the server pages by name
  // or id (GET /workers, /queues, /schedules).
  const LIST_BOUND = 5000;

  // getAll reads such a list (key: its field in the reply) a page of 1000
  // at a time, following next_cursor up to LIST_BOUND items; more says
  // whether the list goes on past them.
  async function getAll(path, key) {
    const items = [];
    let cursor = '';
    for (;;) {
      const q = new URLSearchParams({ limit: '1000' });
      if (cursor) q.set('cursor', cursor);
      const page = await get(`${path}?${q}`);
      items.push(...(page[key] || []));
      const next = page.next_cursor || '';
      if (!next || next === cursor) return { items, more: false };
      if (items.length >= LIST_BOUND) return { items, more: true };
      cursor = next;
    }
  }

  // moreNote says that a list shows its first items only, and where the
  // rest are.
  function moreNote(more, what, verb) {
    return more && h('p', { class: 'muted small-note', dataset: { test: 'list-more' } },
      `Showing the first ${LIST_BOUND} ${what}s; ${verb} --limit and --cursor list the rest.`);
  }

  // ---- forms ----------------------------------------------------------------

  // An InputError is a form field the page could not read; the server
  // checks everything else and its 400 names the field the same way.
  class InputError extends APIError {
    constructor(field, msg) {
      super(0, 'invalid', `${field}: ${msg}`);
    }
  }

  // field builds a labelled input. kind: text, textarea or select.
  function field(label, name, { kind = 'text', value = '', placeholder = '', options = [], hint, readonly } = {}) {
    let input;
    if (kind === 'textarea') input = h('textarea', { name, rows: 3, placeholder, spellcheck: 'false' }, value);
    else if (kind === 'select') input = h('select', { name }, options.map(([v, text]) => h('option', { value: v, selected: v === value }, text)));
    else input = h('input', { name, type: 'text', value, placeholder, spellcheck: 'false', readonly, autocomplete: 'off' });
    return h('label', { class: 'field' }, h('span', { class: 'field-label' }, label), input, hint && h('span', { class: 'muted small-note' }, hint));
  }

  const text = (f, name) => (f.elements[name] ? f.elements[name].value.trim() : '');

  function pairsFrom(value, name) {
    const out = {};
    for (const line of value.split('\n')) {
      const l = line.trim();
      if (!l) continue;
      const i = l.indexOf('=');
      if (i <= 0) throw new InputError(name, `"${l}" is not NAME=value`);
      out[l.slice(0, i)] = l.slice(i + 1);
    }
    return Object.keys(out).length ? out : undefined;
  }

  function intFrom(value, name) {
    if (!value) return undefined;
    const n = Number(value);
    if (!Number.isInteger(n)) throw new InputError(name, `"${value}" is not a whole number`);
    return n;
  }

  function jsonFrom(value, name) {
    if (!value) return undefined;
    try {
      return JSON.parse(value);
    } catch (err) {
      throw new InputError(name, `not JSON (${err.message})`);
    }
  }

  // JOB_FIELDS are the job fields the forms edit (POST /jobs's names).
  const JOB_FIELDS = ['command', 'type', 'payload', 'queue', 'priority', 'max_attempts', 'timeout', 'depends_on', 'env', 'metadata', 'idempotency_key'];

  // jobFields builds the inputs of a job, filled from job (a schedule's
  // template when editing it).
  function jobFields(job = {}, { deps = true } = {}) {
    const lines = (o) => Object.entries(o || {}).map(([k, v]) => `${k}=${v}`).join('\n');
    return [
      field('Command', 'command', { value: job.command || '', placeholder: './backup.sh --full', hint: 'run by sh -c on a worker; or give a type' }),
      h('div', { class: 'field-row' },
        field('Type', 'type', { value: job.type || '', placeholder: 'email.send' }),
        field('Payload (JSON)', 'payload', { value: job.payload ? JSON.stringify(job.payload) : '', placeholder: '{"to":"a@b.c"}' })),
      h('div', { class: 'field-row' },
        field('Queue', 'queue', { value: job.queue || '', placeholder: 'default' }),
        field('Priority', 'priority', { value: job.priority ? String(job.priority) : '', placeholder: '0' }),
        field('Max attempts', 'max_attempts', { value: job.max_attempts ? String(job.max_attempts) : '', placeholder: '3' }),
        field('Timeout', 'timeout', { value: job.timeout || '', placeholder: '10m' })),
      deps && field('Depends on', 'depends_on', { placeholder: 'job-1 job-2' }),
      h('div', { class: 'field-row' },
        field('Environment', 'env', { kind: 'textarea', value: lines(job.env), placeholder: 'NAME=value, one per line' }),
        field('Metadata', 'metadata', { kind: 'textarea', value: lines(job.metadata), placeholder: 'key=value, one per line' })),
      deps && field('Idempotency key', 'idempotency_key', { placeholder: 'optional: a retry with the same key makes no second job' }),
    ];
  }

  // jobFromForm reads what jobFields built; empty inputs are left out.
  function jobFromForm(f) {
    const deps = text(f, 'depends_on').split(/[\s,]+/).filter(Boolean);
    const job = {
      command: text(f, 'command') || undefined,
      type: text(f, 'type') || undefined,
      payload: jsonFrom(text(f, 'payload'), 'payload'),
      queue: text(f, 'queue') || undefined,
      priority: intFrom(text(f, 'priority'), 'priority'),
      max_attempts: intFrom(text(f, 'max_attempts'), 'max_attempts'),
      timeout: text(f, 'timeout') || undefined,
      depends_on: deps.length ? deps : undefined,
      env: pairsFrom(f.elements.env ? f.elements.env.value : '', 'env'),
      metadata: pairsFrom(f.elements.metadata ? f.elements.metadata.value : '', 'metadata'),
      idempotency_key: text(f, 'idempotency_key') || undefined,
    };
    for (const k of Object.keys(job)) if (job[k] === undefined) delete job[k];
    return job;
  }

  // formCard is a hidden card holding a form; toggle shows and hides it.
  function formCard(title, testName, build, onSubmit) {
    const form = h('form', { class: 'form', dataset: { test: testName } });
    const card = h('section', { class: 'card form-card', hidden: true }, h('h2', null, title), form);
    const fill = (...args) => {
      form.replaceChildren(...[build(...args)].flat(Infinity).filter(Boolean),
        h('div', { class: 'row' }, h('button', { type: 'submit', dataset: { action: 'save' } }, 'Save'),
          h('button', { type: 'button', class: 'ghost', onclick: () => { card.hidden = true; } }, 'Close')));
    };
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      act(async () => {
        await onSubmit(form);
        card.hidden = true;
      });
    });
    return {
      card,
      open(...args) {
        fill(...args);
        card.hidden = false;
        const first = form.querySelector('input:not([readonly]), textarea');
        if (first) first.focus();
      },
    };
  }

  // ---- banner -------------------------------------------------------------

  let refreshError = null; // cleared by the next good refresh
  let actionError = null; // stays until dismissed or the next good action

  function describe(err) {
    if (err instanceof APIError) return `${err.message} (${err.code}${err.status ? ', HTTP ' + err.status : ''})`;
    return String(err && err.message ? err.message : err);
  }

  function showBanner() {
    const banner = $('#banner');
    const err = actionError || refreshError;
    let text = err ? describe(err) : '';
    if (!err && staleReads) text = 'This node cannot read consistently now (no leader, or it is behind): showing its local state, which may be stale.';
    banner.hidden = !text;
    banner.classList.toggle('banner-warn', !err && staleReads);
    banner.dataset.code = err && err.code ? err.code : '';
    $('#banner-text').textContent = text;
  }

  // act runs a button's action, shows its error, and refreshes at once.
  async function act(fn) {
    try {
      await fn();
      actionError = null;
    } catch (err) {
      actionError = err;
    }
    showBanner();
    refreshNow();
  }

  // ---- buttons that ask twice ---------------------------------------------

  // A cancel button arms on the first click and acts on the second within a
  // few seconds. Armed state lives here, so a refresh does not lose it.
  const armed = new Map(); // key -> timer

  function confirmButton({ key, label, confirm, action, cls, data, run }) {
    const isArmed = armed.has(key);
    return h('button', {
      type: 'button',
      class: `${cls || ''}${isArmed ? ' armed' : ''}`,
      dataset: { action, ...data, ...(isArmed ? { armed: '1' } : {}) },
      onclick: (ev) => {
        ev.stopPropagation();
        if (!armed.has(key)) {
          armed.set(key, setTimeout(() => { armed.delete(key); rerender(); }, 4000));
          rerender();
          return;
        }
        clearTimeout(armed.get(key));
        armed.delete(key);
        act(run);
      },
    }, isArmed ? confirm : label);
  }

  function jobButtons(j) {
    const out = [];
    const id = encodeURIComponent(j.id);
    if (CANCELLABLE.has(j.status)) {
      out.push(confirmButton({
        key: `cancel:${j.id}`, label: 'Cancel', confirm: 'Confirm cancel', action: 'cancel', cls: 'danger small',
        data: { jobId: j.id }, run: () => post(`jobs/${id}/cancel`),
      }));
    }
    if (RETRYABLE.has(j.status)) {
      out.push(h('button', {
        type: 'button', class: 'small', dataset: { action: 'retry', jobId: j.id },
        onclick: (ev) => { ev.stopPropagation(); act(() => post(`jobs/${id}/retry`)); },
      }, 'Retry'));
    }
    return out;
  }

  // ---- pages ----------------------------------------------------------------

  // Each page: mount(view, params) builds the static part and returns
  // { refresh, rerender? }. refresh fetches and renders; it may throw.

  const pages = {};

  // Pagination of the jobs list survives re-renders but not a filter change.
  const jobsPaging = { filter: '', stack: [], cursor: '' };

  // A bulk action on the jobs list's filter: asked (the count shown for
  // confirmation), then started (its progress followed until it ends).
  const jobsBulk = { filter: '', ask: null, op: null };
  const BULK_ACTIONS = [
    { action: 'retry', label: 'Retry all', when: (st) => !st || RETRYABLE.has(st) },
    { action: 'cancel', label: 'Cancel all', when: (st) => !st || CANCELLABLE.has(st) },
    { action: 'delete', label: 'Delete all', when: (st) => !st || ['done', 'failed', 'cancelled'].includes(st) },
  ];

  pages.jobs = (view, params) => {
    const status = params.get('status') || '';
    const queue = params.get('queue') || '';
    const expr = params.get('filter') || ''; // the filter language, docs/api.md
    const limit = Math.min(1000, Math.max(1, Math.floor(Number(params.get('limit'))) || PAGE_SIZES[0]));
    const sizes = PAGE_SIZES.includes(limit) ? PAGE_SIZES : [...PAGE_SIZES, limit].sort((a, b) => a - b);
    const filter = JSON.stringify([status, queue, limit, expr]);
    if (jobsPaging.filter !== filter) Object.assign(jobsPaging, { filter, stack: [], cursor: '' });
    const bulkKey = JSON.stringify([status, queue, expr]);
    if (jobsBulk.filter !== bulkKey) Object.assign(jobsBulk, { filter: bulkKey, ask: null, op: null });
    const selector = () => Object.assign({}, status && { status }, queue && { queue }, expr && { filter: expr });

    const setParam = (k, v) => {
      const p = new URLSearchParams(params);
      if (v) p.set(k, v);
      else p.delete(k);
      const q = p.toString();
      location.hash = `#/jobs${q ? '?' + q : ''}`;
    };

    const tabs = h('div', { class: 'tabs', id: 'status-tabs' });
    const queueSelect = h('select', { id: 'filter-queue', dataset: { test: 'filter-queue' }, onchange: (e) => setParam('queue', e.target.value) },
      h('option', { value: '' }, 'All queues'));
    const sizeSelect = h('select', { id: 'filter-limit', onchange: (e) => setParam('limit', e.target.value === String(PAGE_SIZES[0]) ? '' : e.target.value) },
      sizes.map((n) => h('option', { value: n, selected: n === limit }, `${n} per page`)));
    const search = h('input', { id: 'job-search', type: 'search', placeholder: 'Job id, e.g. job-42', spellcheck: 'false', dataset: { test: 'job-search' } });
    const searchForm = h('form', {
      class: 'search', onsubmit: (e) => {
        e.preventDefault();
        const id = search.value.trim();
        if (id) location.hash = `#/jobs/${encodeURIComponent(id)}`;
      },
    }, search, h('button', { type: 'submit' }, 'Open'));
    const filterInput = h('input', {
      id: 'job-filter', type: 'search', value: expr, spellcheck: 'false', dataset: { test: 'job-filter' },
      placeholder: 'Filter, e.g. status == "failed" and last_error contains "timeout" and created_at > now-1h',
    });
    const filterForm = h('form', { class: 'search filter-box', onsubmit: (e) => { e.preventDefault(); setParam('filter', filterInput.value.trim()); } },
      filterInput,
      h('button', { type: 'submit', dataset: { action: 'apply-filter' } }, 'Filter'),
      expr && h('button', { type: 'button', class: 'ghost', dataset: { action: 'clear-filter' }, onclick: () => setParam('filter', '') }, 'Clear'));
    const scanNote = h('div', { id: 'scan-note' });
    const table = h('div', { id: 'jobs-table' });
    const pager = h('div', { class: 'pager', id: 'jobs-pager' });
    const bulkBar = h('div', { class: 'toolbar bulk', id: 'bulk-bar', dataset: { test: 'bulk-bar' } });

    const submitForm = formCard('New job', 'submit-form', () => jobFields(), async (f) => {
      const job = await post('jobs', jobFromForm(f));
      location.hash = `#/jobs/${encodeURIComponent(job.id)}`;
    });
    const newJob = h('button', { type: 'button', dataset: { action: 'new-job' }, onclick: () => submitForm.open() }, 'New job');

    view.append(
      h('div', { class: 'page-head' }, h('h1', null, 'Jobs'), h('div', { class: 'row' }, searchForm, newJob)),
      submitForm.card,
      filterForm,
      h('div', { class: 'toolbar' }, tabs, h('div', { class: 'filters' }, queueSelect, sizeSelect)),
      scanNote,
      bulkBar,
      h('div', { class: 'card flush' }, table),
      pager,
    );

    let data = { jobs: [], next: '', queues: [], scanned: 0, partial: false, counts: null };

    const render = () => {
      // Status tabs with counts: the filter's (GET /jobs/count) with one,
      // else summed over the queues in view.
      let counts = {};
      let total = 0;
      let plus = '';
      if (data.counts) {
        for (const st of STATUSES) counts[st] = data.counts.by[st] || 0;
        total = data.counts.total;
        plus = data.counts.exact ? '' : '+';
      } else {
        for (const q of data.queues) {
          if (queue && q.name !== queue) continue;
          for (const [st, n] of Object.entries(q.counts || {})) counts[st] = (counts[st] || 0) + n;
        }
        total = Object.values(counts).reduce((a, b) => a + b, 0);
      }
      const shown = (n) => (n === undefined ? undefined : `${n}${plus}`);
      replace(tabs, { counts, total, plus, status, queue }, () => [
        tab('All', '', shown(total)),
        STATUSES.map((st) => tab(st, st, shown(counts[st]))),
      ]);

      replace(scanNote, { partial: data.partial, scanned: data.scanned, n: data.jobs.length }, () => data.partial &&
        h('p', { class: 'muted small-note', dataset: { test: 'scan-note' } },
          `Examined ${data.scanned.toLocaleString()} jobs and found ${data.jobs.length} so far; Older › looks further.`));

      const names = data.queues.map((q) => q.name);
      if (queue && !names.includes(queue)) names.push(queue);
      replace(queueSelect, { names, queue }, () => [
        h('option', { value: '' }, 'All queues'),
        names.map((n) => h('option', { value: n, selected: n === queue }, n)),
      ]);

      replace(table, { jobs: data.jobs, armed: [...armed.keys()] }, () => {
        if (!data.jobs.length) {
          return empty(status || queue || expr ? 'No jobs match these filters.' : 'No jobs yet.',
            `Submit one: curl -X POST ${API_ROOT}/jobs -d '{"command":"echo hello"}'`);
        }
        return h('table', { class: 'table', dataset: { test: 'jobs' } },
          head(['ID', 'Status', 'Queue', 'Command', 'Attempts', 'Priority', 'Created', 'Worker', ''], ['Attempts', 'Priority']),
          h('tbody', null, data.jobs.map(jobRow)));
      });

      replace(bulkBar, { status, queue, expr, ask: jobsBulk.ask, op: jobsBulk.op }, bulkControls);

      const page = jobsPaging.stack.length + 1;
      replace(pager, { page, next: data.next, n: data.jobs.length }, () => page === 1 && !data.next ? [] : [
        h('button', { type: 'button', class: 'ghost', id: 'page-newest', disabled: page === 1, onclick: () => { Object.assign(jobsPaging, { stack: [], cursor: '' }); refreshNow(); } }, '« Newest'),
        h('button', { type: 'button', class: 'ghost', id: 'page-prev', disabled: page === 1, onclick: () => { jobsPaging.cursor = jobsPaging.stack.pop() || ''; refreshNow(); } }, '‹ Newer'),
        h('span', { class: 'muted', dataset: { test: 'page' } }, `Page ${page}`),
        h('button', { type: 'button', class: 'ghost', id: 'page-next', disabled: !data.next, onclick: () => { jobsPaging.stack.push(jobsPaging.cursor); jobsPaging.cursor = data.next; refreshNow(); } }, 'Older ›'),
      ]);
    };

    // bulkControls: with a filter set, a button per bulk action that fits
    // it; a click counts the matching jobs (dry_run) and asks to confirm
    // that many; the confirmation starts the action, whose progress shows
    // until it ends.
    function bulkControls() {
      if (!status && !queue && !expr) return [];
      const out = [];
      const { ask, op } = jobsBulk;
      if (op) {
        out.push(h('span', { class: 'muted', dataset: { test: 'bulk-progress', state: op.state, done: String(op.done) } },
          `Bulk ${op.action} ${op.id}: ${op.state} · matched ${op.matched} · done ${op.done} · skipped ${op.skipped} · failed ${op.failed}`),
        op.state === 'running' && h('button', { type: 'button', class: 'ghost small', dataset: { action: 'bulk-stop' },
          onclick: () => act(async () => { jobsBulk.op = await post(`bulk/${op.id}/stop`); }) }, 'Stop'));
      } else if (ask) {
        const n = `${ask.exact ? '' : 'at least '}${ask.matched.toLocaleString()}`;
        out.push(h('span', { dataset: { test: 'bulk-confirm-text', count: String(ask.matched) } },
          `${ask.action[0].toUpperCase()}${ask.action.slice(1)} ${n} job${ask.matched === 1 ? '' : 's'} matching this filter?`),
        h('button', { type: 'button', class: 'danger small', dataset: { action: 'bulk-confirm' }, disabled: ask.matched === 0,
          onclick: () => act(async () => { jobsBulk.op = await post('bulk', { ...selector(), action: ask.action }); jobsBulk.ask = null; }) }, `Confirm ${ask.action}`),
        h('button', { type: 'button', class: 'ghost small', dataset: { action: 'bulk-keep' }, onclick: () => { jobsBulk.ask = null; render(); } }, 'Keep'));
      } else {
        for (const b of BULK_ACTIONS.filter((x) => x.when(status))) {
          out.push(h('button', { type: 'button', class: 'small', dataset: { action: `bulk-${b.action}` },
            onclick: () => act(async () => {
              const count = await post('bulk', { ...selector(), action: b.action, dry_run: true });
              jobsBulk.ask = { action: b.action, matched: count.matched, exact: count.exact };
            }) }, `${b.label}…`));
        }
      }
      return out;
    }

    function tab(label, value, count) {
      const p = new URLSearchParams(params);
      if (value) p.set('status', value);
      else p.delete('status');
      const q = p.toString();
      return h('a', { href: `#/jobs${q ? '?' + q : ''}`, class: `tab${value === status ? ' active' : ''}`, dataset: { status: value || 'all' } },
        label, count !== undefined && h('span', { class: 'count' }, count));
    }

    function jobRow(j) {
      return h('tr', { dataset: { jobId: j.id, status: j.status }, class: 'clickable', onclick: (e) => { if (!e.target.closest('a,button')) location.hash = `#/jobs/${encodeURIComponent(j.id)}`; } },
        h('td', null, jobLink(j.id)),
        h('td', null, badge(j.status), j.waiting && h('div', { class: 'muted small-note', title: j.waiting, dataset: { test: 'row-waiting', code: j.waiting_code } }, WAITING_LABELS[j.waiting_code] || j.waiting_code)),
        h('td', null, h('a', { href: `#/jobs?queue=${encodeURIComponent(j.queue)}` }, j.queue)),
        h('td', { class: 'cmd', title: jobTitle(j) }, h('code', null, jobTitle(j))),
        h('td', { class: 'num' }, `${j.attempts} / ${j.max_attempts}`),
        h('td', { class: 'num' }, j.priority),
        h('td', null, when(j.created_at)),
        h('td', { class: 'mono' }, j.worker_id || h('span', { class: 'muted' }, '—')),
        h('td', { class: 'actions' }, jobButtons(j)));
    }

    return {
      async refresh() {
        const q = new URLSearchParams();
        if (status) q.set('status', status);
        if (queue) q.set('queue', queue);
        if (expr) q.set('filter', expr);
        const [list, queues, counts] = await Promise.all([
          listPage(q, jobsPaging.cursor, limit), getAll('queues', 'queues'), expr ? countCached(expr, queue) : null]);
        data = { ...list, queues: queues.items, counts };
        if (jobsBulk.op && jobsBulk.op.state === 'running') jobsBulk.op = await get(`bulk/${jobsBulk.op.id}`);
        render();
      },
      rerender: render,
    };
  };

  // listPage reads a page of limit jobs from cursor (GET /jobs with the
  // query q), asking again from where the server stopped while its scan
  // budget cuts the page short, up to SCAN_REQUESTS requests; partial says
  // the page is still short after them.
  async function listPage(q, cursor, limit) {
    const jobs = [];
    let scanned = 0;
    for (let i = 1; ; i++) {
      const p = new URLSearchParams(q);
      p.set('limit', String(limit - jobs.length));
      if (cursor) p.set('cursor', cursor);
      const page = await get(`jobs?${p}`);
      jobs.push(...(page.jobs || []));
      scanned += page.scanned || 0;
      cursor = page.next_cursor || '';
      const partial = !!page.partial && !!cursor && jobs.length < limit;
      if (!partial || i >= SCAN_REQUESTS) return { jobs, next: cursor, scanned, partial };
    }
  }

  // countCached is countAll's answer for the same filter and queue if it
  // is less than COUNT_EVERY_MS old: a count may examine many jobs, the
  // list refreshes every REFRESH_MS.
  const countCache = { key: '', at: 0, value: null };
  async function countCached(expr, queue) {
    const key = JSON.stringify([expr, queue]);
    if (countCache.key !== key || Date.now() - countCache.at >= COUNT_EVERY_MS) {
      const value = await countAll(expr, queue);
      Object.assign(countCache, { key, at: Date.now(), value });
    }
    return countCache.value;
  }

  // countAll counts the jobs a filter keeps by status (GET /jobs/count),
  // following the count's cursor up to COUNT_REQUESTS requests; exact says
  // whether it got to the end.
  async function countAll(expr, queue) {
    const by = {};
    let total = 0;
    let cursor = '';
    for (let i = 0; i < COUNT_REQUESTS; i++) {
      const p = new URLSearchParams({ filter: expr });
      if (queue) p.set('queue', queue);
      if (cursor) p.set('cursor', cursor);
      const c = await get(`jobs/count?${p}`);
      total += c.count;
      for (const [st, n] of Object.entries(c.by_status || {})) by[st] = (by[st] || 0) + n;
      if (c.exact || !c.next_cursor) return { by, total, exact: true };
      cursor = c.next_cursor;
    }
    return { by, total, exact: false };
  }

  pages.job = (view, params, id) => {
    const head = h('div', { class: 'page-head' });
    const body = h('div', { id: 'job-body' });
    view.append(h('p', { class: 'crumbs' }, h('a', { href: '#/jobs' }, '‹ Jobs')), head, body);
    let data = null;
    // The page of a long journal in view: its cursor, and those of the
    // pages before it (GET /jobs/{id}/steps, in key order).
    const stepsPaging = { stack: [], cursor: '' };
    // The step whose result is shown (GET /jobs/{id}/steps/{key}): its
    // key, and the step read or the error reading it.
    const shown = { key: '', step: null, error: '' };
    const toggleStep = async (key) => {
      if (shown.key === key) {
        Object.assign(shown, { key: '', step: null, error: '' });
        render();
        return;
      }
      Object.assign(shown, { key, step: null, error: '' });
      render();
      try {
        const st = await get(`jobs/${encodeURIComponent(id)}/steps/${encodeURIComponent(key)}`);
        if (shown.key === key) shown.step = st;
      } catch (err) {
        if (shown.key === key) shown.error = describe(err);
      }
      render();
    };

    const render = () => {
      if (!data) return;
      const { job: j, parents, dependents, dependentsComplete, gang, steps } = data;
      replace(head, { id: j.id, status: j.status, armed: [...armed.keys()] }, () => [
        h('h1', null, h('span', { class: 'job-id', dataset: { test: 'job-id' } }, j.id), badge(j.status, 'job-status')),
        h('div', { class: 'actions', dataset: { jobId: j.id } }, jobButtons(j)),
      ]);
      replace(body, { j, parents, dependents, gang, steps, page: stepsPaging.stack.length, shown }, () => [
        h('div', { class: 'grid-2' },
          h('section', { class: 'card' }, h('h2', null, 'Details'), details(j)),
          h('div', { class: 'stack' },
            j.gang_id && h('section', { class: 'card', dataset: { test: 'gang' } },
              h('h2', null, 'Gang ', h('span', { class: 'mono' }, j.gang_id), gang && badge(gang.status, 'gang-status')),
              gangView(gang, j.id)),
            h('section', { class: 'card' }, h('h2', null, 'Dependencies'), graph(j, parents, dependents, dependentsComplete)),
            resultCard(j),
            h('section', { class: 'card' },
              h('h2', null, 'Output', h('span', { class: 'muted small-note' }, ' last 4 KiB of the latest report')),
              j.output ? h('pre', { class: 'output', dataset: { test: 'output' } }, j.output) : empty('No output recorded yet.')))),
        steps && stepsCard(steps, stepsPaging.stack.length + 1, shown, toggleStep, {
          first: () => { Object.assign(stepsPaging, { stack: [], cursor: '' }); refreshNow(); },
          prev: () => { stepsPaging.cursor = stepsPaging.stack.pop() || ''; refreshNow(); },
          next: () => { stepsPaging.stack.push(stepsPaging.cursor); stepsPaging.cursor = steps.next; refreshNow(); },
        }),
        h('section', { class: 'card flush' }, h('h2', { class: 'pad' }, 'Attempts'), attempts(j)),
      ]);
    };

    // loadSteps reads the page of the job's journal in view: the steps
    // GET /jobs/{id} listed when they are all of it, else a page of
    // GET /jobs/{id}/steps. null: the job has recorded no step.
    const loadSteps = async (job) => {
      const jr = job.journal;
      if (!jr) return null;
      if (!jr.truncated && !stepsPaging.cursor) return { steps: jr.steps || [], count: jr.count, bytes: jr.bytes, next: '' };
      const q = new URLSearchParams({ limit: String(STEPS_PAGE) });
      if (stepsPaging.cursor) q.set('cursor', stepsPaging.cursor);
      const p = await get(`jobs/${encodeURIComponent(job.id)}/steps?${q}`);
      return { steps: p.steps || [], count: p.count, bytes: p.bytes, next: p.next_cursor || '' };
    };

    return {
      async refresh() {
        const enc = encodeURIComponent(id);
        const job = await get(`jobs/${enc}`);
        const parentIDs = (job.depends_on || []).slice(0, MAX_PARENTS);
        const [parents, recent, gang, steps] = await Promise.all([
          Promise.all(parentIDs.map((p) => get(`jobs/${encodeURIComponent(p)}`).catch(() => ({ id: p, status: 'gone' })))),
          get(`jobs?limit=${DEPENDENTS_SCAN}`),
          job.gang_id ? get(`gangs/${encodeURIComponent(job.gang_id)}`).catch(() => null) : null,
          loadSteps(job),
        ]);
        const jobs = recent.jobs || [];
        const dependents = jobs.filter((x) => (x.depends_on || []).includes(job.id));
        // Dependents are submitted after the job; if the job is among the
        // newest, so are all of them.
        const dependentsComplete = !recent.next_cursor || jobs.some((x) => x.id === job.id);
        data = { job, parents, dependents, dependentsComplete, gang, steps };
        render();
      },
      rerender: render,
    };
  };

  function details(j) {
    const rows = [
      ['Queue', h('a', { href: `#/jobs?queue=${encodeURIComponent(j.queue)}` }, j.queue)],
      [j.command ? 'Command' : 'Type', h('code', { class: 'wrap' }, j.command || j.type)],
      j.payload && ['Payload', h('code', { class: 'wrap' }, JSON.stringify(j.payload))],
      ['Priority', j.priority],
      ['Attempts', `${j.attempts} of ${j.max_attempts}`],
      j.progress && ['Progress', progressMeter(j.progress)],
      j.parked && ['Parked', parkedLine(j.parked)],
      j.waiting && ['Waiting', h('span', { dataset: { test: 'waiting', code: j.waiting_code } }, j.waiting)],
      j.worker_id && ['Worker', h('span', { class: 'mono' }, j.worker_id)],
      j.lease && ['Lease', h('span', { class: 'mono' }, `${j.lease}`, j.lease_expires_at && h('span', { class: 'muted' }, ' expires ', when(j.lease_expires_at)))],
      ['Created', when(j.created_at)],
      ['Run at', when(j.run_at)],
      j.started_at && ['Started', when(j.started_at)],
      j.done_at && ['Finished', when(j.done_at)],
      j.timeout && ['Timeout', j.timeout],
      j.exit_code !== undefined && ['Exit code', h('span', { class: 'mono' }, j.exit_code)],
      j.last_error && ['Last error', h('span', { class: 'error-text' }, j.last_error)],
      j.resources && ['Needs', resources(j.resources)],
      j.tags && ['Worker tags', h('span', { class: 'pairs' }, j.tags.map((t) => h('code', null, t)))],
      j.unschedulable && ['Unschedulable', h('span', { class: 'error-text', dataset: { test: 'unschedulable' } }, j.unschedulable)],
      j.gang_id && ['Gang task', `${j.gang_index ?? '?'} of ${j.gang_size} in `, h('span', { class: 'mono' }, j.gang_id)],
      j.idempotency_key && ['Idempotency key', h('span', { class: 'mono' }, j.idempotency_key)],
      j.backoff && ['Backoff', `base ${j.backoff.base || '1s'}, max ${j.backoff.max || '1h'}, jitter ${j.backoff.jitter ?? 0.3}`],
      j.metadata && ['Metadata', pairs(j.metadata)],
      j.env && ['Environment', pairs(j.env)],
      j.expires_at && ['Deleted', when(j.expires_at)],
    ].filter(Boolean);
    return h('dl', { class: 'details' }, rows.map(([k, ...v]) => [h('dt', null, k), h('dd', null, ...v)]));
  }

  function resources(r) {
    const parts = [
      r.vram_mb && `${mib(r.vram_mb)} VRAM`,
      r.memory_mb && `${mib(r.memory_mb)} memory`,
      r.cpu_millis && `${r.cpu_millis / 1000} CPU`,
      r.slots > 1 && `${r.slots} slots`,
    ].filter(Boolean);
    return parts.length ? parts.join(', ') : '—';
  }

  // gangView shows a gang's state and its tasks, the current job marked.
  function gangView(g, current) {
    if (!g) return empty('The gang could not be read.');
    const rows = [
      ['Tasks', `${g.size}, placed and started together`],
      ['Epoch', h('span', { class: 'mono' }, g.epoch), h('span', { class: 'muted' }, ' reservations and drains so far')],
      g.reserved_at && ['Reserved', when(g.reserved_at)],
      g.drain_started_at && ['Draining since', when(g.drain_started_at)],
      g.unschedulable && ['Unschedulable', h('span', { class: 'error-text', dataset: { test: 'gang-unschedulable' } }, g.unschedulable)],
      g.last_error && ['Last error', h('span', { class: 'error-text' }, g.last_error)],
    ].filter(Boolean);
    return [
      h('dl', { class: 'details' }, rows.map(([k, ...v]) => [h('dt', null, k), h('dd', null, ...v)])),
      h('table', { class: 'table', dataset: { test: 'gang-tasks' } },
        head(['#', 'Task', 'Status', 'Worker'], ['#']),
        h('tbody', null, (g.jobs || []).map((t, i) => h('tr', { dataset: { test: 'gang-task', jobId: t.id }, class: t.id === current ? 'current' : null },
          h('td', { class: 'num' }, i),
          h('td', null, t.id === current ? h('span', { class: 'mono' }, t.id) : jobLink(t.id)),
          h('td', null, badge(t.status)),
          h('td', { class: 'mono' }, (g.workers || [])[i] || t.worker_id || '—'))))),
    ];
  }

  function pairs(obj) {
    return h('span', { class: 'pairs' }, Object.entries(obj).sort().map(([k, v]) => h('code', null, `${k}=${v}`)));
  }

  function attempts(j) {
    const rows = (j.attempt_history || []).slice();
    if ((j.status === 'running' || j.status === 'cancelling') && j.attempts > 0) {
      rows.push({ attempt: j.attempts, worker_id: j.worker_id, lease: j.lease, status: j.status, started_at: j.started_at, current: true });
    }
    if (!rows.length) {
      if (j.status === 'failed' || j.status === 'cancelled') {
        return empty(`The job never ran: it was ${j.status} before any attempt.`, j.last_error ? `Why: ${j.last_error}.` : null);
      }
      return empty('No attempts yet.', waitingFor(j));
    }
    rows.sort((a, b) => b.attempt - a.attempt);
    return h('table', { class: 'table', dataset: { test: 'attempts' } },
      head(['#', 'Status', 'Worker', 'Lease', 'Exit', 'Started', 'Took', 'Error'], ['#', 'Exit', 'Took']),
      h('tbody', null, rows.map((a) => h('tr', { dataset: { test: 'attempt-row', attempt: a.attempt } },
        h('td', { class: 'num' }, a.attempt),
        h('td', null, badge(a.status, 'attempt-status')),
        h('td', { class: 'mono' }, a.worker_id || '—'),
        h('td', { class: 'mono muted' }, a.lease || '—'),
        h('td', { class: 'num' }, a.exit_code ?? '—'),
        h('td', null, when(a.started_at)),
        h('td', { class: 'num' }, a.current ? h('span', { class: 'muted' }, 'running') : (isZeroTime(a.started_at) || isZeroTime(a.ended_at) ? '—' : duration(new Date(a.ended_at) - new Date(a.started_at)))),
        h('td', { class: a.status === 'parked' ? 'muted' : 'error-text' }, a.error || '')))));
  }

  // WAITING_LABELS name the API's waiting codes in the jobs table; the
  // row's title and the job page give the server's whole sentence.
  const WAITING_LABELS = {
    dependency: 'waits for dependencies',
    paused: 'queue paused',
    no_worker: 'no worker for its queue',
    resources: 'no worker fits it',
    delay: 'waits for its run time',
    gang: 'gang waits for workers',
    claim: 'waits for its worker',
    limit: 'held by a limit',
    worker: 'ready',
  };

  // waitingFor says why a job that has not run yet waits: the server's
  // reason (waiting), or what its status says when the server gave none.
  function waitingFor(j) {
    if (j.waiting) return `The job waits: ${j.waiting}.`;
    if (j.unschedulable) return `No worker can run it yet: ${j.unschedulable}.`;
    if (j.status === 'blocked') return j.gang_id ? 'The job waits for its gang to be placed on workers.' : 'The job waits for its dependencies.';
    if (j.status === 'scheduled') return `The job waits for its run time (${new Date(j.run_at).toLocaleString()}).`;
    return 'The job waits for a worker.';
  }

  // graph draws parents → job → dependents as boxes linked to their pages.
  function graph(j, parents, dependents, complete) {
    const more = (j.depends_on || []).length - parents.length;
    if (!parents.length && !dependents.length) {
      return empty('No dependencies.', complete ? 'No job depends on this one.' : `No job among the ${DEPENDENTS_SCAN} newest depends on this one.`);
    }
    const W = 172, H = 44, GAP = 56, ROW = 54, TOP = 24, PAD = 2;
    const rows = Math.max(parents.length, dependents.length, 1);
    const body = rows * ROW - (ROW - H);
    const width = 3 * W + 2 * GAP + 2 * PAD;
    const height = TOP + body + 2 * PAD;
    const colX = [PAD, PAD + W + GAP, PAD + 2 * (W + GAP)];
    const yOf = (i, n) => TOP + PAD + (body - (n * ROW - (ROW - H))) / 2 + i * ROW;

    const box = (job, x, y, self) => {
      const label = job.id.length > 20 ? job.id.slice(0, 19) + '…' : job.id;
      const g = s('g', { class: `node st-${job.status}${self ? ' self' : ''}`, dataset: { test: 'graph-node', jobId: job.id } },
        s('rect', { x, y, width: W, height: H, rx: 6 }),
        s('text', { x: x + 12, y: y + 19, class: 'id' }, label),
        s('text', { x: x + 12, y: y + 35, class: 'st' }, job.status));
      return self ? g : s('a', { href: `#/jobs/${encodeURIComponent(job.id)}` }, s('title', null, `${job.id}: ${job.command || job.type || job.status}`), g);
    };
    const edge = (x1, y1, x2, y2) => s('path', { class: 'edge', d: `M${x1},${y1} C${x1 + GAP / 2},${y1} ${x2 - GAP / 2},${y2} ${x2 - 2},${y2}`, 'marker-end': 'url(#arrow)' });
    const label = (text, i) => s('text', { class: 'col', x: colX[i] + W / 2, y: 12, 'text-anchor': 'middle' }, text);

    const selfY = yOf(0, 1);
    const parts = [
      s('defs', null, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto' },
        s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow' }))),
      parents.length && label('depends on', 0), label('this job', 1), dependents.length && label('dependents', 2),
    ];
    parents.forEach((p, i) => {
      const y = yOf(i, parents.length);
      parts.push(edge(colX[0] + W, y + H / 2, colX[1], selfY + H / 2), box(p, colX[0], y));
    });
    dependents.forEach((d, i) => {
      const y = yOf(i, dependents.length);
      parts.push(edge(colX[1] + W, selfY + H / 2, colX[2], y + H / 2), box(d, colX[2], y));
    });
    parts.push(box(j, colX[1], selfY, true));
    return [
      s('svg', { class: 'graph', viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'dependency graph', dataset: { test: 'graph' } }, parts),
      more > 0 && h('p', { class: 'muted' }, `and ${more} more dependencies not drawn`),
      !complete && h('p', { class: 'muted' }, `Dependents are looked up among the ${DEPENDENTS_SCAN} newest jobs.`),
    ];
  }

  // LIMIT_FIELDS are PUT /queues/{name}'s fields, as the limits form
  // edits them: [name, label, placeholder, whole number?].
  const LIMIT_FIELDS = [
    ['concurrency', 'Concurrency', 'running at most, in all', true],
    ['key_concurrency', 'Per-key concurrency', 'running at most, per key', true],
    ['rate', 'Rate', '100/s, 600/m or 1000/h', false],
    ['burst', 'Burst', 'defaults to the rate\'s count', true],
    ['key_rate', 'Per-key rate', '10/s', false],
    ['key_burst', 'Per-key burst', 'defaults to the rate\'s count', true],
    ['max_pause', 'Max pause', 'longest pause a rate limit sets; 5m', false],
  ];
  // HELD_LABELS name the limits of a queue's "waiting" counts.
  const HELD_LABELS = {
    concurrency: 'queue concurrency', rate: 'queue rate', paused: 'queue paused by its work',
    key_concurrency: 'key concurrency', key_rate: 'key rate', key_paused: 'key paused by its work',
  };

  // limitsSummary says a queue's limits and what runs against them.
  function limitsSummary(l) {
    if (!l) return h('span', { class: 'muted', dataset: { test: 'limits' } }, 'none');
    const parts = [
      l.concurrency && h('span', { class: 'chip', dataset: { limit: 'concurrency' } }, `${l.running} / ${l.concurrency} running`),
      l.key_concurrency && h('span', { class: 'chip', dataset: { limit: 'key_concurrency' } }, `${l.key_concurrency} per key`, l.keys_at_limit ? ` (${l.keys_at_limit} at it)` : ''),
      l.rate && h('span', { class: 'chip', dataset: { limit: 'rate' } }, `${l.rate}`, l.burst ? ` burst ${l.burst}` : '',
        l.rate_limited_until ? [' until ', when(l.rate_limited_until)] : ''),
      l.key_rate && h('span', { class: 'chip', dataset: { limit: 'key_rate' } }, `${l.key_rate} per key`, l.key_burst ? ` burst ${l.key_burst}` : '',
        l.keys_rate_limited ? ` (${l.keys_rate_limited} waiting)` : ''),
      l.rate_limit_pauses_queue && h('span', { class: 'chip', dataset: { limit: 'rate_limit_pauses_queue' },
        title: 'A rate-limited job without a concurrency key pauses the whole queue.' }, 'rate limits pause the queue'),
      l.max_pause && h('span', { class: 'chip', dataset: { limit: 'max_pause' } }, `pauses at most ${l.max_pause}`),
      l.key_weights && Object.keys(l.key_weights).length && h('span', { class: 'chip', dataset: { limit: 'key_weights' },
        title: 'Claims take turns over the keys; a key takes up to its weight in a row (others 1).' },
        'weights ', Object.keys(l.key_weights).sort().map((k) => `${k} ${l.key_weights[k]}`).join(', ')),
      ...pausesOf(l),
    ].filter(Boolean);
    return h('span', { class: 'pairs', dataset: { test: 'limits' } }, parts);
  }

  // MAX_PAUSES_SHOWN bounds the pauses a queue's row lists; the rest are
  // counted.
  const MAX_PAUSES_SHOWN = 3;

  // pausesOf shows the pauses rate-limited attempts asked for: the queue's,
  // then its keys', each until when (the reason on hover).
  function pausesOf(l) {
    const ps = l.paused || [];
    const out = ps.slice(0, MAX_PAUSES_SHOWN).map((p) => h('span', { class: 'chip', dataset: { limit: 'paused', key: p.key || '' }, title: p.reason || '' },
      p.key ? `key ${p.key} paused until ` : 'paused until ', when(p.until)));
    if (ps.length > MAX_PAUSES_SHOWN) out.push(h('span', { class: 'chip muted', dataset: { limit: 'paused-more' } }, `+${ps.length - MAX_PAUSES_SHOWN} more paused`));
    return out;
  }

  // held shows how many due jobs the queue's limits hold back, by limit.
  function held(q) {
    const l = q.limits;
    const w = (l && l.waiting) || {};
    const total = Object.values(w).reduce((a, b) => a + b, 0);
    if (!total) return h('span', { class: 'muted', dataset: { test: 'held', held: '0' } }, '0');
    const why = Object.entries(w).filter(([, n]) => n).map(([k, n]) => `${n} by ${HELD_LABELS[k] || k}`).join(', ');
    return h('a', { href: `#/jobs?queue=${encodeURIComponent(q.name)}&status=pending`, title: why, dataset: { test: 'held', held: String(total) } }, total);
  }

  // The charts page lives in charts.js.
  pages.charts = (view, params) => window.workronCharts(view, params, { get, h, s, replace, empty });

  pages.queues = (view) => {
    const table = h('div', { id: 'queues-table' });
    // The limits form sets a queue's limits whole (PUT replaces them): it
    // starts from the queue's current limits; an empty field is no limit.
    const limitsForm = formCard('Limits', 'limits-form', (q) => [
      h('div', { class: 'field-row' }, field('Queue', 'name', { value: q ? q.name : '', placeholder: 'emails', readonly: !!q,
        hint: q ? null : 'A queue needs no jobs to have limits.' })),
      h('div', { class: 'field-row' }, LIMIT_FIELDS.slice(0, 2).map(([k, label, ph]) => field(label, k, { value: String((q && q.limits && q.limits[k]) || ''), placeholder: ph }))),
      h('div', { class: 'field-row' }, LIMIT_FIELDS.slice(2).map(([k, label, ph]) => field(label, k, { value: String((q && q.limits && q.limits[k]) || ''), placeholder: ph }))),
      h('p', { class: 'muted small-note' }, 'Leave a field empty for no limit. Changing a rate or its burst refills its buckets.'),
    ], async (f) => {
      const name = text(f, 'name');
      if (!name) throw new InputError('name', 'name the queue');
      const body = {};
      for (const [k, , , whole] of LIMIT_FIELDS) {
        const v = text(f, k);
        if (v) body[k] = whole ? intFrom(v, k) : v;
      }
      // The form does not edit key weights; PUT replaces the limits whole,
      // so it keeps the queue's (set with the CLI or the API).
      const shown = queues.find((q) => q.name === name);
      const weights = shown && shown.limits && shown.limits.key_weights;
      if (weights && Object.keys(weights).length) body.key_weights = weights;
      if (shown && shown.limits && shown.limits.rate_limit_pauses_queue) body.rate_limit_pauses_queue = true;
      await call('PUT', `queues/${encodeURIComponent(name)}`, body);
    });
    view.append(h('div', { class: 'page-head' }, h('h1', null, 'Queues'),
      h('button', { type: 'button', dataset: { action: 'new-limits' }, onclick: () => limitsForm.open() }, 'Set limits')),
    limitsForm.card, h('div', { class: 'card flush' }, table),
    h('p', { class: 'muted' }, 'A paused queue keeps its jobs and accepts new ones; workers claim nothing from it until it is resumed. ',
      'Limits cap the attempts running and the claims per second, in all and per concurrency key, across the cluster; "held" counts the due jobs they hold back. ',
      'A rate-limited attempt pauses its key (at most the queue\'s max pause); "Lift pauses" ends them now, as Resume does.'));
    const cols = ['pending', 'running', 'blocked', 'done', 'failed', 'cancelled'];
    let queues = [];
    let more = false;
    const render = () => replace(table, { queues, more, armed: [...armed.keys()] }, () => {
      if (!queues.length) return empty('No queues yet.', 'A queue appears when its first job is submitted, or when it is paused or given limits.');
      return [moreNote(more, 'queue', 'workron queues'), h('table', { class: 'table', dataset: { test: 'queues' } },
        h('thead', null, h('tr', null, h('th', null, 'Queue'), h('th', null, 'State'), cols.map((c) => h('th', { class: 'num' }, c)), h('th', { class: 'num' }, 'total'),
          h('th', null, 'Limits'), h('th', { class: 'num' }, 'held'), h('th', null, ''))),
        h('tbody', null, queues.map((q) => {
          const counts = q.counts || {};
          const total = Object.values(counts).reduce((a, b) => a + b, 0);
          const name = encodeURIComponent(q.name);
          return h('tr', { dataset: { queue: q.name, paused: q.paused ? '1' : '0', limited: q.limits ? '1' : '0' } },
            h('td', null, h('a', { href: `#/jobs?queue=${name}`, class: 'strong' }, q.name)),
            h('td', null, q.paused ? h('span', { class: 'badge st-paused', dataset: { test: 'queue-state' } }, 'paused') : h('span', { class: 'badge st-active', dataset: { test: 'queue-state' } }, 'active')),
            cols.map((c) => h('td', { class: 'num' }, counts[c] ? h('a', { href: `#/jobs?queue=${name}&status=${c}` }, counts[c]) : h('span', { class: 'muted' }, '0'))),
            h('td', { class: 'num strong' }, total),
            h('td', null, limitsSummary(q.limits)),
            h('td', { class: 'num' }, held(q)),
            h('td', { class: 'actions' },
              h('button', { type: 'button', class: 'small ghost', dataset: { action: 'limits', queue: q.name }, onclick: () => limitsForm.open(q) }, 'Limits'),
              q.limits && (q.limits.paused || []).length > 0 && h('button', {
                type: 'button', class: 'small', dataset: { action: 'lift-pauses', queue: q.name },
                title: 'End the pauses rate-limited attempts set, the queue\'s and its keys\', now',
                onclick: () => act(() => call('DELETE', `queues/${name}/pauses`)),
              }, 'Lift pauses'),
              q.limits && confirmButton({
                key: `clear-limits:${q.name}`, label: 'Clear limits', confirm: 'Confirm clear', action: 'clear-limits', cls: 'small ghost',
                data: { queue: q.name }, run: () => call('PUT', `queues/${name}`, {}),
              }),
              q.paused
                ? h('button', { type: 'button', class: 'small', dataset: { action: 'resume', queue: q.name }, onclick: () => act(() => post(`queues/${name}/resume`)) }, 'Resume')
                : h('button', { type: 'button', class: 'small', dataset: { action: 'pause', queue: q.name }, onclick: () => act(() => post(`queues/${name}/pause`)) }, 'Pause')));
        })))];
    });
    return {
      rerender: render,
      async refresh() {
        const all = await getAll('queues', 'queues');
        queues = all.items.slice().sort((a, b) => a.name.localeCompare(b.name));
        more = all.more;
        render();
      },
    };
  };

  pages.workers = (view) => {
    const table = h('div', { id: 'workers-table' });
    view.append(h('div', { class: 'page-head' }, h('h1', null, 'Workers')), h('div', { class: 'card flush' }, table));
    let workers = [];
    let more = false;
    const render = () => replace(table, { workers, more }, () => {
      if (!workers.length) return empty('No workers have registered.', `Start one: workron worker --server ${API_ROOT}`);
      return [moreNote(more, 'worker', 'workron workers'), h('table', { class: 'table', dataset: { test: 'workers' } },
        head(['Worker', 'Status', 'Running', 'Memory', 'VRAM', 'CPU', 'Queues', 'Tags', 'Last heartbeat', 'Registered'], ['Memory', 'VRAM', 'CPU']),
        h('tbody', null, workers.map((w) => {
          const r = w.resources || {};
          return h('tr', { dataset: { workerId: w.id } },
            h('td', { class: 'mono strong' }, w.id, w.exec_addr && h('div', { class: 'muted small-note' }, w.exec_addr)),
            h('td', null, badge(w.status || 'active', 'worker-status')),
            h('td', null, capacity(w.running_jobs, r.slots)),
            h('td', { class: 'num' }, mib(r.memory_mb)),
            h('td', { class: 'num' }, mib(r.vram_mb)),
            h('td', { class: 'num' }, r.cpu_millis ? `${r.cpu_millis / 1000} cores` : '—'),
            h('td', null, (w.queues && w.queues.length ? w.queues : ['default']).map((q) => h('span', { class: 'chip' }, q))),
            h('td', null, (w.tags || []).map((t) => h('span', { class: 'chip' }, t))),
            h('td', null, when(w.last_heartbeat)),
            h('td', null, when(w.registered_at)));
        })))];
    });
    return {
      async refresh() {
        const all = await getAll('workers', 'workers');
        workers = all.items.slice().sort((a, b) => a.id.localeCompare(b.id));
        more = all.more;
        render();
      },
    };
  };

  // progressMeter shows the progress a job's attempt reported: a bar, the
  // percent, its message and when it came.
  function progressMeter(p) {
    const pct = Math.min(100, Math.max(0, p.percent));
    const meter = h('span', { class: 'meter', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': pct },
      h('span', { class: 'meter-fill' }));
    meter.firstChild.style.width = `${pct}%`; // through the CSSOM, as capacity does
    return h('span', { class: 'capacity', dataset: { test: 'progress', percent: pct } }, meter,
      h('span', { class: 'num' }, `${pct}%`), p.message && h('span', { dataset: { test: 'progress-message' } }, p.message),
      h('span', { class: 'muted' }, when(p.at)));
  }

  // resultCard shows the JSON a job returned, if any.
  function resultCard(j) {
    if (j.result === undefined) return null;
    return h('section', { class: 'card', dataset: { test: 'result' } },
      h('h2', null, 'Result', h('span', { class: 'muted small-note' }, ' what the job returned; its dependents read it')),
      h('pre', { class: 'output', dataset: { test: 'result-json' } }, JSON.stringify(j.result, null, 2)));
  }

  // ---- durable steps ---------------------------------------------------

  function bytes(n) {
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10 * 1024 ? 1 : 0)} KiB`;
    return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  }

  // parkedLine says what a parked job waits for (GET /jobs/{id}'s parked):
  // a time, an event and its key, a signal, or a child job.
  function parkedLine(p) {
    const code = (text) => h('code', null, text);
    const until = (what) => p.wake_at ? [what, ' until ', when(p.wake_at)] : [what, ', with no timeout'];
    let what;
    switch (p.kind) {
      case 'sleep': what = ['sleeps until ', when(p.wake_at)]; break;
      case 'wait': what = until(p.signal ? ['waits for signal ', code(p.signal)] : ['waits for event ', code(p.event), ' with key ', code(p.event_key)]); break;
      case 'invoke': what = ['waits for its child job ', p.child_id ? jobLink(p.child_id) : '?', ' to end']; break;
      default: what = [`is parked (${p.kind})`];
    }
    return h('span', { dataset: { test: 'parked', kind: p.kind } }, 'The job ', what, p.step && [' (step ', code(p.step), ')'], '.');
  }

  // stepDetail says what a sleep, wait or invoke step waits for.
  function stepDetail(st) {
    switch (st.kind) {
      case 'sleep': return st.wake_at && ['until ', when(st.wake_at)];
      case 'wait': return [st.signal ? ['signal ', h('code', null, st.signal)] : ['event ', h('code', null, st.event), ' / ', h('code', null, st.event_key)],
        st.wake_at && [h('span', { class: 'muted' }, ' timeout '), when(st.wake_at)]];
      case 'invoke': return st.child_id && ['child ', jobLink(st.child_id)];
      default: return null;
    }
  }

  // stepSpan is when a step began and ended, in ms: it ran duration_ms up
  // to its record; a sleep or a step still waiting goes on to its wake
  // time, or to now while that is ahead.
  function stepSpan(st, now) {
    const end = new Date(st.recorded_at).getTime();
    let stop = end;
    if (st.wake_at && (st.kind === 'sleep' || st.status === 'waiting')) stop = Math.max(end, Math.min(new Date(st.wake_at).getTime(), now));
    else if (st.status === 'waiting') stop = Math.max(end, now);
    return { start: end - (st.duration_ms || 0), stop };
  }

  // stepResult is the row under a step that shows its result.
  function stepResult(shown) {
    let body;
    if (shown.error) body = h('p', { class: 'error-text' }, shown.error);
    else if (!shown.step) body = h('p', { class: 'muted' }, 'Reading the result…');
    else if (shown.step.result === undefined) body = h('p', { class: 'muted' }, 'The step recorded no result.');
    else body = h('pre', { class: 'output' }, JSON.stringify(shown.step.result, null, 2));
    return h('tr', { class: 'step-result', dataset: { test: 'step-result', key: shown.key } }, h('td', { colspan: 9 }, body));
  }

  // stepsCard draws a page of the job's journal as a timeline: a row per
  // step, in the order they began, with a bar of when it ran on the
  // page's time scale; nav pages a journal longer than a page.
  function stepsCard(page, n, shown, toggle, nav) {
    const now = Date.now();
    const rows = page.steps.map((st) => ({ st, ...stepSpan(st, now) }));
    if (!rows.length) return h('section', { class: 'card', dataset: { test: 'steps', count: page.count } }, h('h2', null, 'Steps'), empty('No steps on this page.'));
    rows.sort((a, b) => a.start - b.start || (a.st.key < b.st.key ? -1 : 1));
    const t0 = Math.min(...rows.map((r) => r.start));
    const span = Math.max(1, Math.max(...rows.map((r) => r.stop)) - t0);
    const bar = (r) => {
      const track = h('span', { class: 'track', title: `${duration(r.stop - r.start)}` },
        h('span', { class: `bar st-${r.st.status}` }));
      // Through the CSSOM: the page's CSP allows no inline style attribute.
      track.firstChild.style.left = `${(100 * (r.start - t0)) / span}%`;
      track.firstChild.style.width = `${Math.max(0.5, (100 * (r.stop - r.start)) / span)}%`;
      return track;
    };
    const paged = n > 1 || page.next;
    const from = (n - 1) * STEPS_PAGE + 1;
    return h('section', { class: 'card flush', dataset: { test: 'steps', count: page.count } },
      h('h2', { class: 'pad' }, 'Steps', h('span', { class: 'muted small-note' },
        ` ${page.count} recorded, ${bytes(page.bytes)}`, paged && `; ${from}–${from + page.steps.length - 1} by key, drawn in the order they began`)),
      h('table', { class: 'table steps' },
        head(['Step', 'Kind', 'Status', 'Tries', 'Attempt', 'Recorded', 'Took', `Timeline · ${duration(span)}`, 'Result'], ['Tries', 'Attempt', 'Took', 'Result']),
        h('tbody', null, rows.map((r) => [h('tr', { dataset: { test: 'step-row', key: r.st.key, status: r.st.status, kind: r.st.kind || 'run' } },
          h('td', { class: 'mono' }, h('button', { type: 'button', class: 'step-key', title: 'Show its result', 'aria-expanded': String(shown.key === r.st.key),
            dataset: { action: 'step-result' }, onclick: () => toggle(r.st.key) }, r.st.key)),
          h('td', null, r.st.kind || 'run', stepDetail(r.st) && h('span', { class: 'step-detail' }, ' ', stepDetail(r.st))),
          h('td', null, badge(r.st.status, 'step-status')),
          h('td', { class: 'num' }, r.st.attempts),
          h('td', { class: 'num' }, r.st.job_attempt),
          h('td', null, when(r.st.recorded_at)),
          h('td', { class: 'num' }, duration(r.st.duration_ms || 0)),
          h('td', { class: 'timeline' }, bar(r)),
          h('td', { class: 'num', dataset: { test: 'step-size' } }, bytes(r.st.size || 0))),
        shown.key === r.st.key && stepResult(shown)]))),
      paged && h('div', { class: 'pager pad-bottom' },
        h('button', { type: 'button', class: 'ghost', id: 'steps-first', disabled: n === 1, onclick: nav.first }, '« First'),
        h('button', { type: 'button', class: 'ghost', id: 'steps-prev', disabled: n === 1, onclick: nav.prev }, '‹ Previous'),
        h('span', { class: 'muted', dataset: { test: 'steps-page' } }, `Page ${n}`),
        h('button', { type: 'button', class: 'ghost', id: 'steps-next', disabled: !page.next, onclick: nav.next }, 'Next ›')));
  }

  function capacity(running, slots) {
    if (!slots) return h('span', { class: 'num' }, `${running} running`);
    const meter = h('span', { class: 'meter' }, h('span', { class: 'meter-fill' }));
    // Width through the CSSOM: the page's CSP allows no inline style attribute.
    meter.firstChild.style.width = `${Math.min(100, (100 * running) / slots)}%`;
    return h('span', { class: 'capacity', title: `${running} of ${slots} slots busy` }, meter, h('span', { class: 'num' }, `${running} / ${slots}`));
  }

  pages.schedules = (view) => {
    const table = h('div', { id: 'schedules-table' });
    // One form creates and edits: editing starts from the schedule as it is,
    // so what the form does not show (paused, catch-up, other job fields) is
    // sent back unchanged.
    let editing = null;
    const scheduleForm = formCard('Schedule', 'schedule-form', (sc) => {
      editing = sc || null;
      const s0 = sc || {};
      return [
        h('div', { class: 'field-row' },
          field('Name', 'name', { value: s0.name || '', placeholder: 'nightly-backup', readonly: !!sc }),
          field('Cron', 'cron', { value: s0.cron || '', placeholder: '0 3 * * * or @every 15m' }),
          field('Time zone', 'timezone', { value: s0.timezone || '', placeholder: 'UTC' }),
          field('Overlap', 'overlap', { kind: 'select', value: s0.overlap || 'allow', options: [['allow', 'allow: runs may overlap'], ['skip', 'skip a tick while one runs']] })),
        jobFields(s0.job, { deps: false }),
      ];
    }, async (f) => {
      const job = { ...(editing ? editing.job : {}) };
      for (const k of JOB_FIELDS) delete job[k];
      Object.assign(job, jobFromForm(f));
      // PUT changes only the fields it names: a field the form leaves
      // empty is sent empty, so that clearing it clears it.
      if (editing) {
        const cleared = { command: '', type: '', payload: null, queue: '', priority: 0, max_attempts: null, timeout: '', env: {}, metadata: {} };
        for (const [k, v] of Object.entries(cleared)) if (!(k in job)) job[k] = v;
      }
      const body = { ...(editing || {}), name: text(f, 'name'), cron: text(f, 'cron'), timezone: text(f, 'timezone'), overlap: text(f, 'overlap'), job };
      for (const k of ['created_at', 'updated_at', 'next_run', 'last_tick', 'last_run', 'last_job_id', 'last_job_status', 'runs', 'skipped', 'missed', 'last_error', 'warnings']) delete body[k];
      if (editing) await call('PUT', `schedules/${encodeURIComponent(editing.name)}`, body);
      else await post('schedules', body);
    });
    view.append(h('div', { class: 'page-head' }, h('h1', null, 'Schedules'),
      h('button', { type: 'button', dataset: { action: 'new-schedule' }, onclick: () => scheduleForm.open() }, 'New schedule')),
    scheduleForm.card, h('div', { class: 'card flush' }, table));
    let list = null;
    let more = false;
    const render = () => replace(table, { list, more, armed: [...armed.keys()] }, () => {
      if (!list) return empty('No schedules.', 'This node does not serve schedules.');
      if (!list.length) return empty('No schedules.', `Create one: curl -X POST ${API_ROOT}/schedules -d '{"name":"nightly","cron":"0 3 * * *","job":{"command":"./backup.sh"}}'`);
      return [moreNote(more, 'schedule', 'workron schedules ls'), h('table', { class: 'table', dataset: { test: 'schedules' } },
        head(['Schedule', 'Cron', 'Job', 'Next run', 'Last run', 'Runs', 'State', ''], ['Runs']),
        h('tbody', null, list.map(scheduleRow)))];
    });

    function scheduleRow(sc) {
      const job = sc.job || {};
      const name = encodeURIComponent(sc.name);
      const tz = sc.timezone && sc.timezone !== 'UTC' ? sc.timezone : '';
      const counts = [`${sc.runs || 0}`, sc.skipped ? `${sc.skipped} skipped` : '', sc.missed ? `${sc.missed} missed` : ''].filter(Boolean).join(' · ');
      return h('tr', { dataset: { schedule: sc.name, paused: sc.paused ? '1' : '0' } },
        h('td', { class: 'strong nowrap' }, sc.name, sc.last_error && h('div', { class: 'error-text small-note' }, sc.last_error)),
        h('td', { class: 'nowrap' }, h('code', null, sc.cron), tz && h('div', { class: 'muted small-note' }, tz)),
        h('td', { class: 'cmd', title: jobTitle(job) }, h('code', null, jobTitle(job)), h('div', { class: 'muted small-note' }, `queue ${job.queue || 'default'}`)),
        h('td', { class: 'nowrap', dataset: { test: 'next-run' } }, sc.paused ? h('span', { class: 'muted' }, 'paused') : when(sc.next_run)),
        h('td', { dataset: { test: 'last-run' } }, sc.last_job_id
          ? h('div', { class: 'last-run' }, h('div', null, sc.last_run && when(sc.last_run), ' ', sc.last_job_status && badge(sc.last_job_status, 'last-status')),
            h('div', { class: 'truncate', title: sc.last_job_id }, jobLink(sc.last_job_id)))
          : h('span', { class: 'muted' }, 'never')),
        h('td', { class: 'num' }, counts),
        h('td', null, h('span', { class: `badge ${sc.paused ? 'st-paused' : 'st-active'}`, dataset: { test: 'schedule-state' } }, sc.paused ? 'paused' : 'active')),
        h('td', { class: 'actions' },
          h('button', { type: 'button', class: 'small', dataset: { action: 'trigger', schedule: sc.name }, title: 'Create one run now', onclick: () => act(() => post(`schedules/${name}/trigger`)) }, 'Run now'),
          h('button', { type: 'button', class: 'small ghost', dataset: { action: 'edit', schedule: sc.name }, onclick: () => scheduleForm.open(sc) }, 'Edit'),
          confirmButton({
            key: `delete-schedule:${sc.name}`, label: 'Delete', confirm: 'Confirm delete', action: 'delete', cls: 'danger small',
            data: { schedule: sc.name }, run: () => call('DELETE', `schedules/${name}`),
          }),
          sc.paused
            ? h('button', { type: 'button', class: 'small', dataset: { action: 'resume', schedule: sc.name }, onclick: () => act(() => post(`schedules/${name}/resume`)) }, 'Resume')
            : h('button', { type: 'button', class: 'small', dataset: { action: 'pause', schedule: sc.name }, onclick: () => act(() => post(`schedules/${name}/pause`)) }, 'Pause')));
    }

    return {
      rerender: render,
      async refresh() {
        try {
          ({ items: list, more } = await getAll('schedules', 'schedules'));
        } catch (err) {
          if (!(err instanceof APIError) || err.status !== 404) throw err;
          list = null; // a node without schedules (an older version)
        }
        render();
      },
    };
  };

  pages.cluster = (view) => {
    const cards = h('div', { class: 'stats', id: 'cluster-stats' });
    const table = h('div', { id: 'nodes-table' });
    view.append(h('div', { class: 'page-head' }, h('h1', null, 'Cluster')), cards, h('div', { class: 'card flush' }, table));
    let data = null;
    const stat = (label, value, test, note) => h('div', { class: 'card stat' }, h('div', { class: 'stat-label' }, label),
      h('div', { class: 'stat-value', dataset: { test } }, value), note && h('div', { class: 'muted small-note' }, note));
    const render = () => {
      if (!data) return;
      const { cluster: c, health } = data;
      const self = health.node_id;
      const contact = health.role === 'leader' ? 'this node leads'
        : c.last_contact && !isZeroTime(c.last_contact) ? relative(c.last_contact) : '—';
      replace(cards, { c, health, contact }, () => [
        stat('Leader', c.leader || 'none', 'leader', c.leader ? `of ${(c.nodes || []).length} voters` : 'no quorum: writes are refused'),
        stat('This node', self, 'self', health.role),
        stat('Applied index', (c.applied_index || 0).toLocaleString(), 'applied-index', c.term ? `term ${c.term}` : null),
        stat('Last contact with leader', contact, 'last-contact', health.role === 'leader' ? null : 'as this node last heard from it'),
      ]);
      replace(table, { nodes: c.nodes, leader: c.leader, self }, () => h('table', { class: 'table', dataset: { test: 'nodes' } },
        head(['Node', 'Role', 'Health', 'Applied', 'HTTP', 'Raft', ''], ['Applied']),
        h('tbody', null, (c.nodes || []).map((n) => h('tr', { dataset: { nodeId: n.id, role: n.role, reachable: !n.health || n.health.reachable ? '1' : '0' }, class: n.id === self ? 'self' : '' },
          h('td', null, h('span', { class: 'node-id' }, h('span', { class: 'mono strong' }, n.id), n.id === self && h('span', { class: 'chip' }, 'this node'))),
          h('td', null, nodeRole(n)),
          h('td', null, nodeHealth(n)),
          h('td', { class: 'num' }, n.health && n.health.reachable ? (n.health.applied_index || 0).toLocaleString() : h('span', { class: 'muted' }, '—')),
          h('td', { class: 'mono' }, n.http || h('span', { class: 'muted' }, 'unknown')),
          h('td', { class: 'mono' }, n.raft),
          h('td', { class: 'actions' }, n.http && n.id !== self && h('a', { href: `${n.http}/ui/#/cluster`, class: 'button-link' }, 'Open its dashboard')))))));
    };
    return {
      async refresh() {
        const [cluster, health] = await Promise.all([call('GET', 'cluster'), healthNow()]);
        data = { cluster, health };
        render();
      },
    };
  };

  // nodeRole is what the node says it is when it answered just now; a node
  // that did not answer is shown as unreachable, never with the role the
  // Raft configuration gives it.
  function nodeRole(n) {
    const hl = n.health;
    if (hl && !hl.reachable) return [badge('unreachable', 'role'), h('div', { class: 'muted small-note' }, `configured as ${n.role}`)];
    return badge((hl && hl.role) || n.role, 'role');
  }

  function nodeHealth(n) {
    const hl = n.health;
    if (!hl) return h('span', { class: 'muted' }, 'not asked');
    if (!hl.reachable) return h('span', { class: 'error-text', dataset: { test: 'node-health' }, title: hl.error || '' }, hl.error || 'no answer');
    return h('span', { dataset: { test: 'node-health' } }, hl.status === 'ok' ? 'ok' : badge(hl.status, 'node-status'));
  }

  // ---- header health ---------------------------------------------------------

  async function healthNow() {
    let hl;
    try {
      hl = await call('GET', 'health');
    } catch (err) {
      if (err instanceof APIError && err.status === 503) hl = { status: 'no_leader', role: '?', node_id: '?', leader: '' };
      else throw err;
    }
    const el = $('#health');
    const ok = hl.status === 'ok';
    el.className = `health ${ok ? 'health-ok' : 'health-bad'}`;
    el.dataset.status = hl.status;
    el.replaceChildren(h('span', { class: 'dot' }), ok ? `leader ${hl.leader}` : 'no leader',
      h('span', { class: 'muted' }, ` · ${hl.node_id} is ${hl.role}`));
    return hl;
  }

  // ---- router and refresh loop ------------------------------------------------

  let current = null; // { refresh, rerender, gen }
  let generation = 0;
  let timer = null;
  let running = false;

  function route() {
    const raw = location.hash.replace(/^#/, '') || '/jobs';
    const [path, query = ''] = raw.split('?');
    const params = new URLSearchParams(query);
    const parts = path.split('/').filter(Boolean);
    let name = parts[0] || 'jobs';
    let arg;
    if (name === 'jobs' && parts.length > 1) {
      name = 'job';
      arg = decodeURIComponent(parts.slice(1).join('/'));
    }
    if (!pages[name]) {
      location.replace('#/jobs');
      return;
    }
    for (const a of document.querySelectorAll('#nav a')) {
      a.classList.toggle('active', a.dataset.nav === (name === 'job' ? 'jobs' : name));
    }
    document.title = `${arg || name[0].toUpperCase() + name.slice(1)} · Workron`;
    const view = $('#view');
    view.replaceChildren();
    view.dataset.page = name;
    actionError = null;
    generation++;
    current = { ...pages[name](view, params, arg), gen: generation };
    refreshNow();
  }

  function rerender() {
    if (current && current.rerender) current.rerender();
  }

  async function refreshNow() {
    clearTimeout(timer);
    if (running) {
      // A refresh is under way; run again right after it.
      timer = setTimeout(refreshNow, 50);
      return;
    }
    running = true;
    const page = current;
    try {
      if (page) await page.refresh();
      if (page && page.gen !== generation) return;
      await healthNow();
      refreshError = null;
      $('#updated').textContent = `Updated ${new Date().toLocaleTimeString()}`;
      $('#view').dataset.loaded = '1';
    } catch (err) {
      if (page === current) refreshError = err;
    } finally {
      running = false;
      updateTimes();
      showBanner();
      if (!paused()) timer = setTimeout(tick, REFRESH_MS);
    }
  }

  // tick is the timer's refresh: a hidden tab asks nothing of the cluster
  // and refreshes as soon as it is shown again.
  function tick() {
    if (document.hidden) return;
    refreshNow();
  }

  function paused() {
    return localStorage.getItem(PAUSED_KEY) === '1';
  }

  function showRefreshState() {
    const b = $('#refresh-toggle');
    b.textContent = paused() ? 'Auto-refresh paused' : 'Auto-refresh on';
    b.classList.toggle('paused', paused());
    b.dataset.paused = paused() ? '1' : '0';
  }

  function init() {
    $('#refresh-toggle').addEventListener('click', () => {
      localStorage.setItem(PAUSED_KEY, paused() ? '0' : '1');
      showRefreshState();
      refreshNow();
    });
    $('#token-toggle').addEventListener('click', () => {
      const panel = $('#token-panel');
      panel.hidden = !panel.hidden;
      $('#token-input').value = localStorage.getItem(TOKEN_KEY) || '';
      if (!panel.hidden) $('#token-input').focus();
    });
    $('#token-panel').addEventListener('submit', (e) => {
      e.preventDefault();
      const v = $('#token-input').value.trim();
      if (v) localStorage.setItem(TOKEN_KEY, v);
      else localStorage.removeItem(TOKEN_KEY);
      $('#token-panel').hidden = true;
      showTokenState();
      refreshNow();
    });
    $('#token-clear').addEventListener('click', () => {
      localStorage.removeItem(TOKEN_KEY);
      $('#token-input').value = '';
      $('#token-panel').hidden = true;
      showTokenState();
      refreshNow();
    });
    $('#banner-close').addEventListener('click', () => {
      actionError = null;
      refreshError = null;
      showBanner();
    });
    window.addEventListener('hashchange', route);
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden && !paused()) refreshNow();
    });
    showRefreshState();
    showTokenState();
    route();
  }

  // askForToken opens the token form when the node refuses a request for
  // want of a valid token (it runs with --auth-token-file).
  function askForToken() {
    const panel = $('#token-panel');
    if (!panel.hidden) return;
    panel.hidden = false;
    $('#token-input').value = localStorage.getItem(TOKEN_KEY) || '';
    $('#token-input').focus();
  }

  function showTokenState() {
    const set = !!localStorage.getItem(TOKEN_KEY);
    $('#token-toggle').textContent = set ? 'Token set' : 'Token';
    $('#token-toggle').classList.toggle('on', set);
  }

  init();
})();
