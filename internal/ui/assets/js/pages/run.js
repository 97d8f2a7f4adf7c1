// run.js: one run: its summary and controls, and four tabs: the DAG coloured by step status
// (live from the run's event stream), the trace timeline, the ledger, and replay with its
// divergence report.

import {h, clear, badge, table, timeCell, fmtDuration, ms, json, isAbort, FINAL_RUN} from '../dom.js';
import {api, get, followRun} from '../api.js';
import {errorBox, kv, liveDot} from '../view.js';
import {parsePipeline} from '../yaml.js';
import {Graph} from '../dag.js';
import {drawTimeline} from '../timeline.js';

const TABS = [['graph', 'Graph'], ['trace', 'Trace'], ['ledger', 'Ledger'], ['replay', 'Replay']];

export async function render(v) {
  const {id, tab} = v.params;
  const enc = encodeURIComponent(id);
  let run = await get('/v1/runs/' + enc, v.signal);

  const live = liveDot(FINAL_RUN.has(run.status) ? 'ended' : 'connecting');
  const statusSlot = h('span', {id: 'run-status'});
  const summary = h('div', {class: 'run-summary'});
  const controls = h('div', {class: 'run-controls'});
  const ctlMsg = h('span', {class: 'form-msg'});
  v.main.append(
    h('div', {class: 'page-head'},
      h('h1', {}, h('a', {href: '#/runs', class: 'crumb'}, 'Runs'), ' / ', h('span', {class: 'mono'}, id)),
      h('div', {class: 'page-tools'}, statusSlot, live)),
    h('div', {class: 'panel'}, summary, controls, ctlMsg),
    h('nav', {class: 'tabs'}, TABS.map(([key, name]) =>
      h('a', {href: `#/runs/${enc}/${key}`, class: key === tab ? 'active' : '', 'data-tab': key}, name))));
  const content = h('div', {class: 'tab-body', 'data-tab': tab});
  v.main.append(content);

  const showRun = () => {
    statusSlot.replaceChildren(badge(run.status));
    v.main.setAttribute('data-run-status', run.status);
    const start = ms(run.created_at);
    const end = FINAL_RUN.has(run.status) ? ms(run.updated_at) : Date.now();
    summary.replaceChildren(kv([
      ['tenant', run.tenant_id],
      ['pipeline', h('span', {title: run.pipeline_hash}, run.pipeline, h('span', {class: 'muted mono'}, ' @' + (run.pipeline_hash || '').slice(0, 12)))],
      ['execution', h('span', {class: 'mono'}, run.execution_id)],
      ['instance', h('span', {class: 'mono'}, run.assigned_runtime_instance_id)],
      ['attempts', String(run.attempts)],
      ['created', timeCell(run.created_at)],
      ['duration', start !== null && end !== null ? fmtDuration(end - start) : ''],
      ['failure', run.failure_reason ? h('span', {class: 'failure'}, run.failure_reason) : undefined],
      ['input', run.input !== undefined ? h('code', {class: 'json'}, json(run.input)) : undefined],
      ['output', run.output !== undefined ? h('code', {class: 'json'}, json(run.output)) : undefined],
    ]));
    const final = FINAL_RUN.has(run.status);
    const dispatched = run.status === 'running' || run.status === 'dispatched' || run.status === 'paused';
    controls.hidden = final;
    controls.replaceChildren(
      control('cancel', 'Cancel', !final),
      control('pause', 'Pause', dispatched && run.status !== 'paused'),
      control('resume', 'Resume', run.status === 'paused'));
  };
  const control = (op, name, enabled) => h('button', {type: 'button', disabled: !enabled, 'data-op': op, onclick: async () => {
    ctlMsg.textContent = '';
    try {
      run = await api('POST', `/v1/runs/${enc}/${op}`, {signal: v.signal});
      showRun();
      onRun.forEach((f) => f(run));
    } catch (e) {
      if (!isAbort(e)) ctlMsg.textContent = `${op}: ${e.status || ''} ${e.code || ''} ${e.message}`;
    }
  }}, name);
  showRun();

  // Listeners of the stream: the active tab registers what it needs.
  const onEvent = [];
  const onRun = [];
  let pending = null;
  const refetch = () => {
    if (pending) return;
    pending = setTimeout(async () => {
      pending = null;
      try {
        run = await get('/v1/runs/' + enc, v.signal);
        showRun();
        onRun.forEach((f) => f(run));
      } catch (e) {
        if (!isAbort(e)) console.warn('refresh run', e);
      }
    }, 200);
  };
  v.signal.addEventListener('abort', () => clearTimeout(pending));

  const tabs = {graph: graphTab, trace: traceTab, ledger: ledgerTab, replay: replayTab};
  await tabs[tab]({v, run: () => run, content, onEvent, onRun});

  // Follow the run to its end (the stream replays its history first, then live events).
  if (!FINAL_RUN.has(run.status)) {
    followRun(id, {
      signal: v.signal,
      onState: (st) => live.set(st),
      onEvent: (ev) => {
        onEvent.forEach((f) => f(ev));
        refetch();
      },
    }).then(() => refetch()).catch((e) => {
      if (isAbort(e)) return;
      live.set('stopped');
      content.prepend(errorBox(e));
    });
  }
}

