// main.js: the dashboard's shell: hash routes, the token field, and page lifetimes. Each
// page module exports render(view); the view's signal aborts when the user leaves the page,
// which stops its timers and event streams.

import {clear, isAbort} from './dom.js';
import {getToken, setToken, claims} from './api.js';
import {errorBox} from './view.js';
import * as runs from './pages/runs.js';
import * as run from './pages/run.js';
import * as tenants from './pages/tenants.js';
import * as instances from './pages/instances.js';
import * as cluster from './pages/cluster.js';

const routes = [
  {re: /^\/runs\/([^/]+)(?:\/(graph|trace|ledger|replay))?$/, page: run, nav: 'runs',
    params: (m) => ({id: decodeURIComponent(m[1]), tab: m[2] || 'graph'})},
  {re: /^\/runs$/, page: runs, nav: 'runs'},
  {re: /^\/tenants$/, page: tenants, nav: 'tenants'},
  {re: /^\/instances$/, page: instances, nav: 'instances'},
  {re: /^\/cluster$/, page: cluster, nav: 'cluster'},
];

let current = null; // the AbortController of the page on screen

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/runs';
  const [path, qs] = raw.split('?');
  return {path, query: new URLSearchParams(qs || '')};
}

async function route() {
  if (current) current.abort();
  const ctl = new AbortController();
  current = ctl;
  const main = document.getElementById('main');
  const {path, query} = parseHash();
  const r = routes.find((x) => x.re.test(path));
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', !!r && a.dataset.route === r.nav);
  }
  clear(main);
  if (!r) {
    main.append(errorBox({status: 404, code: 'not_found', message: `no page at #${path}`}));
    return;
  }
  const m = path.match(r.re);
  let params = {};
  try {
    params = r.params ? r.params(m) : {};
  } catch (e) { // a malformed percent-escape (#/runs/%ZZ): decodeURIComponent throws URIError
    main.append(errorBox({status: 400, code: 'bad_request', message: `bad address #${path}: ${e.message}`}));
    return;
  }
  const view = {main, path, query, params, signal: ctl.signal};
  main.setAttribute('data-page', r.nav);
  main.setAttribute('aria-busy', 'true');
  try {
    await r.page.render(view);
  } catch (e) {
    if (isAbort(e) || ctl.signal.aborted) return;
    console.error(e);
    main.append(errorBox(e));
  } finally {
    if (!ctl.signal.aborted) main.setAttribute('aria-busy', 'false');
  }
}

function showWho() {
  const who = document.getElementById('who');
  const tok = getToken();
  const c = claims();
  who.classList.remove('warn');
  if (!tok) {
    who.textContent = 'no token';
    who.title = 'Calls are sent without a token: fine when the node runs with --auth none.';
    return;
  }
  if (!c) {
    who.textContent = 'token set';
    who.title = '';
    return;
  }
  const roles = Array.isArray(c.roles) ? c.roles.join(',') : '';
  let text = `${c.tenant_id || '?'} · ${roles}`;
  if (c.exp && c.exp * 1000 < Date.now()) {
    text += ' · expired';
    who.classList.add('warn');
  }
  who.textContent = text;
  who.title = `sub ${c.sub || '?'}, org ${c.org_id || '?'}` + (c.exp ? `, expires ${new Date(c.exp * 1000).toLocaleString()}` : '');
}

function init() {
  const form = document.getElementById('auth');
  const input = document.getElementById('token');
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    setToken(input.value);
    input.value = '';
    showWho();
    route();
  });
  document.getElementById('token-clear').addEventListener('click', () => {
    setToken('');
    input.value = '';
    showWho();
    route();
  });
  window.addEventListener('hashchange', route);
  showWho();
  route();
}

init();
