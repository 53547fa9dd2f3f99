// sse.js: server-sent events read over fetch (an EventSource cannot send
// the tenant header), for the attach stream and the change stream alike.
// events() is one response's events as an async iteration; Stream follows
// a route across drops.
import { session, ApiError } from './api.js';

// events yields each event of an SSE body as {name, id, data}, data
// parsed as JSON (null when it is not); `:` keep-alive comments are skipped.
export async function* events(body) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  let ev = { name: '', id: '', data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      let line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (ev.name || ev.data.length) {
          let data = null;
          try { data = JSON.parse(ev.data.join('\n')); } catch { data = null; }
          yield { name: ev.name || 'message', id: ev.id, data };
        }
        ev = { name: '', id: '', data: [] };
        continue;
      }
      if (line.startsWith(':')) continue;
      const c = line.indexOf(':');
      const field = c < 0 ? line : line.slice(0, c);
      let val = c < 0 ? '' : line.slice(c + 1);
      if (val.startsWith(' ')) val = val.slice(1);
      if (field === 'event') ev.name = val;
      else if (field === 'data') ev.data.push(val);
      else if (field === 'id') ev.id = val;
    }
  }
}

// Stream follows an SSE route. After any drop that is not the stream's
// own end (a coordinator restart, a tunnel loss, a slow-viewer drop) it
// connects again, backing off from 250 ms to maxRetry. A 4xx other than
// 429 refuses it for good (a 401 also sends the person to sign in); 429
// passes once a viewer closes, so it tries again.
//
// A subclass says where each connection goes, request() → {url, headers},
// asked anew each time so it can say where to resume (from=,
// Last-Event-ID), and takes each event, receive(ev), which returns true
// when it was the stream's last. onState(state, err) is told 'open',
// 'reconnecting' (an open stream dropped), 'retrying' (a connection
// failed) or 'refused' (err says why); open is true while one is open.
export class Stream {
  constructor({ onState, maxRetry = 4000 }) {
    this.onState = onState || (() => {});
    this.maxRetry = maxRetry;
    this.retry = 250;
    this.open = false;
    this.closed = false;
    this.ctrl = null;
  }

  start() { this.loop(); return this; }

  close() {
    this.closed = true;
    if (this.ctrl) this.ctrl.abort();
  }

  async loop() {
    while (!this.closed) {
      const next = await this.once();
      this.open = false;
      if (this.closed || next === 'done') return;
      this.onState(next);
      await new Promise((r) => setTimeout(r, this.retry));
      this.retry = Math.min(this.retry * 2, this.maxRetry);
    }
  }

  // once reads one connection and says what follows: 'done' (the end, or
  // refused), 'reconnecting' or 'retrying'.
  async once() {
    this.ctrl = new AbortController();
    const { url, headers } = this.request();
    let resp;
    try {
      resp = await fetch(url, {
        headers: { 'X-Olivares-Tenant': session.tenant, Accept: 'text/event-stream', ...headers },
        credentials: 'same-origin', cache: 'no-store', signal: this.ctrl.signal,
      });
    } catch {
      return 'retrying';
    }
    if (!resp.ok) {
      if (resp.status < 400 || resp.status >= 500 || resp.status === 429) return 'retrying';
      let e = {};
      try { e = (await resp.json()).error || {}; } catch { /* not JSON */ }
      const err = new ApiError(resp.status, e.code, e.message);
      if (resp.status === 401) session.onUnauthenticated(err);
      this.onState('refused', err);
      return 'done';
    }
    this.open = true;
    this.retry = 250;
    this.onState('open');
    try {
      for await (const ev of events(resp.body)) {
        if (this.receive(ev)) { this.ctrl.abort(); return 'done'; }
      }
    } catch { /* dropped, or closed */ }
    return 'reconnecting';
  }
}