// graphTab draws the DAG from the pinned pipeline version and colours it from the run's steps
// and then from each event.
async function graphTab({v, run, content, onEvent, onRun}) {
  const r = run();
  let steps;
  let note = null;
  try {
    const p = await get(`/v1/pipelines/${encodeURIComponent(r.pipeline)}?hash=${encodeURIComponent(r.pipeline_hash)}`, v.signal);
    steps = parsePipeline(p.source).steps;
  } catch (e) {
    if (isAbort(e)) throw e;
    note = `The pipeline's dependencies are unavailable (${e.message}); steps are drawn without edges.`;
    steps = [];
  }
  const known = new Set(steps.map((st) => st.id));
  for (const st of r.steps || []) {
    if (!known.has(st.id)) steps.push({id: st.id, uses: '', needs: []});
  }
  const wrap = h('div', {class: 'dag-wrap'});
  const stepsBox = h('div', {id: 'steps-table'});
  if (note) content.append(h('p', {class: 'muted'}, note));
  content.append(wrap, legend(), h('h2', {}, 'Steps'), stepsBox);
  const graph = new Graph(wrap, steps);
  const order = new Map(steps.map((st, i) => [st.id, i]));
  const applyRun = (rr) => {
    const started = new Set();
    for (const st of rr.steps || []) {
      started.add(st.id);
      graph.set(st.id, {status: st.status, attempts: st.attempts, error: st.error});
    }
    if (FINAL_RUN.has(rr.status)) {
      for (const st of steps) {
        if (!started.has(st.id)) graph.set(st.id, {status: 'pending', label: 'not run'});
      }
    }
    const sorted = [...(rr.steps || [])].sort((a, b) => (order.get(a.id) ?? 1e9) - (order.get(b.id) ?? 1e9));
    clear(stepsBox).append(table([
      {label: 'Step', cell: (st) => h('span', {class: 'mono'}, st.id)},
      {label: 'Status', cell: (st) => badge(st.status)},
      {label: 'Attempts', cell: (st) => String(st.attempts), class: 'num'},
      {label: 'Started', cell: (st) => timeCell(st.started_at)},
      {label: 'Duration', cell: (st) => st.started_at && st.finished_at ? fmtDuration(ms(st.finished_at) - ms(st.started_at)) : '', class: 'num'},
      {label: 'Output / error', cell: (st) => st.error
        ? h('span', {class: 'failure'}, st.error)
        : (st.output !== undefined ? h('code', {class: 'json'}, json(st.output)) : '')},
    ], sorted, {rowAttrs: (st) => ({'data-step': st.id, 'data-status': st.status}), empty: 'No step has started yet.'}));
  };
  applyRun(r);
  onRun.push(applyRun);
  onEvent.push((ev) => {
    const d = ev.data || {};
    if (!d.step_id) return;
    if (ev.event === 'step_started') graph.set(d.step_id, {status: 'running', attempts: d.attempt});
    else if (ev.event === 'step_succeeded') graph.set(d.step_id, {status: 'succeeded', attempts: d.attempt});
    else if (ev.event === 'step_failed') graph.set(d.step_id, {status: 'failed', attempts: d.attempt, error: d.reason});
  });
}

function legend() {
  return h('div', {class: 'legend'}, ['pending', 'running', 'succeeded', 'failed', 'skipped', 'cancelled']
    .map((st) => h('span', {class: 'legend-item'}, h('span', {class: 'swatch', 'data-status': st}), st)));
}

// refreshing re-runs load after events, at most every 300 ms, while the run is live.
function refreshing(v, onEvent, load) {
  let t = null;
  v.signal.addEventListener('abort', () => clearTimeout(t));
  onEvent.push(() => {
    if (t) return;
    t = setTimeout(() => {
      t = null;
      load().catch((e) => {
        if (!isAbort(e)) console.warn(e);
      });
    }, 300);
  });
}

