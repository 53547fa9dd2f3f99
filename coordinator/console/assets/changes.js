// changes.js: the fleet-wide change stream, GET /v1/m/sessions/events
// (R-CHG-1), read over fetch (an EventSource cannot send the tenant
// header). It keeps the last event id and reconnects with Last-Event-ID,
// so a drop loses nothing while the coordinator's log still holds what
// followed; when it does not, the stream says `reset` and the owner
// refetches (R-CHG-4).
import { session, BASE } from './api.js';

export class Changes {
  constructor({ onEvent, onState }) {
    this.onEvent = onEvent;
    this.onState = onState || (() => {});
    this.lastId = '';
    this.closed = false;
    this.ctrl = null;
    this.retry = 250;
    this.open = false;
  }

  start() { this.loop(); return this; }

  close() {
    this.closed = true;
    if (this.ctrl) this.ctrl.abort();
  }

  async loop() {
    while (!this.closed) {
      const refused = await this.once();
      this.open = false;
      if (this.closed || refused) return;
      this.onState('retrying');
      await new Promise((r) => setTimeout(r, this.retry));
      this.retry = Math.min(this.retry * 2, 8000);
    }
  }

  // once reads one connection; true when the coordinator refused it for
  // good (no permission, the route unknown to an older coordinator).
  async once() {
    this.ctrl = new AbortController();
    const headers = { 'X-Olivares-Tenant': session.tenant, Accept: 'text/event-stream' };
    if (this.lastId) headers['Last-Event-ID'] = this.lastId;
    let resp;
    try {
      resp = await fetch(`${BASE}/events`, { headers, credentials: 'same-origin', cache: 'no-store', signal: this.ctrl.signal });
    } catch {
      return false;
    }
    if (!resp.ok) {
      if (resp.status === 401) return true;
      return resp.status >= 400 && resp.status < 500 && resp.status !== 429;
    }
    this.open = true;
    this.retry = 250;
    this.onState('open');
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
      return false;
    }
    return false;
  }

  dispatch(ev) {
    let data = null;
    try { data = JSON.parse(ev.data.join('\n')); } catch { data = null; }
    if (ev.id) this.lastId = ev.id;
    this.onEvent(ev.name || 'message', data, ev.id);
  }
}
