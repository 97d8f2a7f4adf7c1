// runs.js: the runs list with filters (tenant, status, pipeline), refreshed every two seconds
// and, for the newest active runs, updated at once from their event streams.

import {h, clear, badge, table, timeCell, fmtDuration, ms, shortId, every, isAbort, FINAL_RUN, RUN_STATUSES} from '../dom.js';
import {api, get, followRun, claims} from '../api.js';
import {errorBox, pageHeader, liveDot} from '../view.js';

const REFRESH_MS = 2000;
const MAX_STREAMS = 3; // browsers allow 6 connections per host; keep most for the page

function runDuration(r) {
  const start = ms(r.created_at);
  const end = FINAL_RUN.has(r.status) ? ms(r.updated_at) : Date.now();
  return start === null || end === null ? '' : fmtDuration(end - start);
}

export async function render(v) {
  const q = v.query;
  const filters = {tenant: q.get('tenant') || '', status: q.get('status') || '', pipeline: q.get('pipeline') || ''};
  const c = claims();
  const live = liveDot('live');
  const count = h('span', {class: 'muted'});
  v.main.append(pageHeader('Runs', count, live));

  const tenantIn = h('input', {name: 'tenant', placeholder: 'any tenant', value: filters.tenant, list: 'tenant-ids', size: 14});
  const tenantList = h('datalist', {id: 'tenant-ids'});
  const statusSel = h('select', {name: 'status'}, h('option', {value: ''}, 'any status'),
    RUN_STATUSES.map((st) => h('option', {value: st, selected: st === filters.status}, st)));
  const pipelineSel = h('select', {name: 'pipeline'}, h('option', {value: ''}, 'any pipeline'));
  if (filters.pipeline) pipelineSel.append(h('option', {value: filters.pipeline, selected: true}, filters.pipeline));
  const bar = h('form', {class: 'filters', id: 'run-filters'},
    h('label', {}, 'Tenant ', tenantIn, tenantList), h('label', {}, 'Status ', statusSel),
    h('label', {}, 'Pipeline ', pipelineSel));
  v.main.append(bar);

  const newRun = newRunForm(v, c);
  v.main.append(newRun.el);

  const body = h('div', {id: 'runs-table'});
  v.main.append(body);

  const applyFilters = () => {
    filters.tenant = tenantIn.value.trim();
    filters.status = statusSel.value;
    filters.pipeline = pipelineSel.value;
    const qs = new URLSearchParams(Object.entries(filters).filter(([, x]) => x));
    history.replaceState(null, '', '#/runs' + (qs.toString() ? '?' + qs : ''));
    refresh().catch(() => {});
  };
  bar.addEventListener('submit', (e) => {
    e.preventDefault();
    applyFilters();
  });
  tenantIn.addEventListener('change', applyFilters);
  statusSel.addEventListener('change', applyFilters);
  pipelineSel.addEventListener('change', applyFilters);

  get('/v1/pipelines', v.signal).then((res) => {
    for (const p of res.pipelines || []) {
      if (p.key !== filters.pipeline) pipelineSel.append(h('option', {value: p.key}, p.key));
      newRun.addPipeline(p.key);
    }
  }).catch(() => {});

  const streams = new Map(); // shared_run_id → AbortController
  const rows = new Map(); // shared_run_id → <tr>
  const knownTenants = new Set();
  let stopped = false;
  let pending = null;
  const soon = () => {
    if (pending) return;
    pending = setTimeout(() => {
      pending = null;
      refresh().catch(() => {});
    }, 150);
  };
  v.signal.addEventListener('abort', () => {
    clearTimeout(pending);
    for (const ctl of streams.values()) ctl.abort();
  });

  async function refresh() {
    if (stopped) return;
    const qs = new URLSearchParams({limit: '200'});
    if (filters.tenant) qs.set('tenant_id', filters.tenant);
    if (filters.status) qs.set('status', filters.status);
    let list;
    try {
      list = (await get('/v1/runs?' + qs, v.signal)).runs || [];
    } catch (e) {
      if (isAbort(e)) throw e;
      clear(body).append(errorBox(e));
      live.set('stopped');
      if (e.status === 401 || e.status === 403) stopped = true;
      return;
    }
    live.set('live');
    for (const r of list) {
      if (!knownTenants.has(r.tenant_id)) {
        knownTenants.add(r.tenant_id);
        tenantList.append(h('option', {value: r.tenant_id}));
      }
    }
    const shown = list.filter((r) => !filters.pipeline || r.pipeline === filters.pipeline)
      .sort((a, b) => (ms(b.created_at) || 0) - (ms(a.created_at) || 0));
    count.textContent = `${shown.length} run${shown.length === 1 ? '' : 's'}`;
    rows.clear();
    const t = table([
      {label: 'Run', cell: (r) => h('a', {href: '#/runs/' + encodeURIComponent(r.shared_run_id), title: r.shared_run_id, class: 'mono'}, shortId(r.shared_run_id))},
      {label: 'Tenant', cell: (r) => r.tenant_id},
      {label: 'Pipeline', cell: (r) => h('span', {title: r.pipeline_hash}, r.pipeline)},
      {label: 'Status', cell: (r) => badge(r.status)},
      {label: 'Attempts', cell: (r) => String(r.attempts), class: 'num'},
      {label: 'Created', cell: (r) => timeCell(r.created_at)},
      {label: 'Duration', cell: (r) => runDuration(r), class: 'num'},
      {label: 'Instance', cell: (r) => h('span', {class: 'mono'}, r.assigned_runtime_instance_id || '')},
      {label: 'Failure', cell: (r) => h('span', {class: 'failure', title: r.failure_reason}, r.failure_reason)},
    ], shown, {
      rowAttrs: (r) => ({'data-run-id': r.shared_run_id, 'data-status': r.status, 'data-tenant': r.tenant_id}),
      empty: filters.tenant || filters.status || filters.pipeline ? 'No runs match these filters.' : 'No runs yet. Submit one with "dair submit" or the form above.',
    });
    for (const tr of t.querySelectorAll('tbody tr[data-run-id]')) rows.set(tr.dataset.runId, tr);
    clear(body).append(t);
    follow(shown.filter((r) => !FINAL_RUN.has(r.status)).slice(0, MAX_STREAMS).map((r) => r.shared_run_id));
  }

  // follow keeps one event stream open per id in ids and closes the others.
  function follow(ids) {
    const want = new Set(ids);
    for (const [id, ctl] of streams) {
      if (!want.has(id)) {
        ctl.abort();
        streams.delete(id);
      }
    }
    for (const id of want) {
      if (streams.has(id)) continue;
      const ctl = new AbortController();
      v.signal.addEventListener('abort', () => ctl.abort(), {once: true});
      streams.set(id, ctl);
      followRun(id, {
        signal: ctl.signal,
        onEvent: (ev) => {
          const tr = rows.get(id);
          if (tr && (ev.event.startsWith('step_') || ev.event === 'execution_started')) {
            tr.dataset.status = 'running';
            const cell = tr.children[3];
            clear(cell).append(badge('running'));
          }
          if (ev.event.startsWith('run_') || ev.event === 'dispatch' || ev.event === 'scale_out_requested') soon();
        },
      }).catch(() => {}).finally(() => {
        if (streams.get(id) === ctl) streams.delete(id);
      });
    }
  }

  await refresh();
  every(REFRESH_MS, v.signal, refresh);
}