async function traceTab({v, run, content, onEvent}) {
  const id = run().shared_run_id;
  const box = h('div', {class: 'timeline-wrap', id: 'timeline'});
  content.append(box, h('div', {class: 'legend'},
    ['succeeded', 'failed', 'open', 'running'].map((st) => h('span', {class: 'legend-item'}, h('span', {class: 'swatch bar-swatch', 'data-status': st}),
      st === 'open' ? 'open (cut short by a crash)' : st)),
    h('span', {class: 'legend-item'}, h('span', {class: 'swatch recovery-swatch'}), 'recovery'),
    h('span', {class: 'muted'}, 'Retries are stacked as “step #2”, “#3”; hover a bar for its attributes.')));
  const load = async () => {
    const tr = await get('/v1/executions/' + encodeURIComponent(id) + '/trace', v.signal);
    drawTimeline(box, tr.spans || []);
  };
  await load();
  refreshing(v, onEvent, load);
}

const LEDGER_STYLE = {step_failed: 'bad', run_failed: 'bad', dispatch_failed: 'bad', recovery: 'warn',
  run_cancelled: 'warn', step_succeeded: 'good', run_succeeded: 'good'};

async function ledgerTab({v, run, content, onEvent}) {
  const id = run().shared_run_id;
  const box = h('div', {id: 'ledger'});
  content.append(box);
  const load = async () => {
    const l = await get('/v1/executions/' + encodeURIComponent(id) + '/ledger', v.signal);
    const entries = l.entries || [];
    const t0 = entries.length ? ms(entries[0].at) : 0;
    clear(box).append(table([
      {label: 'Seq', cell: (e) => String(e.seq), class: 'num'},
      {label: 'At', cell: (e) => h('span', {title: e.at}, e.seq === entries[0].seq ? '0' : '+' + fmtDuration(ms(e.at) - t0)), class: 'num'},
      {label: 'Kind', cell: (e) => h('span', {class: ['kind', LEDGER_STYLE[e.kind]]}, e.kind)},
      {label: 'Step', cell: (e) => e.step_id ? h('span', {class: 'mono'}, e.step_id) : ''},
      {label: 'Attempt', cell: (e) => e.attempt ? String(e.attempt) : '', class: 'num'},
      {label: 'Epoch', cell: (e) => e.epoch ? String(e.epoch) : '', class: 'num'},
      {label: 'Instance', cell: (e) => h('span', {class: 'mono'}, e.runtime_instance_id || '')},
      {label: 'Reason', cell: (e) => e.reason || ''},
      {label: 'Data', cell: (e) => e.data === undefined ? '' : dataCell(e.data)},
    ], entries, {rowAttrs: (e) => ({'data-seq': e.seq, 'data-kind': e.kind}), empty: 'The ledger is empty.'}));
  };
  await load();
  refreshing(v, onEvent, load);
}

function dataCell(d) {
  const text = json(d);
  if (text.length <= 60) return h('code', {class: 'json'}, text);
  return h('details', {}, h('summary', {}, h('code', {class: 'json'}, JSON.stringify(d).slice(0, 56) + '…')), h('pre', {class: 'json'}, text));
}

async function replayTab({v, run, content, onRun}) {
  const result = h('div', {id: 'replay-result'});
  const note = h('p', {class: 'muted'});
  const button = h('button', {type: 'button', id: 'replay-button'}, 'Replay execution');
  const update = (r) => {
    const final = FINAL_RUN.has(r.status);
    button.disabled = !r.execution_id;
    note.textContent = !r.execution_id
      ? 'The run has no execution yet.'
      : final ? '' : 'The run is still going: the replay covers the steps committed so far.';
  };
  update(run());
  onRun.push(update);
  button.addEventListener('click', async () => {
    button.disabled = true;
    clear(result).append(h('p', {class: 'muted'}, 'Replaying…'));
    try {
      const r = run();
      const rep = await api('POST', '/v1/executions/' + encodeURIComponent(r.execution_id || r.shared_run_id) + '/replay', {signal: v.signal});
      const divs = rep.divergences || [];
      clear(result).append(h('div', {},
        h('div', {class: ['verdict', rep.diverged ? 'bad' : 'good'], 'data-diverged': String(!!rep.diverged)},
          rep.diverged
            ? `Diverged: ${divs.length} step${divs.length === 1 ? '' : 's'} differ from the recorded history.`
            : `No divergence: ${rep.replayed ?? '?'} step${rep.replayed === 1 ? '' : 's'} replayed against the recorded outputs.`),
        divs.length ? table([
          {label: 'Step', cell: (d) => h('span', {class: 'mono'}, d.step_id)},
          {label: 'Reason', cell: (d) => d.reason},
        ], divs) : null));
    } catch (e) {
      if (isAbort(e)) return;
      clear(result).append(errorBox(e));
    } finally {
      button.disabled = false;
    }
  });
  content.append(h('div', {class: 'panel'},
    h('p', {}, 'Replay re-runs this execution\'s steps against their recorded outputs, without calling any handler, ' +
      'and reports every step whose replay differs from the history (a changed pipeline, a non-deterministic template).'),
    button, ' ', note), result);
}
