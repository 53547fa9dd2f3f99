// run.js: one run. The live conversation rendered from the tool's own
// protocol (normalize.js), stderr in its own pane, the raw frames a click
// away, banners for lag / not live / end / history_withheld / limit, and
// the controls: input, interrupt, stop, resume, approve, hand off, move,
// release and delete. Tabs beside the conversation read the run's
// activity, messages, diff and events (loaded when first shown).
//
// Refreshing never hammers the node (R-CON-3): GET /runs/{ref} (which asks the
// node) is read again when the attach stream shows a turn start or end,
// an end or a notice, and after an action; the change stream's `run`
// events bring the row's other changes (R-CON-8). Only while that stream
// is down does a timer read it, backing off from 5 s to 60 s.
import { h, replace, localTime, relTime, runName, TOOL } from './dom.js';
import { api, get, session, Attach, BASE } from './api.js';
import { normalizer, summary } from './normalize.js';
import { VList } from './vlist.js';
import { tabs, errorLine } from './ui.js';
import { watcher, attentionOf } from './attention.js';
import { requestCards, settledLine } from './requests.js';
import { toolBody } from './tools.js';

const LIVE = ['starting', 'running', 'idle'];
const STDERR_MAX = 256 << 10;
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
    this.turns = [];
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

// exitWords says how a process ended, in words (R-CON-6): 143 is SIGTERM.
const SIGNALS = { 1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 6: 'SIGABRT', 9: 'SIGKILL', 13: 'SIGPIPE', 15: 'SIGTERM' };
export function exitWords(code, signal) {
  if (signal) return `was killed by ${signal}`;
  if (code === null || code === undefined) return 'ended, its exit code unobserved';
  if (code === 0) return 'exited normally (exit code 0)';
  if (code > 128 && SIGNALS[code - 128]) return `ended on ${SIGNALS[code - 128]} (exit code ${code})`;
  return `exited with an error (exit code ${code})`;
}

const READ_SIDE = ['claude', 'codex']; // activity and messages (R-ACT-2, R-MSG-1)
const POLL_MIN = 5000;
const POLL_MAX = 60000;

