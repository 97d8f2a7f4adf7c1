// dom.js: element builders and formatting helpers. Text always goes in as text nodes, never
// as HTML, so data from the API cannot inject markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'class') {
      el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// h builds an HTML element: h('a', {href: '#/runs', class: 'x'}, 'text', child, [more]).
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// s builds an SVG element.
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

// clear empties an element.
export function clear(el) {
  el.replaceChildren();
  return el;
}

export const FINAL_RUN = new Set(['succeeded', 'failed', 'cancelled']);
export const RUN_STATUSES = ['queued', 'scale_out_requested', 'dispatched', 'running', 'paused',
  'succeeded', 'failed', 'cancelled'];

// badge is a coloured status label.
export function badge(status, extra) {
  return h('span', {class: ['badge', 'st-' + (status || 'unknown'), extra]}, status || 'unknown');
}

// fmtDuration formats milliseconds: 0.4ms, 12ms, 1.25s, 2m03s, 1h02m.
export function fmtDuration(ms) {
  if (ms === null || ms === undefined || !isFinite(ms)) return '';
  if (ms < 0) ms = 0;
  if (ms < 1) return (ms * 1000).toFixed(0) + 'µs';
  if (ms < 1000) return (ms < 10 ? ms.toFixed(1) : ms.toFixed(0)) + 'ms';
  const sec = ms / 1000;
  if (sec < 60) return (sec < 10 ? sec.toFixed(2) : sec.toFixed(1)) + 's';
  const m = Math.floor(sec / 60);
  if (m < 60) return m + 'm' + String(Math.floor(sec % 60)).padStart(2, '0') + 's';
  return Math.floor(m / 60) + 'h' + String(m % 60).padStart(2, '0') + 'm';
}

// ms parses an RFC 3339 time into epoch milliseconds with sub-millisecond precision, or null.
export function ms(iso) {
  if (!iso || iso.startsWith('0001-')) return null;
  const base = Date.parse(iso);
  if (isNaN(base)) return null;
  const frac = /\.(\d+)/.exec(iso);
  if (!frac || frac[1].length <= 3) return base;
  return base + Number('0.' + frac[1].slice(3)) ;
}

// fmtTime shows a time in the browser's zone: HH:MM:SS, with the date unless it is today.
export function fmtTime(iso) {
  const t = ms(iso);
  if (t === null) return '';
  const d = new Date(t);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  const hms = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  const today = new Date();
  if (d.toDateString() === today.toDateString()) return hms;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hms}`;
}

// timeCell is a <time> element showing fmtTime with the full ISO time as its tooltip.
export function timeCell(iso) {
  if (!iso || iso.startsWith('0001-')) return h('span', {class: 'muted'}, '—');
  return h('time', {datetime: iso, title: iso}, fmtTime(iso));
}

// ago formats how long ago an RFC 3339 time was.
export function ago(iso) {
  const t = ms(iso);
  if (t === null) return 'never';
  return fmtDuration(Math.max(0, Date.now() - t)) + ' ago';
}

// shortId abbreviates long generated ids (run-01a2…-df0af776) for tables; the full id goes
// in the title.
export function shortId(id) {
  if (!id || id.length <= 22) return id || '';
  return id.slice(0, 12) + '…' + id.slice(-8);
}

// json pretty-prints a JSON value, compactly for short values.
export function json(v) {
  if (v === undefined) return '';
  const one = JSON.stringify(v);
  if (one && one.length <= 80) return one;
  return JSON.stringify(v, null, 2);
}

// table builds a table: columns [{label, cell: row => Node|string, class}], rows.
export function table(columns, rows, {rowAttrs, empty = 'Nothing to show.'} = {}) {
  const head = h('thead', {}, h('tr', {}, columns.map((c) => h('th', {class: c.class}, c.label))));
  const body = h('tbody', {}, rows.map((r) =>
    h('tr', rowAttrs ? rowAttrs(r) : {}, columns.map((c) => h('td', {class: c.class}, c.cell(r))))));
  if (rows.length === 0) {
    body.append(h('tr', {class: 'empty'}, h('td', {colspan: columns.length}, empty)));
  }
  return h('table', {class: 'grid'}, head, body);
}

// sleep resolves after d ms, or rejects with an AbortError when signal aborts.
export function sleep(d, signal) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) {
      reject(new DOMException('aborted', 'AbortError'));
      return;
    }
    const t = setTimeout(resolve, d);
    signal && signal.addEventListener('abort', () => {
      clearTimeout(t);
      reject(new DOMException('aborted', 'AbortError'));
    }, {once: true});
  });
}

// every calls fn every d ms until signal aborts, never overlapping calls; it skips ticks
// while the tab is hidden. The first call is after d ms (the page has just loaded its data).
export async function every(d, signal, fn) {
  for (;;) {
    try {
      await sleep(d, signal);
    } catch {
      return;
    }
    if (!document.hidden) {
      try {
        await fn();
      } catch (e) {
        if (isAbort(e)) return;
        console.warn('refresh failed', e);
      }
    }
  }
}

export function isAbort(e) {
  return e && e.name === 'AbortError';
}
