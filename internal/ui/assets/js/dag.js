// dag.js: lays out a pipeline's steps as a layered graph (left to right, one column per
// depth) and draws it as inline SVG. Nodes carry data-step and data-status attributes; the
// stylesheet colours them by status.

import {s, clear} from './dom.js';

const NODE_W = 176;
const NODE_H = 48;
const COL_GAP = 72;
const ROW_GAP = 20;
const PAD = 16;

// layout assigns each step a column (its longest path from a root) and a row, ordering each
// column by the mean row of the step's dependencies to keep edges short. steps: [{id, needs}]
// in pipeline order. It returns {nodes: Map id → {id, col, row, x, y}, edges: [{from, to}],
// width, height}.
export function layout(steps) {
  const byId = new Map(steps.map((st) => [st.id, st]));
  const col = new Map();
  const visiting = new Set();
  const depth = (id) => {
    if (col.has(id)) return col.get(id);
    if (visiting.has(id)) return 0; // a cycle: the node validated it away, draw it anyway
    visiting.add(id);
    const st = byId.get(id);
    let d = 0;
    for (const n of (st && st.needs) || []) {
      if (byId.has(n)) d = Math.max(d, depth(n) + 1);
    }
    visiting.delete(id);
    col.set(id, d);
    return d;
  };
  steps.forEach((st) => depth(st.id));
  const columns = [];
  steps.forEach((st) => {
    const c = col.get(st.id);
    (columns[c] = columns[c] || []).push(st.id);
  });
  const row = new Map();
  columns.forEach((ids, c) => {
    if (c > 0) {
      const score = (id) => {
        const ps = (byId.get(id).needs || []).filter((n) => row.has(n));
        return ps.length ? ps.reduce((a, n) => a + row.get(n), 0) / ps.length : Infinity;
      };
      const pos = new Map(ids.map((id, i) => [id, i]));
      ids.sort((a, b) => (score(a) - score(b)) || (pos.get(a) - pos.get(b)));
    }
    ids.forEach((id, i) => row.set(id, i));
  });
  const tallest = Math.max(1, ...columns.map((ids) => (ids || []).length));
  const height = PAD * 2 + tallest * NODE_H + (tallest - 1) * ROW_GAP;
  const nodes = new Map();
  columns.forEach((ids, c) => {
    const colH = ids.length * NODE_H + (ids.length - 1) * ROW_GAP;
    const top = (height - colH) / 2;
    ids.forEach((id, i) => {
      nodes.set(id, {id, col: c, row: i, x: PAD + c * (NODE_W + COL_GAP), y: top + i * (NODE_H + ROW_GAP)});
    });
  });
  const edges = [];
  steps.forEach((st) => (st.needs || []).forEach((n) => {
    if (nodes.has(n)) edges.push({from: n, to: st.id});
  }));
  const width = PAD * 2 + columns.length * NODE_W + Math.max(0, columns.length - 1) * COL_GAP;
  return {nodes, edges, width, height};
}

function label(text, max) {
  return text.length > max ? text.slice(0, max - 1) + '…' : text;
}

// Graph is a drawn DAG whose node states can be updated in place.
export class Graph {
  // steps: [{id, uses, needs}]; the SVG is appended to container.
  constructor(container, steps) {
    this.lay = layout(steps);
    this.uses = new Map(steps.map((st) => [st.id, st.uses || '']));
    this.nodes = new Map();
    const {width, height} = this.lay;
    const svg = s('svg', {class: 'dag', width, height, viewBox: `0 0 ${width} ${height}`,
      role: 'img', 'aria-label': 'pipeline graph'});
    svg.append(s('defs', {}, s('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'}, s('path', {d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead'}))));
    const edgeLayer = s('g', {class: 'edges'});
    for (const e of this.lay.edges) {
      const a = this.lay.nodes.get(e.from);
      const b = this.lay.nodes.get(e.to);
      const x1 = a.x + NODE_W;
      const y1 = a.y + NODE_H / 2;
      const x2 = b.x - 2;
      const y2 = b.y + NODE_H / 2;
      const mx = (x1 + x2) / 2;
      edgeLayer.append(s('path', {class: 'edge', 'data-from': e.from, 'data-to': e.to,
        d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, 'marker-end': 'url(#arrow)'}));
    }
    svg.append(edgeLayer);
    this.svg = svg;
    const nodeLayer = s('g', {class: 'nodes'});
    for (const [id, n] of this.lay.nodes) {
      const title = s('title', {}, id);
      const status = s('text', {class: 'node-status', x: 12, y: 36});
      const g = s('g', {class: 'node', 'data-step': id, 'data-status': 'pending', transform: `translate(${n.x},${n.y})`},
        title,
        s('rect', {width: NODE_W, height: NODE_H, rx: 8, ry: 8}),
        s('circle', {class: 'dot', cx: NODE_W - 14, cy: 14, r: 5}),
        s('text', {class: 'node-id', x: 12, y: 20}, label(id, 20)),
        status);
      nodeLayer.append(g);
      this.nodes.set(id, {g, status, title});
      this.set(id, {status: 'pending'});
    }
    svg.append(nodeLayer);
    clear(container).append(svg);
  }

  // set updates a step's status, attempts and error (tooltip); label replaces the status
  // word (e.g. "not run").
  set(id, {status, attempts, error, label: word}) {
    const n = this.nodes.get(id);
    if (!n) return;
    n.g.setAttribute('data-status', status);
    const parts = [this.uses.get(id), word || status];
    if (attempts > 1) parts.push(`attempt ${attempts}`);
    n.status.textContent = label(parts.filter(Boolean).join(' · '), 28);
    n.title.textContent = [id, ...parts.filter(Boolean), error].filter(Boolean).join('\n');
    for (const e of this.svg.querySelectorAll(`.edge`)) {
      if (e.getAttribute('data-from') === id) e.setAttribute('data-status', status);
    }
  }
}