export function runView(main, ref, { tab = '' } = {}) {
  let run = null;
  let attach = null;
  let tl = null;
  let destroyed = false;
  let poll = 0;
  let pollDelay = POLL_MIN;
  let profiles = new Map();
  let handedTo = [];
  const panels = new Map(); // tab → {refresh, destroy}
  const stale = new Set();  // tabs to read again when shown
  let actTimer = 0;
  let lastAct = 0;
  const banners = new Map(); // key → {cls, content}
  const canWrite = session.can('sessions:run:write');
  const canAdmin = session.can('sessions:run:admin');
  const canApprove = session.can('sessions:workspace:admin') && session.me && session.me.kind === 'human';

  const head = h('header', { class: 'run-head' });
  const bannerEl = h('div', { class: 'banners', 'aria-live': 'polite' });
  // The tool's requests, answered here (docs/rules/requests.md).
  const reqEl = h('div', { class: 'requests', id: 'requests', 'aria-live': 'polite' });
  const cards = requestCards(reqEl, ref, { canWrite, base: () => (run && run.workspace_path) || '', onSettled: () => { schedule(300); showWorking(); } });
  const body = h('div', { class: 'run-body' });
  // The tool's stderr, and the setup command's output before the tool
  // (R-SETUP-2), each in a collapsed pane of its own; setup's shows once
  // there is some.
  const stderrOut = outPane('stderr');
  const setupOut = outPane('setup');
  setupOut.box.hidden = true;
  const rawToggle = h('input', { type: 'checkbox', id: 'raw-toggle', onchange: (e) => tl && tl.setRaw(e.target.checked) });
  const input = h('textarea', { id: 'input', rows: 2, placeholder: 'Message the session — Enter sends, Shift+Enter for a new line', 'aria-label': 'Message' });
  const send = h('button', { type: 'submit', id: 'send' }, 'Send');
  // R-ATT-12: while a turn runs, the page says the tool is at work (or
  // waits for a person's decision), right above the composer.
  const working = h('div', { class: 'working', id: 'working', role: 'status', hidden: true });
  // An empty conversation says what to do, not a blank box.
  const emptyHint = h('p', { class: 'empty-hint muted', id: 'empty-hint', hidden: true });
  const inputForm = canWrite ? h('form', { class: 'composer', onsubmit: (e) => { e.preventDefault(); sendInput(); } }, input, send) : null;
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); sendInput(); }
  });
  const t = tabs([['conversation', 'Conversation'], ['activity', 'Activity'], ['messages', 'Messages'], ['diff', 'Diff'], ['events', 'Events']], { onShow: showTab });
  t.bar.append(h('label', { class: 'toggle raw-switch' }, rawToggle, 'Raw frames'));
  body.append(emptyHint);
  t.panels.get('conversation').append(setupOut.box, body, working, stderrOut.box, reqEl, inputForm);
  replace(main, h('div', { class: 'run' },
    h('nav', { class: 'crumbs' }, h('a', { href: '/', 'data-nav': true }, '← Sessions')),
    head, bannerEl, t.bar, [...t.panels.values()]));

  function showTab(name, el) {
    const url = new URL(location.href);
    if (name === 'conversation') url.searchParams.delete('tab'); else url.searchParams.set('tab', name);
    history.replaceState(null, '', url.pathname + url.search);
    if (name === 'conversation') {
      if (tl) tl.list.invalidateAll();
      return;
    }
    if (!run) return;
    if (panels.has(name)) {
      if (stale.has(name)) { stale.delete(name); panels.get(name).refresh(); }
      return;
    }
    const load = {
      activity: () => import('./activity.js').then((m) => m.activityPanel(el, run)),
      messages: () => import('./messages.js').then((m) => m.messagesPanel(el, run)),
      diff: () => import('./diff.js').then((m) => m.diffPanel(el, run)),
      events: () => import('./events.js').then((m) => m.eventsPanel(el, run, { profiles })),
    }[name];
    panels.set(name, { refresh() {}, destroy() {} });
    load().then((p) => { if (destroyed) p.destroy(); else panels.set(name, p); });
  }

  // onTurn: the row and the activity are read again when a turn starts or
  // ends, or a tool call finishes; the activity at most every 3 s, and once
  // more shortly after a turn ends (Claude Code writes its transcript in
  // batches, a moment after its result frame).
  function onTurn(kind) {
    pollDelay = POLL_MIN;
    if (kind !== 'tool_call') schedule(300);
    const fire = () => {
      lastAct = Date.now();
      for (const name of ['activity', 'events', 'diff']) {
        if (!panels.has(name)) continue;
        if (t.current === name) panels.get(name).refresh(); else stale.add(name);
      }
    };
    clearTimeout(actTimer);
    actTimer = setTimeout(() => {
      fire();
      if (kind === 'turn_end') actTimer = setTimeout(fire, 2000);
    }, Math.max(500, 3000 - (Date.now() - lastAct)));
  }

  function showWorking() {
    if (tl) tl.setWaiting(cards.pending() > 0);
    emptyHint.hidden = !tl || !run || tl.n.items.length > 0 || tl.raw;
    if (!emptyHint.hidden) {
      emptyHint.textContent = LIVE.includes(run.state) ? (canWrite ? `Nothing said yet. ${TOOL[run.driver] || run.driver} is ready: write the first message below.` : 'Nothing said yet.') :
        run.state === 'pending_approval' ? 'The session starts once its launch is approved.' : 'This session has no retained output.';
    }
    const on = !!(tl && run && (tl.n.inTurn || cards.pending() > 0) && LIVE.includes(run.state));
    working.hidden = !on;
    if (!on) return;
    const waiting = cards.pending() > 0;
    working.classList.toggle('waiting', waiting);
    working.textContent = waiting ? 'Waiting for your decision' : `${TOOL[run.driver] || run.driver} is working…`;
  }

  function banner(key, cls, content) {
    if (content === null) banners.delete(key); else banners.set(key, { cls, content });
    replace(bannerEl, [...banners.entries()].map(([k, b]) => (b.content instanceof Node ? b.content :
      h('p', { class: `banner ${b.cls}`, dataset: { kind: k }, role: b.cls === 'error' ? 'alert' : 'status' }, b.content))));
  }

  function errBanner(key, e) {
    const el = errorLine(e, { workspaceRef: run && run.workspace_ref });
    el.dataset.kind = key;
    banner(key, 'error', el);
  }


  const runLink = (r, text) => h('a', { href: `/runs/${encodeURIComponent(r)}`, 'data-nav': true }, text || r);

  function renderHead() {
    const r = run;
    const live = LIVE.includes(r.state);
    const ended = !live && r.state !== 'pending_approval';
    const exit = ended && ((r.exit_code !== null && r.exit_code !== undefined) || r.signal) ? exitWords(r.exit_code, r.signal) : '';
    const btn = (id, label, fn, show, cls = '') => (show ? h('button', { type: 'button', id, class: cls, onclick: fn }, label) : null);
    const prof = profiles.get(r.provider_profile_ref);
    const att = attentionOf(r);
    const actions = (what) => import('./runactions.js').then((m) => what(m));
    const after = () => { load(); loadEvents(); };
    replace(head,
      h('div', { class: 'line1' }, h('h1', { id: 'run-name' }, runName(r)),
        h('span', { class: `state s-${r.state}`, id: 'run-state' }, r.state.replace('_', ' ')),
        exit ? h('span', { class: 'exit', id: 'run-exit' }, exit) : null,
        att ? h('span', { class: `attn at-${att.reason}`, id: 'run-attention' }, att.text) : null),
      h('div', { class: 'meta' },
        h('span', null, TOOL[r.driver] || r.driver), prof ? h('span', { title: r.provider_profile_ref }, `profile ${prof.name}`) : null,
        h('span', null, `generation ${r.generation}`),
        // R-TR-7: a native run's boundary, said plainly (docs/isolation.md).
        r.isolation === 'native' || !r.isolation
          ? h('span', { class: 'badge warn', id: 'run-isolation', title: 'isolation native' }, "native: runs as the agent's user, can read the node's files")
          : h('span', { id: 'run-isolation', title: `isolation ${r.isolation}` }, r.isolation === 'sandbox' || r.isolation === 'container' ? `${r.isolation}: sees only its working directory and its profile home` : r.isolation),
        h('a', { href: `/nodes/${encodeURIComponent(r.node_id)}`, 'data-nav': true }, r.node_id), r.node_reachable === false ? h('span', { class: 'badge warn' }, 'unreachable') : null,
        r.workspace_ref ? h('a', { href: `/workspaces/${encodeURIComponent(r.workspace_ref)}`, 'data-nav': true, title: r.workspace_path || '' }, r.worktree_branch || r.workspace_path || r.workspace_ref) : null,
        r.reason ? h('span', { class: 'badge warn' }, r.reason) : null,
        r.taint && r.taint.length ? h('span', { class: 'badge warn', title: 'credentials were handed to this run' }, `tainted: ${r.taint.join(', ').replace(/_/g, ' ')}`) : null,
        r.handoff_of ? h('span', { id: 'handoff-of' }, 'continued from ', runLink(r.handoff_of)) : null,
        r.codex_binding ? h('span', { id: 'codex-binding' }, `continues Codex thread ${r.codex_binding.source_thread_id.slice(0, 8)} of ${r.codex_binding.source_host} · ${r.codex_binding.state}`,
          r.codex_binding.model ? ` · ${r.codex_binding.model_provider}/${r.codex_binding.model}` : '', r.codex_binding.model_locked ? ' · model locked' : '',
          canWrite ? [' ', h('button', { type: 'button', class: 'ghost act', id: 'codex-history', onclick: codexHistory }, 'Visible history')] : null) : null,
        handedTo.length ? h('span', { id: 'handed-to' }, 'handed off to ', handedTo.map((x, i) => [i ? ', ' : '', runLink(x)])) : null,
        h('time', { datetime: r.created_at, title: localTime(r.created_at) }, `started ${relTime(r.started_at || r.created_at)}`)),
      h('div', { class: 'actions' },
        // R-CON-6: the buttons follow the run's state: Interrupt only
        // while a turn runs, Stop (which asks first) while it is live.
        btn('interrupt', 'Interrupt', () => act('interrupt', null), canWrite && r.state === 'running'), // the turn's end says it
        btn('stop', 'Stop', confirmStop, canWrite && live, 'ghost danger-text'),
        btn('resume', 'Resume', resume, canWrite && ended && r.state !== 'released'),
        btn('approve', 'Approve', approve, canApprove && r.state === 'pending_approval'),
        h('button', { type: 'button', id: 'pin', class: 'ghost', 'aria-pressed': String(!!r.pinned), onclick: pin }, r.pinned ? 'Unpin' : 'Pin'),
        btn('handoff', 'Hand off', () => actions((m) => m.openHandoff(run, after)), canWrite && r.state !== 'released' && r.state !== 'pending_approval' && r.driver !== 'grok', 'ghost'),
        btn('move', 'Move', () => actions((m) => m.openMove(run, after)), canWrite && r.state !== 'released', 'ghost'),
        btn('cleanup', 'Release', () => actions((m) => m.openCleanup(run, after)), canAdmin && (r.state === 'stopped' || r.state === 'failed'), 'ghost'),
        btn('delete', 'Delete', () => actions((m) => m.openDelete(run)), canAdmin && r.state === 'released', 'danger')));
    if (inputForm) {
      input.disabled = send.disabled = !live;
      input.placeholder = live ? 'Message the session — Enter sends, Shift+Enter for a new line' : 'The session is not live; resume it to send input.';
    }
    showWorking();
    t.buttons.get('diff').hidden = !r.workspace_ref; // R-DIFF-10: a workspace's or worktree's edits
    t.buttons.get('activity').hidden = t.buttons.get('messages').hidden = !READ_SIDE.includes(r.driver);
    banner('unreachable', 'warn', r.node_reachable === false ? `Node ${r.node_id} is unreachable: the state shown is the last one it reported.` : null);
    banner('pending', 'warn', r.state === 'pending_approval' ? (canApprove ? 'This launch waits for approval. Approve it to start the process.' : 'This launch waits for approval by someone with workspace administration.') : null);
    banner('limit', 'warn', r.limit ? limitText(r.limit) : null);
    banner('onlimit', '', onLimitHistory(r));
    // The tools' permission requests and questions: the head's attention
    // badge says one waits; each is answered on its card, pinned above
    // the composer.
    banner('lasterror', 'error', r.last_error ? `The tool failed (${r.last_error.kind.replace('_', ' ')}): ${r.last_error.message}` : null);
    if (r.pending_requests !== cards.pending()) cards.refresh();
    banner('codex', 'warn', r.codex_binding && r.codex_binding.last_error ? `The branch's canonical Codex thread could not be created yet: ${r.codex_binding.last_error}. The next message tries again.` : null);
    banner('released', '', r.state === 'released' ? (canAdmin ? 'This session was released: its worktree and runtime state are gone. Delete removes its record for good.' : 'This session was released.') : null);
  }

  // codexHistory shows the bounded visible history the supervised branch
  // was created with (GET /runs/{ref}/codex-branch, R-CX-HIST-*).
  async function codexHistory() {
    const { modal } = await import('./ui.js');
    const m = modal('codex-history-dialog', 'The branch’s visible history', { wide: true });
    try {
      const b = await get(`${BASE}/runs/${encodeURIComponent(ref)}/codex-branch`);
      replace(m.body, h('p', { class: 'muted' }, `${b.history.length} message${b.history.length === 1 ? '' : 's'} of the source thread, reasoning and tool calls left out.`),
        h('div', { class: 'transcript' }, b.history.map((x) => h('div', { class: `item ${x.role === 'user' ? 'user' : 'assistant'}` },
          x.role === 'user' ? h('div', { class: 'who' }, 'Person') : null, h('div', { class: 'text' }, x.text)))));
    } catch (e) {
      replace(m.body, errorLine(e));
    }
  }

  // limitText is R-LIM-*: the kind, the reset time in the viewer's own
  // time zone, and the account (the profile the turn ran under).
  function limitText(l) {
    const acct = profiles.get(l.account_ref);
    const kind = l.kind === 'usage' ? 'The account\u2019s usage limit was reached' : l.kind === 'rate' ? 'The provider is rate-limiting this account' : `Limit (${l.kind})`;
    const reset = l.resets_at ? `it resets ${localTime(l.resets_at)} (${relTime(l.resets_at)}, ${Intl.DateTimeFormat().resolvedOptions().timeZone})` : 'the tool did not say when it resets';
    return h('p', { class: 'banner warn', dataset: { kind: 'limit' }, id: 'limit-banner', role: 'status' },
      `${kind} on ${acct ? `profile ${acct.name}` : l.account_ref}: ${reset}.`,
      run && run.driver === 'claude' && canWrite ? ' Move it to another Claude Code account, or hand it off, to continue now.' : '',
      continueControl(), planControl());
  }

  // planControl is the profile's on_limit plan with a button per step,
  // each run now by POST /runs/{ref}/on-limit (R-ONL-7).
  function planControl() {
    const prof = run && profiles.get(run.provider_profile_ref);
    const plan = (prof && prof.on_limit) || [];
    if (!plan.length) return null;
    const step = (s) => async () => {
      try {
        const { data } = await api('POST', `${BASE}/runs/${encodeURIComponent(ref)}/on-limit`, { step: s });
        run = data;
        renderHead();
        const last = (data.on_limit || [])[data.on_limit.length - 1];
        banner('act', '', last ? onLimitLine(last) : 'Done.');
      } catch (e) { errBanner('act', e); }
    };
    return h('span', { id: 'on-limit-plan' }, ` Its profile’s plan at a limit: ${plan.join(', then ')}. `,
      canWrite && run.state !== 'released' ? plan.filter((s) => s !== 'continue_at_reset').map((s) =>
        h('button', { type: 'button', class: 'ghost act', dataset: { step: s }, onclick: step(s) }, stepLabel(s))) : null);
  }

  function stepLabel(s) {
    const [kind, p] = s.split(':');
    return kind === 'move' ? `Move to ${p} now` : kind === 'handoff' ? `Hand off to ${p} now` : s;
  }

  // onLimitLine is one entry of the run's on_limit history (R-ONL-6), as
  // olivares session show prints it.
  function onLimitLine(e) {
    const by = e.by === 'person' ? ', by a person' : '';
    const at = ` ${localTime(e.at)}`;
    switch (e.outcome) {
      case 'limited': return `limited on ${e.profile_name}${e.resets_at ? ` (resets ${localTime(e.resets_at)})` : ''}${by} at${at}`;
      case 'moved': return `moved to ${e.to_profile_name}${by} at${at}`;
      case 'handed_off': return `handed off to ${e.to_profile_name}${by} at${at}`;
      case 'waiting': return `waits for the reset${e.resets_at ? `, continues ${localTime(e.resets_at)}` : ''}${by}`;
      case 'skipped': return `skipped ${e.step}: ${e.reason}${by}`;
      default: return e.outcome;
    }
  }

  // onLimitHistory is the run's on_limit history, shown while it has one.
  function onLimitHistory(r) {
    const es = (r.on_limit || []).slice(-6);
    if (!es.length) return null;
    return h('p', { class: 'banner', dataset: { kind: 'onlimit' }, id: 'on-limit-history', role: 'status' },
      es.map((e, i) => [i ? '; ' : '', e.new_run_ref ? [onLimitLine(e), ' (', runLink(e.new_run_ref), ')'] : onLimitLine(e)]), '.');
  }

  // continueControl schedules or cancels the continue at the limit's
  // reset (POST/DELETE /runs/{ref}/continue-at-reset, R-CONT-1, R-CONT-7).
  function continueControl() {
    if (!run || !canWrite || run.state === 'released') return null;
    const path = `${BASE}/runs/${encodeURIComponent(ref)}/continue-at-reset`;
    const go = (method, done) => async () => {
      try {
        const { data } = await api(method, path, method === 'POST' ? {} : undefined);
        run = data;
        renderHead();
        banner('act', '', done(data));
      } catch (e) { errBanner('act', e); }
    };
    if (run.scheduled_continue_at) {
      return h('span', { id: 'continue-scheduled' }, ` It continues by itself ${localTime(run.scheduled_continue_at)}. `,
        h('button', { type: 'button', class: 'ghost act', id: 'continue-cancel', onclick: go('DELETE', () => 'The scheduled continue was cancelled.') }, 'Cancel'));
    }
    return [' ', h('button', { type: 'button', class: 'ghost act', id: 'continue-at-reset',
      onclick: go('POST', (d) => `It continues by itself ${localTime(d.scheduled_continue_at)}, sending \u201ccontinue\u201d.`) }, 'Continue when it resets')];
  }

  async function load() {
    try {
      run = (await get(`${BASE}/runs/${encodeURIComponent(ref)}`));
      if (destroyed) return;
      banner('load', '', null);
      watcher.setLabel(runName(run));
      watcher.observe([run]);
      renderHead();
      if (!tl) {
        tl = new Timeline(body, run.driver, { onStderr: stderrOut.add, onSetup: setupOut.add, onTurn, onFlush: showWorking });
        startAttach(undefined);
        const want = tab && !t.buttons.get(tab)?.hidden ? tab : 'conversation';
        t.select(want);
      }
    } catch (e) {
      if (e.status === 404 && run) {
        banner('load', 'error', 'This session no longer exists (it was deleted).');
        return;
      }
      errBanner('load', e);
    }
  }

  // loadEvents finds the runs this one was handed off to (the handed_off
  // events of its ledger), so the two link both ways.
  async function loadEvents() {
    try {
      const { loadEvents: le } = await import('./events.js');
      const evs = await le(ref);
      handedTo = evs.filter((e) => e.kind === 'handed_off').map((e) => {
        try { return (typeof e.detail === 'string' ? JSON.parse(e.detail) : e.detail || {}).to; } catch { return ''; }
      }).filter(Boolean);
      if (run && !destroyed) renderHead();
    } catch { /* the Events tab says why */ }
  }

  // outPane is a collapsed pane (#<name>-box) of text lines (#<name>),
  // its summary counting them, keeping the last STDERR_MAX characters.
  function outPane(name) {
    const pre = h('pre', { class: 'stderr', id: name });
    const count = h('span', { class: 'count', id: name + '-count' }, '0');
    const box = h('details', { class: 'stderr-box', id: name + '-box' }, h('summary', null, name + ' ', count), pre);
    let text = '';
    return {
      box,
      add(more) {
        text += more;
        if (text.length > STDERR_MAX) text = text.slice(text.length - STDERR_MAX);
        pre.textContent = text;
        count.textContent = String(text.split('\n').filter(Boolean).length);
        box.hidden = false;
      },
    };
  }

  function startAttach(from) {
    if (attach) attach.close();
    attach = new Attach(ref, {
      from,
      onState: (s, err) => {
        if (s === 'open') banner('conn', '', null);
        else if (s === 'refused') errBanner('conn', err);
        else banner('conn', 'warn', `Connection to the stream lost; reconnecting at seq ${attach.next ?? 0} with nothing missed…`);
      },
      onEvent: (ev, data, id) => {
        const now = performance.now();
        switch (ev) {
          case 'output': tl.push(data, now); break;
          case 'request':
          case 'request_settled':
            cards.put(data);
            if (data && data.id) tl.request(data, Number(id) || 0);
            if (ev === 'request') schedule(300);
            showWorking();
            break;
          case 'olivares_notice':
            if (data && data.kind === 'history_withheld') banner('withheld', 'warn', 'The conversation the tool replayed at resume is withheld: this run was given credentials, and nobody can prove its earlier output is free of them.');
            else banner('onotice', 'warn', `Notice: ${JSON.stringify(data)}`);
            break;
          case 'lag':
            banner('lag', 'warn', `Frames ${data.requested_from}–${data.resumed_from - 1} were evicted from the node's ring before they could be shown; the timeline resumes at ${data.resumed_from}.`);
            break;
          case 'notice':
            if (!banners.has('end')) banner('end', '', `This session is not live (${data && data.state ? data.state.replace('_', ' ') : 'ended'}): you see its retained output.`);
            break;
          case 'end':
            if (data && data.reason === 'slow_viewer') {
              banner('slow', 'warn', 'This viewer fell behind and was dropped; catching up from where it stopped.');
              break;
            }
            banner('end', '', `${banners.has('end') && banners.get('end').content.startsWith('Stopped') ? 'Stopped' : `Generation ${data.generation} ended`}: the process ${exitWords(data.exit_code, data.signal)}.`);
            load();
            loadEvents();
            break;
          default:
        }
      },
    }).start();
  }

  async function act(what, done) {
    try {
      await api('POST', `${BASE}/runs/${encodeURIComponent(ref)}/${what}`);
      banner('act', '', done);
      load();
    } catch (e) { errBanner('act', e); }
  }

  // confirmStop asks before it stops (R-CON-6): a stop ends the process,
  // and a running turn with it.
  async function confirmStop() {
    if (document.getElementById('stop-dialog')) return;
    const { modal } = await import('./ui.js');
    if (document.getElementById('stop-dialog')) return;
    const m = modal('stop-dialog', 'Stop the session?');
    const go = h('button', { type: 'button', class: 'danger', id: 'stop-confirm', onclick: () => { m.close(); stop(); } }, 'Stop');
    replace(m.body, h('p', null, run && run.state === 'running' ? 'The process is ended, and the running turn with it. The conversation stays; Resume starts the tool again.' :
      'The process is ended. The conversation stays; Resume starts the tool again.'),
    h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), go));
    go.focus();
  }

  async function stop() {
    const b = document.getElementById('stop');
    if (b) { b.disabled = true; b.textContent = 'Stopping…'; }
    try {
      const { data } = await api('POST', `${BASE}/runs/${encodeURIComponent(ref)}/stop`);
      run = data;
      renderHead();
      // One banner says how it ended; the stream's end says the same
      // thing and takes its place.
      banner('act', '', null);
      banner('end', '', `Stopped: the process ${exitWords(data.exit_code, data.signal)}.`);
    } catch (e) { errBanner('act', e); load(); }
  }

  async function resume() {
    try {
      const { status, data } = await api('POST', `${BASE}/runs/${encodeURIComponent(ref)}/resume`);
      run = data;
      for (const k of ['end', 'act']) banners.delete(k);
      banner('act', status === 202 ? 'warn' : '', status === 202 ? 'Resumed; the new generation waits for approval.' : `Resumed: generation ${data.generation}.`);
      renderHead();
      startAttach(attach ? attach.next : undefined);
    } catch (e) { errBanner('act', e); }
  }

  async function approve() {
    try {
      const { data } = await api('POST', `${BASE}/runs/${encodeURIComponent(ref)}/approve`);
      run = data;
      banner('act', '', 'Approved: the process starts.');
      renderHead();
      startAttach(attach ? attach.next : undefined);
    } catch (e) { errBanner('act', e); }
  }

  async function pin() {
    try {
      const { data } = await api(run.pinned ? 'DELETE' : 'POST', `${BASE}/runs/${encodeURIComponent(ref)}/pin`);
      run.pinned = data.pinned;
      renderHead();
    } catch (e) { errBanner('act', e); }
  }

  async function sendInput() {
    const text = input.value;
    if (!text.trim() || !run) return;
    // The field the driver takes (R-IN-2): Claude Code wraps a message,
    // the others take plain text.
    const payload = run.driver === 'claude' ? { message: text } : { text };
    send.disabled = true;
    // What was sent comes back on the attach stream as an input frame
    // (R-ATT-11), to this viewer and every other, in its place. The box
    // empties at once, so what is typed while the call is under way is
    // kept; a refused message comes back into an empty box.
    input.value = '';
    tl.list.scrollToBottom();
    try {
      await api('POST', `${BASE}/runs/${encodeURIComponent(ref)}/input`, payload);
      banner('act', '', null);
      pollDelay = POLL_MIN;
    } catch (e) {
      if (!input.value) input.value = text;
      errBanner('act', e);
    } finally {
      send.disabled = false;
      input.focus();
    }
  }

  // schedule reads the row again after ms (default: the back-off delay).
  function schedule(ms) {
    clearTimeout(poll);
    if (destroyed || document.hidden) return;
    if (ms === undefined && watcher.changes && watcher.changes.open) return;
    const wait = ms !== undefined ? ms : pollDelay;
    poll = setTimeout(async () => {
      await load();
      if (ms === undefined) pollDelay = Math.min(POLL_MAX, run && LIVE.includes(run.state) ? pollDelay * 2 : POLL_MAX);
      schedule();
    }, wait);
  }
  const onVis = () => { if (!document.hidden) { pollDelay = POLL_MIN; load(); schedule(); } };
  document.addEventListener('visibilitychange', onVis);
  // The index's row of this run, as the change stream brings it: the
  // head follows without asking the node.
  const unlisten = watcher.listen((ev, data) => {
    if (ev === 'stream' && data.state !== 'open') schedule();
    if (ev !== 'run' || !data || data.run_ref !== ref || !run || Number(data.rev) <= Number(run.rev)) return;
    // The head is drawn again only when what it shows changed (not for
    // the ring's bounds or the usage a turn added).
    const shown = (r) => JSON.stringify({ ...r, rev: 0, ring_first_seq: 0, ring_last_seq: 0, usage: 0 });
    const same = shown(run) === shown(data);
    run = data;
    if (!same) renderHead();
  });
  get(`${BASE}/profiles`).then((ps) => {
    profiles = new Map(ps.items.map((p) => [p.ref, p]));
    if (run && !destroyed) renderHead();
  }).catch(() => {});
  load().then(() => schedule());
  loadEvents();
  return {
    destroy() {
      destroyed = true;
      unlisten();
      clearTimeout(poll);
      clearTimeout(actTimer);
      document.removeEventListener('visibilitychange', onVis);
      if (attach) attach.close();
      if (tl) tl.destroy();
      for (const p of panels.values()) p.destroy();
      watcher.setLabel('');
    },
  };
}
