// attention.js: which runs need the person, the page title that counts
// them, and desktop notifications when the tab is in the background.
//
// The reason is derived here from what the run row says today (state,
// limit, and pending_requests once the tools' questions reach the API);
// a run that carries the API's own `attention` field (R-ATTN-1) is taken
// at its word instead. Notifications are opt-in per reason, and one is
// shown per run per change of its reason, never per frame: the watcher
// compares run rows, not output.
import { get, session, BASE } from './api.js';
import { runName } from './dom.js';
import { Stream } from './sse.js';

// Changes follows the fleet-wide change stream, GET /v1/m/sessions/events
// (R-CHG-1). It keeps the last event id and reconnects with Last-Event-ID,
// so a drop loses nothing while the coordinator's log still holds what
// followed; when it does not, the stream says `reset` and the watcher
// reads the runs again (R-CHG-4).
class Changes extends Stream {
  constructor(onEvent, onState) {
    super({ onState, maxRetry: 8000 });
    this.onEvent = onEvent;
    this.lastId = '';
  }

  request() { return { url: `${BASE}/events`, headers: this.lastId ? { 'Last-Event-ID': this.lastId } : {} }; }

  receive({ name, id, data }) {
    if (id) this.lastId = id;
    this.onEvent(name, data);
    return false;
  }
}

// Reasons in the order they win when several apply.
export const REASONS = [
  ['needs_decision', 'waiting for your decision'],
  ['needs_approval', 'waiting for approval'],
  ['failed', 'failed'],
  ['limited', 'stopped on a limit'],
  ['stalled', 'stalled: its turn wrote nothing for a while'],
  ['needs_input', 'waiting for your input'],
];
const LABEL = Object.fromEntries(REASONS);

// attentionOf returns {reason, text} or null for a run row (R-CON-1).
export function attentionOf(r) {
  if (!r) return null;
  if ('attention' in r) {
    const a = r.attention;
    if (!a) return null;
    const reason = typeof a === 'string' ? a : (a.reason || a.kind || '');
    if (!reason) return null;
    // R-ATTN-2: the API derives it; the row carries what explains it.
    let text = LABEL[reason] || reason.replace(/_/g, ' ');
    if (reason === 'failed' && r.last_error) text += ` (${r.last_error.kind.replace(/_/g, ' ')})`;
    else if (reason === 'failed' && r.reason) text += ` (${r.reason.replace(/_/g, ' ')})`;
    return { reason, text };
  }
  let reason = '';
  if (r.pending_requests > 0) reason = 'needs_decision';
  else if (r.state === 'pending_approval') reason = 'needs_approval';
  else if (r.state === 'failed') reason = 'failed';
  else if (r.limit) reason = 'limited';
  else if (r.state === 'running' && r.stalled_since) reason = 'stalled';
  // An idle process has finished its turn (or its start) and waits for
  // the person's next message.
  else if (r.state === 'idle') reason = 'needs_input';
  if (!reason) return null;
  let text = LABEL[reason];
  if (reason === 'failed' && r.reason) text += ` (${r.reason.replace(/_/g, ' ')})`;
  return { reason, text };
}

const PREFS_KEY = 'olivares.notify';

export function notifyPrefs() {
  try { return JSON.parse(localStorage.getItem(PREFS_KEY) || '{}') || {}; } catch { return {}; }
}

export function setNotifyPref(reason, on) {
  const p = notifyPrefs();
  if (on) p[reason] = true; else delete p[reason];
  localStorage.setItem(PREFS_KEY, JSON.stringify(p));
  watcher.schedule();
}

// changeKey says when a run's call for the person is new (R-CON-2): its
// reason. While the change stream is open it brings every row, the running
// one between two finished turns included, so the reason alone tells them
// apart (a row's revision also moves for its usage, after the turn's end).
// Without the stream, a run waiting for input also keys on the row's
// revision, so a second finished turn is a new change even if both turns
// ran between two reads of the row.
function changeKey(r, a, streaming) {
  if (!a) return '';
  return a.reason === 'needs_input' && !streaming ? `${a.reason}#${r.rev ?? ''}` : a.reason;
}

