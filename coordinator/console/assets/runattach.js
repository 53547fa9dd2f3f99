// runattach.js: a run's attach stream (GET /runs/{ref}/attach) and what
// each of its events does to the run view: output to the timeline,
// requests to their cards, the rest to banners.
import { BASE } from './api.js';
import { Stream } from './sse.js';
import { exitWords } from './runhead.js';

// Attach follows the attach stream from the seq `from` (undefined: the
// oldest retained). It keeps the last seq and, after any drop that is not
// a proper end, reconnects with from=last+1: no gap, no duplicate
// (R-RC-1, R-RC-6).
export class Attach extends Stream {
  constructor(ref, { from, onEvent, onState }) {
    super({ onState });
    this.ref = ref;
    this.next = from; // the seq to ask for
    this.onEvent = onEvent;
  }

  request() {
    return { url: `${BASE}/runs/${encodeURIComponent(this.ref)}/attach${this.next === undefined ? '' : `?from=${this.next}`}` };
  }

  receive({ name, id, data }) {
    if (id !== '') {
      const seq = Number(id);
      if (this.next !== undefined && seq < this.next) return false; // never twice
      this.next = seq + 1;
    }
    if (name === 'lag' && data) this.next = Math.max(this.next || 0, data.resumed_from);
    // A dropped slow viewer is told so (older coordinators) or simply
    // cut off: either way it comes back at last+1.
    const last = name === 'notice' || (name === 'end' && !(data && data.reason === 'slow_viewer'));
    this.onEvent(name, data, id);
    return last;
  }
}

// follow attaches the run view v (run.js) to its run: start(from) attaches
// anew, restart() again where the last stream stopped.
export function follow(v) {
  let attach = null;
  const { banner } = v;

  function onEvent(ev, data, id) {
    const now = performance.now();
    switch (ev) {
      case 'output': v.tl.push(data, now); break;
      case 'request':
      case 'request_settled':
        v.cards.put(data);
        if (data && data.id) v.tl.request(data, Number(id) || 0);
        if (ev === 'request') v.schedule(300);
        v.showWorking();
        break;
      case 'olivares_notice':
        if (data && data.kind === 'history_withheld') banner('withheld', 'warn', 'The conversation the tool replayed at resume is withheld: this run was given credentials, and nobody can prove its earlier output is free of them.');
        else banner('onotice', 'warn', `Notice: ${JSON.stringify(data)}`);
        break;
      case 'lag':
        banner('lag', 'warn', `Frames ${data.requested_from}–${data.resumed_from - 1} were evicted from the node's ring before they could be shown; the timeline resumes at ${data.resumed_from}.`);
        break;
      case 'notice':
        if (!v.banners.has('end')) banner('end', '', `This session is not live (${data && data.state ? data.state.replace('_', ' ') : 'ended'}): you see its retained output.`);
        break;
      case 'end':
        if (data && data.reason === 'slow_viewer') {
          banner('slow', 'warn', 'This viewer fell behind and was dropped; catching up from where it stopped.');
          break;
        }
        banner('end', '', `${v.banners.has('end') && v.banners.get('end').content.startsWith('Stopped') ? 'Stopped' : `Generation ${data.generation} ended`}: the process ${exitWords(data.exit_code, data.signal)}.`);
        v.load();
        v.loadEvents();
        break;
      default:
    }
  }

  function start(from) {
    if (attach) attach.close();
    attach = new Attach(v.ref, {
      from,
      onEvent,
      onState: (s, err) => {
        if (s === 'open') banner('conn', '', null);
        else if (s === 'refused') v.errBanner('conn', err);
        else banner('conn', 'warn', `Connection to the stream lost; reconnecting at seq ${attach.next ?? 0} with nothing missed…`);
      },
    }).start();
  }

  return {
    start,
    restart() { start(attach ? attach.next : undefined); },
    close() { if (attach) attach.close(); },
  };
}
