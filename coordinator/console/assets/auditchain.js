// auditchain.js: the audit ledger's hash chain, recomputed in the browser
// with WebCrypto, independently of the server: the same canonical bytes as
// shared/auditchain (Go's encoding/json of the entry's fields but hash, in
// a fixed order, strings escaped as Go escapes them, the detail as the
// compact JSON text it was sealed with), SHA-256, and the same first-break
// rules as its Verifier (R-CON-4). integration/console proves both sides
// agree.
//
// The module touches no DOM.

// parseRaw parses a JSON document like JSON.parse, and gives every object
// a non-enumerable __raw map from its keys to the exact source text of
// their values, so a detail is hashed as it was sent, not re-serialized.
export function parseRaw(text) {
  let i = 0;
  const ws = () => { while (i < text.length && ' \t\n\r'.includes(text[i])) i++; };
  const fail = (what) => { throw new SyntaxError(`JSON: ${what} at ${i}`); };
  function value() {
    ws();
    const c = text[i];
    if (c === '{') return object();
    if (c === '[') return array();
    if (c === '"') return string();
    const m = /^(?:-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 400));
    if (!m) fail('unexpected character');
    i += m[0].length;
    return JSON.parse(m[0]);
  }
  function string() {
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    if (i >= text.length) fail('unterminated string');
    i++;
    return JSON.parse(text.slice(start, i));
  }
  function array() {
    i++;
    const out = [];
    ws();
    if (text[i] === ']') { i++; return out; }
    for (;;) {
      out.push(value());
      ws();
      if (text[i] === ',') { i++; continue; }
      if (text[i] === ']') { i++; return out; }
      fail('expected , or ]');
    }
  }
  function object() {
    i++;
    const out = {};
    const raw = new Map();
    Object.defineProperty(out, '__raw', { value: raw, enumerable: false });
    ws();
    if (text[i] === '}') { i++; return out; }
    for (;;) {
      ws();
      if (text[i] !== '"') fail('expected a key');
      const k = string();
      ws();
      if (text[i] !== ':') fail('expected :');
      i++;
      ws();
      const start = i;
      out[k] = value();
      raw.set(k, text.slice(start, i));
      ws();
      if (text[i] === ',') { i++; continue; }
      if (text[i] === '}') { i++; return out; }
      fail('expected , or }');
    }
  }
  const v = value();
  ws();
  if (i !== text.length) fail('trailing data');
  return v;
}

const HEX = '0123456789abcdef';

// goString quotes s exactly as Go's encoding/json does (HTML-safe): ", \
// and control characters escaped, \b \f \n \r \t short, <, > and & as
// \u003c \u003e \u0026, and U+2028 and U+2029 escaped.
export function goString(s) {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (c === 8) out += '\\b';
    else if (c === 12) out += '\\f';
    else if (c === 10) out += '\\n';
    else if (c === 13) out += '\\r';
    else if (c === 9) out += '\\t';
    else if (c < 0x20 || ch === '<' || ch === '>' || ch === '&') out += `\\u00${HEX[c >> 4]}${HEX[c & 15]}`;
    else if (c === 0x2028 || c === 0x2029) out += `\\u${c.toString(16)}`;
    else if (c >= 0xd800 && c <= 0xdfff) out += '\\ufffd'; // a lone surrogate: Go writes U+FFFD
    else out += ch;
  }
  return `${out}"`;
}

// compactRaw removes the whitespace outside strings of a JSON text and
// escapes <, >, &, U+2028 and U+2029 inside them, as Go's json.Compact
// followed by its HTML-safe marshalling of a RawMessage does.
export function compactRaw(raw) {
  let out = '';
  let inStr = false;
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i];
    if (inStr) {
      if (ch === '\\') { out += ch + raw[i + 1]; i++; continue; }
      if (ch === '"') inStr = false;
      if (ch === '<' || ch === '>' || ch === '&') out += `\\u00${HEX[ch.charCodeAt(0) >> 4]}${HEX[ch.charCodeAt(0) & 15]}`;
      else if (ch === '\u2028' || ch === '\u2029') out += `\\u${ch.charCodeAt(0).toString(16)}`;
      else out += ch;
      continue;
    }
    if (ch === '"') inStr = true;
    if (' \t\n\r'.includes(ch)) continue;
    out += ch;
  }
  return out;
}

