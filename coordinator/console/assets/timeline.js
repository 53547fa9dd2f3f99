// timeline.js: one run's output as a conversation, rendered from the
// tool's own protocol (normalize.js), or as its raw frames: a virtual
// list (vlist.js) fed in slices per animation frame, the tools' requests
// standing where they were asked.
import { h } from './dom.js';
import { session } from './api.js';
import { normalizer, summary } from './normalize.js';
import { VList } from './vlist.js';
import { settledLine } from './requests.js';
import { toolBody } from './tools.js';

const RAW_MAX = 200000;

// Performance marks of the last frames (the console benchmark reads them):
// net = SSE arrival − the frame's time on the node; paint = text on screen
// − SSE arrival, both in ms.
export const perf = { samples: [], max: 20000 };
window.olivaresPerf = perf;

// Timeline is the conversation and raw-frames view of one run's output.
export class Timeline {
  constructor(el, driver, { onStderr, onSetup, onTurn, onFlush } = {}) {
    this.driver = driver;
    this.n = normalizer(driver);
    this.frames = [];
    this.queue = [];
    this.open = new Set(); // tool calls the person expanded
    this.raw = false;
    this.onStderr = onStderr || (() => {});
    this.onSetup = onSetup || (() => {});
    // onTurn(kind) is told of a turn's start or end and of a finished tool
    // call: the moments the run's row and activity are worth reading again.
    this.onTurn = onTurn || (() => {});
    this.onFlush = onFlush || (() => {});
    this.scroller = h('div', { class: 'timeline', id: 'timeline', tabindex: 0, 'aria-label': 'Conversation' });
    el.append(this.scroller);
    this.list = new VList(this.scroller, { render: (i) => this.row(i), label: 'Conversation' });
    this.flushing = 0;
    this.pendingPaint = [];
    this.list.onPainted = () => this.painted();
    this.reqAt = new Map(); // request id → item index
    this.waitingAt = -1;     // the tool call that waits for a decision
  }

  destroy() { this.list.destroy(); cancelAnimationFrame(this.flushing); }

  setRaw(raw) {
    this.raw = raw;
    this.list.reset();
    this.list.setCount(raw ? this.frames.length : this.n.items.length);
    this.list.scrollToBottom();
  }

  // push queues one output event's data; frames are fed in slices of a few
  // milliseconds per animation frame, so a replay of 100,000 frames never
  // freezes the page.
  push(o, arrived = performance.now()) {
    this.queue.push([o, arrived]);
    if (!this.flushing) this.flushing = requestAnimationFrame(() => this.flush());
  }

  // request queues a request event (asked or settled) behind the frames
  // before it: the request stands in the conversation where it was asked,
  // and its settlement updates it there (R-CON-7).
  request(r, seq) { this.push({ request: r, seq }); }

  putRequest(r, seq) {
    const i = this.reqAt.get(r.id);
    if (i === undefined) {
      this.reqAt.set(r.id, this.n.add({ kind: 'request', id: r.id, req: r }, seq));
      return this.n.items.length - 1;
    }
    // A settlement never goes back to pending (a replayed frame).
    if (this.n.items[i].req.state === 'pending' || r.state !== 'pending') this.n.items[i].req = r;
    return i;
  }

  flush() {
    this.flushing = 0;
    const start = performance.now();
    const changed = new Set();
    let i = 0;
    for (; i < this.queue.length; i++) {
      const [o, arrived] = this.queue[i];
      if (o.request) {
        changed.add(this.putRequest(o.request, o.seq));
        continue;
      }
      if (this.frames.length >= RAW_MAX) this.frames.shift();
      this.frames.push(o);
      const r = this.n.feed(o);
      for (const c of r.changed) changed.add(c);
      if (r.stderr.length) this.onStderr(r.stderr.join(''));
      if (r.setup.length) this.onSetup(r.setup.join(''));
      if (o.at) this.pendingPaint.push([arrived, Date.now() - Date.parse(o.at)]);
      if (performance.now() - start > 8) { i++; break; }
    }
    this.queue.splice(0, i);
    this.sync([...changed]);
    // Paint pacing: the rows this slice changed are painted in this same
    // animation frame, once, however many frames the slice held.
    if (this.list.raf) {
      cancelAnimationFrame(this.list.raf);
      this.list.raf = 0;
      this.list.paint();
    }
    let turn = '';
    for (const c of changed) {
      const it = this.n.items[c];
      if (it.kind === 'turn_end') turn = 'turn_end';
      else if (!turn && (it.kind === 'turn_start' || (it.kind === 'tool_call' && it.status !== 'running'))) turn = it.kind;
    }
    if (turn) this.onTurn(turn);
    this.onFlush();
    if (this.queue.length) this.flushing = requestAnimationFrame(() => this.flush());
  }

