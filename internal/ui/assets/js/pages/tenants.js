// tenants.js: each tenant's settings, state and usage. Operators see every stored tenant and
// the tenants seen in recent runs; a tenant token sees its own tenant only.

import {h, badge, fmtDuration, isAbort} from '../dom.js';
import {get, claims} from '../api.js';
import {errorBox, pageHeader, kv} from '../view.js';

// Settings whose zero value means "no limit" rather than "the default".
const UNLIMITED_AT_ZERO = new Set(['max_concurrent_runs', 'max_queued_runs', 'runs_per_second']);
const HIDDEN = new Set(['tenant_id', 'suspended', 'isolation_mode']);

function label(key) {
  return key.replace(/_/g, ' ');
}

function settingValue(key, v) {
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (v === 0 && UNLIMITED_AT_ZERO.has(key)) return h('span', {class: 'muted'}, 'unlimited');
  if (v === '' || v === null || v === undefined) return '';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

export async function render(v) {
  v.main.append(pageHeader('Tenants'));
  const c = claims();
  let tenants;
  let seen = [];
  try {
    tenants = (await get('/v1/tenants', v.signal)).tenants || [];
    // Tenants that submitted runs without stored settings use the shared defaults.
    try {
      const runs = (await get('/v1/runs?limit=500', v.signal)).runs || [];
      const stored = new Set(tenants.map((t) => t.tenant_id));
      seen = [...new Set(runs.map((r) => r.tenant_id))].filter((id) => id && !stored.has(id)).sort();
    } catch (e) {
      if (isAbort(e)) throw e;
    }
  } catch (e) {
    if (isAbort(e) || e.status !== 403 || !c || !c.tenant_id) throw e;
    // A tenant token may not list tenants: show its own.
    try {
      tenants = [await get('/v1/tenants/' + encodeURIComponent(c.tenant_id), v.signal)];
    } catch (e2) {
      if (isAbort(e2) || e2.status !== 404) throw e2;
      tenants = [];
      seen = [c.tenant_id];
    }
  }
  tenants.sort((a, b) => a.tenant_id.localeCompare(b.tenant_id));
  if (tenants.length === 0 && seen.length === 0) {
    v.main.append(h('p', {class: 'muted'}, 'No tenants yet. Put settings with "dair tenants put T --isolation shared|dedicated|hybrid"; ' +
      'a tenant that was never put runs on shared capacity with the defaults.'));
    return;
  }
  const grid = h('div', {class: 'cards'});
  v.main.append(grid);
  const cards = [
    ...tenants.map((t) => tenantCard(t, true)),
    ...seen.map((id) => tenantCard({tenant_id: id, isolation_mode: 'shared'}, false)),
  ];
  grid.append(...cards.map((x) => x.el));
  await Promise.all(cards.map((x) => x.loadUsage(v.signal)));
}

function tenantCard(t, stored) {
  const state = t.suspended ? badge('suspended') : badge('active');
  const settings = stored
    ? kv(Object.keys(t).filter((k) => !HIDDEN.has(k)).map((k) => [label(k), settingValue(k, t[k])]))
    : h('p', {class: 'muted'}, 'No stored settings: runs use shared capacity with the default settings.');
  const usage = h('div', {class: 'usage'}, h('span', {class: 'muted'}, 'loading usage…'));
  const el = h('section', {class: 'card tenant-card', 'data-tenant': t.tenant_id, 'data-suspended': String(!!t.suspended)},
    h('header', {}, h('h2', {}, t.tenant_id), state, h('span', {class: 'chip'}, t.isolation_mode || 'shared'),
      stored ? null : h('span', {class: 'chip muted'}, 'not stored')),
    h('h3', {}, 'Usage'), usage,
    h('h3', {}, 'Settings'), settings,
    h('footer', {}, h('a', {href: '#/runs?tenant=' + encodeURIComponent(t.tenant_id)}, 'runs →'), ' ',
      h('a', {href: '#/instances?tenant=' + encodeURIComponent(t.tenant_id)}, 'instances →')));
  const loadUsage = async (signal) => {
    try {
      const u = await get('/v1/tenants/' + encodeURIComponent(t.tenant_id) + '/usage', signal);
      const tot = u.totals || {};
      usage.replaceChildren(h('div', {class: 'stats'},
        stat('runs', tot.runs), stat('steps', tot.steps), stat('step time', fmtDuration(tot.duration_ms || 0)),
        stat('attempts', tot.attempts), stat('tokens', (tot.prompt_tokens || 0) + (tot.completion_tokens || 0),
          `prompt ${tot.prompt_tokens || 0}, completion ${tot.completion_tokens || 0}`)));
    } catch (e) {
      if (isAbort(e)) return;
      usage.replaceChildren(e.status === 404
        ? h('span', {class: 'muted'}, 'usage is not served by this node')
        : errorBox(e));
    }
  };
  return {el, loadUsage};
}

function stat(name, value, title) {
  return h('div', {class: 'stat', title}, h('div', {class: 'stat-value'}, String(value ?? 0)), h('div', {class: 'stat-name'}, name));
}
