// timeline.js: draws an execution's trace (GET /v1/executions/{id}/trace) on a time axis:
// the run, one row per step attempt (so retries show as stacked attempts, failed ones red,
// attempts cut short by a crash hatched as "open"), and one row per kind of control-plane
// event with a marker per occurrence. Recovery events also draw a dashed line across the chart.

import {s, h, ms, fmtDuration, clear} from './dom.js';

const LABEL_W = 210;
const ROW_H = 24;
const BAR_H = 14;
const AXIS_H = 28;
const PAD_R = 70;

// niceStep picks a tick interval of 1, 2 or 5 × 10^k ms for about `ticks` ticks over range.
function niceStep(range, ticks) {
  const raw = Math.max(range / ticks, 1e-3);
  const pow = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) {
    if (raw <= m * pow) return m * pow;
  }
  return 10 * pow;
}

function attrText(attrs) {
  return Object.entries(attrs || {}).map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`).join('\n');
}

// rows turns spans into drawable rows: {kind, label, items: [{start, end, status, title, open}]}.
export function rows(spans) {
  const out = [];
  const run = spans.find((sp) => sp.kind === 'run');
  if (run) {
    const st = String((run.attributes || {}).status || 'running').replace(/^run_/, '');
    out.push({kind: 'run', label: 'run', items: [{start: ms(run.start), end: ms(run.end), status: st,
      title: run.name + '\n' + attrText(run.attributes)}]});
  }
  const steps = spans.filter((sp) => sp.kind === 'step')
    .sort((a, b) => (ms(a.start) - ms(b.start)) || a.name.localeCompare(b.name));
  for (const sp of steps) {
    const a = sp.attributes || {};
    const open = a.open === true;
    const status = open ? 'open' : (a.status || 'running');
    const attempt = a.attempt || 1;
    out.push({kind: 'step', step: a.step_id, attempt, label: `${a.step_id}${attempt > 1 ? ' #' + attempt : ''}`,
      items: [{start: ms(sp.start), end: ms(sp.end), status, open,
        title: `${sp.name} attempt ${attempt}${a.epoch ? ' epoch ' + a.epoch : ''}\n${attrText(a)}`}]});
  }
  const byKind = new Map();
  for (const sp of spans.filter((x) => x.kind !== 'run' && x.kind !== 'step')) {
    if (!byKind.has(sp.name)) {
      const row = {kind: 'event', label: sp.name, event: sp.name, items: []};
      byKind.set(sp.name, row);
      out.push(row);
    }
    byKind.get(sp.name).items.push({start: ms(sp.start), end: ms(sp.end), status: sp.name,
      title: `${sp.name} at ${sp.start}\n${attrText(sp.attributes)}`});
  }
  return out;
}

// drawTimeline renders spans into container.
export function drawTimeline(container, spans, {width} = {}) {
  clear(container);
  const rs = rows(spans);
  const times = rs.flatMap((r) => r.items.flatMap((it) => [it.start, it.end])).filter((t) => t !== null);
  if (rs.length === 0 || times.length === 0) {
    container.append(h('p', {class: 'muted'}, 'No spans yet.'));
    return;
  }
  const t0 = Math.min(...times);
  const t1 = Math.max(...times);
  const range = Math.max(t1 - t0, 1);
  const W = Math.max(width || container.clientWidth || 1000, 600);
  const plotW = W - LABEL_W - PAD_R;
  const x = (t) => LABEL_W + ((t - t0) / range) * plotW;
  const H = AXIS_H + rs.length * ROW_H + 8;
  const svg = s('svg', {class: 'timeline', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'trace timeline'});
  svg.append(s('defs', {}, s('pattern', {id: 'hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)'},
    s('rect', {width: 6, height: 6, class: 'hatch-bg'}), s('line', {x1: 0, y1: 0, x2: 0, y2: 6, class: 'hatch-line'}))));

  // Axis and grid.
  const step = niceStep(range, 8);
  const axis = s('g', {class: 'axis'});
  for (let t = 0; t <= range + 1e-9; t += step) {
    const px = x(t0 + t);
    axis.append(s('line', {x1: px, x2: px, y1: AXIS_H - 6, y2: H, class: 'grid'}),
      s('text', {x: px, y: AXIS_H - 10, 'text-anchor': 'middle'}, t === 0 ? '0' : '+' + fmtDuration(t)));
  }
  svg.append(axis);

  rs.forEach((r, i) => {
    const y = AXIS_H + i * ROW_H;
    const g = s('g', {class: ['row', 'row-' + r.kind].join(' '), 'data-kind': r.kind,
      'data-step': r.step || null, 'data-attempt': r.attempt || null, 'data-event': r.event || null});
    if (i % 2 === 1) g.append(s('rect', {class: 'stripe', x: 0, y, width: W, height: ROW_H}));
    g.append(s('text', {class: 'row-label', x: 8, y: y + ROW_H / 2 + 4}, r.label.length > 28 ? r.label.slice(0, 27) + '…' : r.label));
    for (const it of r.items) {
      const cy = y + ROW_H / 2;
      if (r.kind === 'event') {
        const px = x(it.start);
        const d = 5;
        g.append(s('path', {class: 'marker', 'data-event': it.status, d: `M${px},${cy - d} L${px + d},${cy} L${px},${cy + d} L${px - d},${cy} z`},
          s('title', {}, it.title)));
        continue;
      }
      const x1 = x(it.start);
      const x2 = Math.max(x(it.end ?? it.start), x1 + 2);
      g.append(s('rect', {class: 'bar', 'data-status': it.status, x: x1, y: cy - BAR_H / 2, width: x2 - x1, height: BAR_H, rx: 3},
        s('title', {}, it.title)));
      // Entries committed together share a time: a zero-length attempt has no label.
      const d = (it.end ?? it.start) - it.start;
      const dur = (d > 0 ? fmtDuration(d) : '') + (it.open ? ' open' : '');
      if (dur) g.append(s('text', {class: 'bar-label', x: x2 + 4, y: cy + 4}, dur));
    }
    svg.append(g);
  });

  // Recovery: a dashed line across every row at each recovery event.
  for (const r of rs.filter((x) => x.event === 'recovery')) {
    for (const it of r.items) {
      const px = x(it.start);
      svg.append(s('line', {class: 'recovery-line', x1: px, x2: px, y1: AXIS_H - 4, y2: H}, s('title', {}, it.title)));
    }
  }
  container.append(svg);
}