  sync(changed) {
    if (this.raw) {
      this.list.setCount(this.frames.length);
    } else {
      this.list.setCount(this.n.items.length);
      for (const c of changed) this.list.invalidate(c);
    }
  }

  painted() {
    if (!this.pendingPaint.length) return;
    const batch = this.pendingPaint;
    this.pendingPaint = [];
    // The next frame is the one the browser paints these rows in.
    requestAnimationFrame(() => {
      const now = performance.now();
      for (const [arrived, net] of batch) {
        perf.samples.push({ net, paint: now - arrived });
      }
      if (perf.samples.length > perf.max) perf.samples.splice(0, perf.samples.length - perf.max);
    });
  }

  row(i) {
    if (this.raw) {
      const f = this.frames[i];
      const data = f.encoding === 'base64' ? `[base64] ${f.data}` : f.data;
      return h('div', { class: `raw s-${f.stream}` }, h('span', { class: 'seq' }, `#${f.seq}`), h('span', { class: 'gen' }, `g${f.generation}`),
        h('span', { class: 'stream' }, f.stream), h('code', null, data.length > 2000 ? `${data.slice(0, 2000)}… (${data.length} chars)` : data));
    }
    const it = this.n.items[i];
    switch (it.kind) {
      case 'turn_start': return h('div', { class: 'item turn-start' }, h('span', null, 'Turn'));
      case 'user': return h('div', { class: 'item user' }, h('div', { class: 'who' }, sender(it)), h('div', { class: 'text' }, it.clipped ? `${it.text} […]` : it.text));
      case 'assistant': return h('div', { class: 'item assistant' }, h('div', { class: 'text' }, it.text));
      case 'thinking': return h('div', { class: 'item thinking' }, h('div', { class: 'text' }, it.text));
      case 'tool_call': return this.toolRow(i, it);
      case 'request': return this.requestRow(it.req);
      case 'turn_end': {
        const d = it.detail || {};
        const bits = [it.status === 'completed' ? 'Turn completed' : it.status === 'interrupted' ? 'Turn interrupted' : 'Turn failed'];
        if (d.duration_ms !== undefined) bits.push(`${(d.duration_ms / 1000).toFixed(1)} s`);
        if (d.cost_usd) bits.push(`$${d.cost_usd.toFixed(4)}`);
        if (d.stop_reason) bits.push(d.stop_reason);
        return h('div', { class: `item turn-end t-${it.status}` }, bits.join(' · '));
      }
      case 'error': return h('div', { class: 'item error', role: 'note' }, h('strong', null, 'Error '), it.text);
      case 'system': return h('div', { class: 'item system' }, it.text);
      default: return h('div', { class: 'item output' }, h('code', null, it.text));
    }
  }

  requestRow(r) {
    return h('div', { class: `item req-inline st-${r.state}`, dataset: { request: r.id } },
      h('span', { class: 'req-kind' }, 'Asked'), ' ', h('strong', null, r.title),
      r.state === 'pending' ? h('div', { class: 'req-wait' }, 'Waiting for your decision, below.') : settledLine(r));
  }

  // waiting says the last running tool call waits for a person while a
  // request is pending (R-CON-7).
  setWaiting(on) {
    let last = -1;
    if (on) for (let i = this.n.items.length - 1; i >= 0; i--) if (this.n.items[i].kind === 'tool_call' && this.n.items[i].status === 'running') { last = i; break; }
    if (last === this.waitingAt) return;
    const old = this.waitingAt;
    this.waitingAt = last;
    for (const i of [old, last]) if (i >= 0) this.list.invalidate(i);
  }

  toolRow(i, it) {
    const open = this.open.has(i);
    const d = h('details', { class: `item tool st-${it.status}`, open },
      h('summary', null, h('span', { class: 'tname' }, it.name || 'tool'), ' ', h('span', { class: 'tsum' }, summary(it)), ' ', h('span', { class: 'tstatus' }, i === this.waitingAt ? 'waiting for your decision' : it.status)),
      open ? h('div', { class: 'tbody' }, toolBody(it)) : null);
    d.addEventListener('toggle', () => {
      if (d.open === this.open.has(i)) return;
      if (d.open) this.open.add(i); else this.open.delete(i);
      this.list.invalidate(i);
    });
    return d;
  }
}

// sender names who sent a user item (R-ATT-11): "You" for the viewer's
// own input, the sender's name otherwise; an input no person sent came
// from Olivares (a scheduled continue, a hand-off); a message only the
// tool shows has no sender.
function sender(it) {
  if (it.by === undefined) return 'Person';
  if (!it.by) return 'Olivares';
  if (session.whoami && it.by === session.whoami.principal_id) return 'You';
  return it.name || it.by;
}