function newRunForm(v, c) {
  const pipelineSel = h('select', {name: 'pipeline', required: true});
  const tenantIn = h('input', {name: 'tenant_id', placeholder: c && c.tenant_id ? c.tenant_id : 'default', size: 14,
    value: c && c.tenant_id ? c.tenant_id : ''});
  const inputArea = h('textarea', {name: 'input', rows: 2, cols: 48, placeholder: '{"name": "ada"}', spellcheck: 'false'});
  const msg = h('span', {class: 'form-msg'});
  const form = h('form', {class: 'new-run'},
    h('label', {}, 'Pipeline ', pipelineSel), h('label', {}, 'Tenant ', tenantIn),
    h('label', {}, 'Input (JSON) ', inputArea), h('button', {type: 'submit'}, 'Submit run'), msg);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    msg.textContent = '';
    const body = {pipeline: pipelineSel.value};
    if (tenantIn.value.trim()) body.tenant_id = tenantIn.value.trim();
    if (inputArea.value.trim()) {
      try {
        body.input = JSON.parse(inputArea.value);
      } catch (err) {
        msg.textContent = 'input is not JSON: ' + err.message;
        return;
      }
    }
    try {
      const res = await api('POST', '/v1/runs', {body, signal: v.signal});
      location.hash = '#/runs/' + encodeURIComponent(res.shared_run_id);
    } catch (err) {
      if (!isAbort(err)) msg.textContent = `${err.status || ''} ${err.code || ''}: ${err.message}`;
    }
  });
  const el = h('details', {class: 'panel new-run-panel'}, h('summary', {}, 'New run'), form);
  return {el, addPipeline: (key) => pipelineSel.append(h('option', {value: key}, key))};
}