// The watcher holds the last change seen per run. It follows the
// fleet-wide change stream (R-CHG-1), the one source of the attention
// count on every page (R-CON-8): a `reset` reads GET /runs once, a `run`
// event is the run's new row; pages subscribe to the stream's events
// through it instead of opening their own. It reads GET /runs on a timer
// only while the stream is down, and when a limit's reset time passes
// (what the stream does not carry, R-CHG-5). observe() fires one
// notification when a run's change is new and its reason one the person
// opted into, while the tab is in the background.
export const watcher = {
  seen: new Map(),      // run_ref → change key ('' for none)
  names: new Map(),     // run_ref → display name
  primed: false,        // the first observation only sets the baseline
  timer: 0,
  subs: new Set(),
  listeners: new Set(), // change stream listeners (name, data)
  changes: null,
  tenant: '',
  notified: [],         // what was shown, newest last (tests read it)
  observed: 0,          // observations so far (tests wait on it)
  // background says whether a notification is worth showing now.
  background: () => document.visibilityState !== 'visible' || !document.hasFocus(),
  // label is the page's own part of the title.
  label: '',

  observe(runs, { complete = false } = {}) {
    const prefs = notifyPrefs();
    const seenNow = new Set();
    for (const r of runs) {
      seenNow.add(r.run_ref);
      const a = attentionOf(r);
      const key = changeKey(r, a, !!(this.changes && this.changes.open));
      const before = this.seen.get(r.run_ref);
      this.seen.set(r.run_ref, key);
      if (r.limit && r.limit.resets_at) this.resets.set(r.run_ref, Date.parse(r.limit.resets_at)); else this.resets.delete(r.run_ref);
      this.names.set(r.run_ref, runName(r));
      // Snoozed and done runs do not call for the person.
      if (!this.primed || before === undefined || before === key || !a) continue;
      if (r.snoozed_until || r.done) continue;
      if (prefs[a.reason] && this.background()) this.notify(r, a);
    }
    if (complete) for (const ref of [...this.seen.keys()]) if (!seenNow.has(ref)) this.seen.delete(ref);
    this.primed = true;
    this.observed++;
    this.title();
    for (const fn of this.subs) fn();
    this.schedule();
  },

  count() {
    let n = 0;
    for (const v of this.seen.values()) if (v) n++;
    return n;
  },

  title() {
    const n = this.count();
    document.title = `${n ? `(${n}) ` : ''}${this.label ? `${this.label} · ` : ''}Olivares`;
  },

  setLabel(label) {
    this.label = label;
    this.title();
  },

  notify(r, a) {
    const name = this.names.get(r.run_ref);
    this.notified.push({ run_ref: r.run_ref, reason: a.reason });
    if (!('Notification' in window) || Notification.permission !== 'granted') return;
    const n = new Notification(`${name}: ${a.text}`, { body: `${r.driver} on ${r.node_id}`, tag: `${r.run_ref}:${a.reason}`, icon: '/assets/icon.svg' });
    n.onclick = () => { window.focus(); location.assign(`/runs/${encodeURIComponent(r.run_ref)}`); };
  },

  // start follows the change stream of the signed-in tenant (again after
  // a tenant switch); stop ends it at sign-out.
  start() {
    if (!session.tenant || !session.whoami) return;
    if (this.changes && this.tenant === session.tenant) return;
    this.stop();
    this.tenant = session.tenant;
    this.seen.clear();
    this.primed = false;
    this.changes = new Changes((name, data) => this.onChange(name, data), (state) => {
      this.schedule();
      for (const fn of this.listeners) fn('stream', { state });
    }).start();
  },

  stop() {
    if (this.changes) this.changes.close();
    this.changes = null;
    clearTimeout(this.timer);
  },

  onChange(name, data) {
    if (name === 'reset') this.poll();
    else if (name === 'run' && data && data.run_ref) this.observe([data]);
    else if (name === 'run_removed' && data) { this.seen.delete(data.run_ref); this.observe([]); }
    for (const fn of this.listeners) fn(name, data);
  },

  // listen subscribes fn(name, data) to the change stream's events.
  listen(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn); },

  // schedule: with the stream open, a read only when the earliest known
  // limit resets (its attention changes with time alone); without it,
  // one page of the newest runs every 15 s keeps the title and the
  // notifications current. GET /runs reads the coordinator's index only.
  schedule(ms = 15000) {
    clearTimeout(this.timer);
    if (!session.tenant || !session.whoami) return;
    if (this.changes && this.changes.open) {
      const resets = [...this.resets.values()].filter((t) => t > Date.now());
      if (!resets.length) return;
      ms = Math.min(...resets) - Date.now() + 1000;
    }
    this.timer = setTimeout(() => this.poll(), Math.min(ms, 2 ** 31 - 1));
  },
  resets: new Map(), // run_ref → the time its limit resets (ms)

  async poll() {
    try {
      const page = await get(`${BASE}/runs?pagination=cursor&limit=200`);
      this.observe(page.items, { complete: !page.next });
    } catch { /* the next poll tries again */ }
    this.schedule();
  },

  subscribe(fn) { this.subs.add(fn); return () => this.subs.delete(fn); },
};
window.olivaresAttention = watcher; // tests read it synchronously
