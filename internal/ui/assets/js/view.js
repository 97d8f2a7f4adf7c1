// view.js: building blocks shared by the pages: error panels, headers, key/value grids.

import {h} from './dom.js';
import {claims} from './api.js';

// errorBox explains a failed call in the user's terms; 401 and 403 say what to do next.
export function errorBox(err) {
  const status = err && err.status;
  let title;
  let hint;
  if (status === 401) {
    title = 'Not signed in';
    hint = 'This node requires a bearer token. Paste one into the token field at the top right ' +
      '(mint a development token with "dair token --tenant T --roles tenant --secret-file F").';
  } else if (status === 403) {
    const c = claims();
    const who = c ? `tenant "${c.tenant_id || '?'}" with roles ${(c.roles || []).join(', ') || 'none'}` : 'this token';
    title = 'Not allowed';
    hint = `The token (${who}) may not see this. Tenants see their own runs and settings; ` +
      'instances, other tenants and cluster members need the operator role.';
  } else if (status === 404) {
    title = 'Not found';
  } else if (status === 0) {
    title = 'Node unreachable';
    hint = 'Is the node still running?';
  } else if (status) {
    title = `Error ${status}`;
  } else {
    title = 'Error';
  }
  return h('div', {class: 'error', role: 'alert', 'data-status': status || ''},
    h('strong', {}, title),
    hint ? h('p', {}, hint) : null,
    h('p', {class: 'detail'}, [err && err.code ? `${err.code}: ` : '', err ? err.message : String(err)]));
}

// pageHeader is a page's title row with optional extra elements on the right.
export function pageHeader(title, ...right) {
  return h('div', {class: 'page-head'}, h('h1', {}, title), h('div', {class: 'page-tools'}, right));
}

// kv is a two-column grid of label/value pairs; entries with undefined values are left out.
export function kv(pairs) {
  return h('dl', {class: 'kv'}, pairs.filter(([, v]) => v !== undefined).map(([k, v]) =>
    [h('dt', {}, k), h('dd', {}, v === '' || v === null ? h('span', {class: 'muted'}, '—') : v)]));
}

// liveDot shows whether a page is following live updates.
export function liveDot(state = 'live') {
  const el = h('span', {class: 'live', 'data-state': state}, state);
  el.set = (st) => {
    el.setAttribute('data-state', st);
    el.textContent = st;
  };
  return el;
}
