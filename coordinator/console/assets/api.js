// api.js: the console's client of the public API. Every call is an
// ordinary API request (same routes as the CLI), authenticated by the
// session cookie and scoped by the X-Olivares-Tenant header, which also
// makes every write a request a cross-site form cannot send.

export const BASE = '/v1/m/sessions';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code || '';
  }
}

// Plain words for the codes a person meets most; the server's own message
// follows them (R-API-4), never replaced by "error".
const HINTS = {
  conversation_unavailable: 'The tool no longer has this conversation, so it cannot be resumed; Olivares never starts a fresh conversation in its place.',
  cross_site_refused: 'This request did not come from the console\'s own page.',
  session_expired: 'Your console session has expired.',
  credential_outdated: 'Your console session predates per-tenant sign-ins; sign in again.',
  too_many_failures: 'Too many failed sign-ins from this address; wait, then try again.',
};

export function explain(err) {
  if (!(err instanceof ApiError)) return String(err && err.message || err);
  const hint = HINTS[err.code];
  if (err.status === 403 && err.code === 'permission_denied') {
    const m = /lacks (\S+)/.exec(err.message);
    return m ? `You do not have the ${m[1]} permission in this tenant. ${err.message}` : err.message;
  }
  if (err.status === 409 && !hint) return `Not possible right now: ${err.message}`;
  return hint ? `${hint} (${err.message})` : err.message;
}

export const session = {
  tenant: localStorage.getItem('olivares.tenant') || '',
  me: null,       // GET /v1/tenants
  whoami: null,   // GET /v1/whoami in the tenant
  onUnauthenticated: () => {},
  setTenant(t) {
    this.tenant = t;
    localStorage.setItem('olivares.tenant', t);
  },
  can(perm) {
    return !!(this.whoami && this.whoami.permissions && this.whoami.permissions.includes(perm));
  },
};

export async function api(method, path, body, opts = {}) {
  const headers = { Accept: 'application/json' };
  if (session.tenant && !opts.noTenant) headers['X-Olivares-Tenant'] = session.tenant;
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'network', 'The coordinator cannot be reached; check that it is running.');
  }
  if (resp.status === 204) return null;
  let data = null;
  const text = await resp.text();
  if (text) {
    // opts.parse reads the body another way (the audit page keeps each
    // detail's source text to hash it).
    try { data = (opts.parse || JSON.parse)(text); } catch { data = null; }
  }
  if (!resp.ok) {
    const e = data && data.error ? data.error : {};
    const err = new ApiError(resp.status, e.code, e.message || `${resp.status} ${resp.statusText}`);
    err.body = data;
    if (resp.status === 401 && !opts.quiet401) session.onUnauthenticated(err);
    throw err;
  }
  return { status: resp.status, data };
}

export const get = (p, o) => api('GET', p, undefined, o).then((r) => r.data);

// Attach follows GET /runs/{ref}/attach as SSE read over fetch (an
// EventSource cannot send the tenant header). It keeps the last seq and,
// after any drop that is not a proper end (a coordinator restart, a tunnel
// loss, a slow-viewer drop), reconnects with from=last+1: no gap, no
// duplicate (R-RC-1, R-RC-6). `:` keep-alive comments are ignored.
export class Attach {
  constructor(ref, { from, onEvent, onState }) {
    this.ref = ref;
    this.next = from; // the seq to ask for; undefined = oldest retained
    this.onEvent = onEvent;
    this.onState = onState || (() => {});
    this.closed = false;
    this.ctrl = null;
    this.retry = 250;
    this.finished = false;
  }

  start() { this.loop(); return this; }

  close() {
    this.closed = true;
    if (this.ctrl) this.ctrl.abort();
  }

  async loop() {
    while (!this.closed) {
      this.finished = false;
      const ok = await this.once();
      if (this.closed || this.finished) return;
      this.onState(ok ? 'reconnecting' : 'retrying');
      await new Promise((r) => setTimeout(r, this.retry));
      this.retry = Math.min(this.retry * 2, 4000);
    }
  }

  async once() {
    this.ctrl = new AbortController();
    const q = this.next === undefined ? '' : `?from=${this.next}`;
    let resp;
    try {
      resp = await fetch(`${BASE}/runs/${encodeURIComponent(this.ref)}/attach${q}`, {
        headers: { 'X-Olivares-Tenant': session.tenant, Accept: 'text/event-stream' },
        credentials: 'same-origin', cache: 'no-store', signal: this.ctrl.signal,
      });
    } catch {
      return false;
    }
    if (!resp.ok) {
      let e = {};
      try { e = (await resp.json()).error || {}; } catch { /* not JSON */ }
      const err = new ApiError(resp.status, e.code, e.message);
      if (resp.status === 401) session.onUnauthenticated(err);
      // 429 too_many_attaches passes once a viewer closes: try again.
      if (resp.status >= 400 && resp.status < 500 && resp.status !== 429) {
        this.finished = true;
        this.onState('refused', err);
      }
      return false;
    }
    this.onState('open');
    this.retry = 250;
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    let ev = { name: '', id: '', data: [] };
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          let line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.endsWith('\r')) line = line.slice(0, -1);
          if (line === '') {
            if (ev.name || ev.data.length) this.dispatch(ev);
            ev = { name: '', id: '', data: [] };
            if (this.finished) { this.ctrl.abort(); return true; }
            continue;
          }
          if (line.startsWith(':')) continue; // keep-alive comment
          const c = line.indexOf(':');
          const field = c < 0 ? line : line.slice(0, c);
          let val = c < 0 ? '' : line.slice(c + 1);
          if (val.startsWith(' ')) val = val.slice(1);
          if (field === 'event') ev.name = val;
          else if (field === 'data') ev.data.push(val);
          else if (field === 'id') ev.id = val;
        }
      }
    } catch {
      return !this.closed;
    }
    return true;
  }

  dispatch(ev) {
    const name = ev.name || 'message';
    let data = null;
    try { data = JSON.parse(ev.data.join('\n')); } catch { data = null; }
    if (ev.id !== '') {
      const seq = Number(ev.id);
      if (this.next !== undefined && seq < this.next) return; // never twice
      this.next = seq + 1;
    }
    if (name === 'lag' && data) this.next = Math.max(this.next || 0, data.resumed_from);
    if (name === 'end') {
      // A dropped slow viewer is told so (older coordinators) or simply
      // cut off: either way it comes back at last+1.
      if (data && data.reason === 'slow_viewer') {
        this.onEvent(name, data, ev.id);
        return;
      }
      this.finished = true;
    }
    if (name === 'notice') this.finished = true;
    this.onEvent(name, data, ev.id);
  }
}
