// api.js: calls to the dair HTTP API with the user's bearer token, and a reader of the run
// event streams (Server-Sent Events) over fetch, because EventSource cannot send headers.

import {sleep, isAbort, FINAL_RUN} from './dom.js';

const TOKEN_KEY = 'dair.token';

// getToken returns the bearer token kept for this tab, or ''.
export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

// setToken keeps the token for this tab (sessionStorage: gone when the tab closes).
export function setToken(tok) {
  tok = (tok || '').trim().replace(/^Bearer\s+/i, '');
  if (tok) sessionStorage.setItem(TOKEN_KEY, tok);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// claims decodes the token's payload for display only (the node verifies it); null when
// there is no token or it is not a JWT.
export function claims() {
  const tok = getToken();
  const part = tok.split('.')[1];
  if (!part) return null;
  try {
    const b64 = part.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(part.length / 4) * 4, '=');
    const text = new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
    const c = JSON.parse(text);
    return c && typeof c === 'object' ? c : null;
  } catch {
    return null;
  }
}

// hasRole reports whether the token names role or a role that includes it (admin ⊃ operator
// ⊃ tenant). Without a token the answer is unknown (null): with auth off everyone is admin.
export function hasRole(role) {
  const c = claims();
  if (!c) return null;
  const rank = {tenant: 1, operator: 2, admin: 3};
  const roles = Array.isArray(c.roles) ? c.roles : [];
  return roles.some((r) => (rank[r] || 0) >= rank[role]);
}

// ApiError is a failed API call: status 0 means the node could not be reached.
export class ApiError extends Error {
  constructor(status, code, message, path) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.path = path;
  }
}

function headers(extra) {
  const hd = {Accept: 'application/json', ...extra};
  const tok = getToken();
  if (tok) hd.Authorization = 'Bearer ' + tok;
  return hd;
}

async function errorFrom(resp, path) {
  let text = '';
  try {
    text = await resp.text();
  } catch {
    // keep the status line only
  }
  let detail = {};
  try {
    detail = (JSON.parse(text) || {}).error || {};
  } catch {
    // not a JSON error body
  }
  return new ApiError(resp.status, detail.code || 'http_' + resp.status,
    detail.message || text.trim() || resp.statusText, path);
}

async function send(method, path, body, signal, extraHeaders) {
  const init = {method, headers: headers(extraHeaders), signal, cache: 'no-store'};
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  try {
    return await fetch(path, init);
  } catch (e) {
    if (isAbort(e)) throw e;
    throw new ApiError(0, 'unreachable', 'cannot reach the node: ' + e.message, path);
  }
}

// api sends a request and returns the decoded JSON answer; it throws ApiError on a 4xx/5xx.
export async function api(method, path, {body, signal} = {}) {
  const resp = await send(method, path, body, signal);
  if (!resp.ok) throw await errorFrom(resp, path);
  const text = await resp.text();
  return text ? JSON.parse(text) : null;
}

export const get = (path, signal) => api('GET', path, {signal});

// readEvents reads one SSE response to its end, calling onEvent({id, event, data}) per event
// (data parsed as JSON).
async function readEvents(resp, onEvent) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  let ev = {id: null, event: 'message', data: []};
  const dispatch = () => {
    if (ev.data.length === 0 && ev.id === null) return;
    let data = ev.data.join('\n');
    try {
      data = JSON.parse(data);
    } catch {
      // keep the raw text
    }
    onEvent({id: ev.id, event: ev.event, data});
    ev = {id: null, event: 'message', data: []};
  };
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buf += decoder.decode(value, {stream: true});
    let nl;
    while ((nl = buf.search(/\r?\n/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(buf[nl] === '\r' ? nl + 2 : nl + 1);
      if (line === '') {
        dispatch();
        continue;
      }
      if (line.startsWith(':')) continue; // heartbeat comment
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'id') ev.id = value;
      else if (field === 'event') ev.event = value;
      else if (field === 'data') ev.data.push(value);
    }
  }
  dispatch();
}

const TERMINAL = new Set(['run_succeeded', 'run_failed', 'run_cancelled']);

// followRun streams a run's events from GET /v1/runs/{id}/events until its terminal event or
// until signal aborts, reconnecting with Last-Event-ID after a drop so that no event is lost
// or repeated. onEvent gets each event; onState gets 'live', 'reconnecting' or 'ended'. It
// throws ApiError when the stream is refused (401, 403, 404).
export async function followRun(runId, {signal, onEvent, onState = () => {}}) {
  let lastId = null;
  let ended = false;
  let delay = 500;
  const path = '/v1/runs/' + encodeURIComponent(runId) + '/events';
  while (!ended) {
    let resp;
    try {
      resp = await send('GET', path, undefined, signal,
        lastId === null ? {Accept: 'text/event-stream'} : {Accept: 'text/event-stream', 'Last-Event-ID': lastId});
    } catch (e) {
      if (isAbort(e)) return;
      onState('reconnecting');
      await sleep(delay, signal).catch(() => {});
      if (signal.aborted) return;
      delay = Math.min(delay * 2, 5000);
      continue;
    }
    if (!resp.ok) {
      const err = await errorFrom(resp, path);
      if (resp.status >= 500) {
        onState('reconnecting');
        await sleep(delay, signal).catch(() => {});
        if (signal.aborted) return;
        continue;
      }
      throw err;
    }
    onState('live');
    delay = 500;
    let clean = true;
    try {
      await readEvents(resp, (ev) => {
        if (ev.id !== null) lastId = ev.id;
        if (TERMINAL.has(ev.event)) ended = true;
        onEvent(ev);
      });
    } catch (e) {
      if (isAbort(e) || signal.aborted) return;
      clean = false;
    }
    if (ended) break;
    if (clean) {
      // The server ended the stream without a terminal event (it is shutting down, or the
      // run ended before the resume point): stop if the run is final, else resume.
      try {
        const run = await api('GET', '/v1/runs/' + encodeURIComponent(runId), {signal});
        if (FINAL_RUN.has(run.status)) break;
      } catch (e) {
        if (isAbort(e)) return;
      }
    }
    onState('reconnecting');
    await sleep(delay, signal).catch(() => {});
    if (signal.aborted) return;
  }
  onState('ended');
}