// goTime is Go's time.Time.UTC().Format(time.RFC3339Nano) of an RFC 3339
// instant: UTC, the fraction without trailing zeros (none when zero).
export function goTime(s) {
  const m = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|([+-])(\d\d):(\d\d))$/i.exec(s || '');
  if (!m) return s;
  let ms = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]);
  if (m[8].toUpperCase() !== 'Z') ms -= (m[9] === '-' ? -1 : 1) * (+m[10] * 60 + +m[11]) * 60000;
  const d = new Date(ms);
  const p2 = (n) => String(n).padStart(2, '0');
  const frac = (m[7] || '').replace(/0+$/, '');
  return `${String(d.getUTCFullYear()).padStart(4, '0')}-${p2(d.getUTCMonth() + 1)}-${p2(d.getUTCDate())}T${p2(d.getUTCHours())}:${p2(d.getUTCMinutes())}:${p2(d.getUTCSeconds())}${frac ? `.${frac}` : ''}Z`;
}

// canonical is the text the entry's hash covers (shared/auditchain's
// Canonical). e is an entry from parseRaw, so e.__raw holds the detail's
// source text.
export function canonical(e) {
  const a = e.actor || {};
  const t = e.target || {};
  const raw = e.__raw && e.__raw.get('detail');
  const detail = raw === undefined || raw === '' ? 'null' : compactRaw(raw);
  let actor = `{"credential_id":${goString(a.credential_id || '')}`;
  if (a.principal_id) actor += `,"principal_id":${goString(a.principal_id)}`;
  actor += `,"kind":${goString(a.kind || '')}}`;
  // apitypes.AuditTarget's fields in declaration order, each omitted when
  // empty (omitempty).
  const tp = [];
  for (const k of ['run_ref', 'workspace_ref', 'profile_ref', 'node_id', 'principal_id', 'credential_id', 'secret_ref', 'webhook_id', 'tenant']) {
    if (t[k]) tp.push(`"${k}":${goString(t[k])}`);
  }
  return `{"seq":${e.seq},"at":${goString(goTime(e.at))},"tenant":${goString(e.tenant)},"actor":${actor},"event":${goString(e.event)},` +
    `"target":{${tp.join(',')}},"detail":${detail},"prev":${goString(e.prev || '')}}`;
}

export async function sha256hex(text) {
  const buf = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return [...new Uint8Array(buf)].map((b) => HEX[b >> 4] + HEX[b & 15]).join('');
}

export function hashOf(e) { return sha256hex(canonical(e)); }

// Verifier checks a tenant's chain entry by entry, in seq order, with the
// Go Verifier's rules and reasons; add() returns the first break so far.
export class Verifier {
  constructor() {
    this.prev = { seq: 0, hash: '', tenant: '' };
    this.n = 0;
    this.broke = null;
  }

  async add(e) {
    if (this.broke) return this.broke;
    const fail = (reason) => { this.broke = { seq: e.seq, reason }; return this.broke; };
    if (e.seq !== this.prev.seq + 1) return fail(`seq ${e.seq} follows seq ${this.prev.seq}: an entry is missing or out of order`);
    if ((e.prev || '') !== this.prev.hash) return fail(`prev "${e.prev || ''}" is not the hash of entry ${this.prev.seq} ("${this.prev.hash}"): an earlier entry was changed or removed`);
    if (this.n > 0 && e.tenant !== this.prev.tenant) return fail(`tenant "${e.tenant}" in the chain of tenant "${this.prev.tenant}"`);
    const h = await hashOf(e);
    if (h !== e.hash) return fail(`hash "${e.hash}" does not match its content ("${h}"): the entry was changed`);
    this.prev = { seq: e.seq, hash: e.hash, tenant: e.tenant };
    this.n++;
    return null;
  }

  get count() { return this.n; }
  get head() { return this.prev.hash; }
}
