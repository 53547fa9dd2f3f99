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
