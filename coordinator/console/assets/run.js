// run.js: one run. runView puts the page together from its parts, each a
// file that takes the view's state (v, below):
//   runhead.js      the head: name, state, where it runs, the action buttons
//   runlimit.js     the limit banner's plan and continue, the on_limit history
//   timeline.js     the conversation (or the raw frames), from the tool's protocol
//   runattach.js    the attach stream feeding the timeline, cards and banners
//   runcomposer.js  the request cards, the working line and the composer
//   runtabs.js      the tabs: activity, messages, diff and events
// and keeps here the banners, the stderr and setup panes, and reading the
// run's row.
//
// Refreshing never hammers the node (R-CON-3): GET /runs/{ref} (which asks the
// node) is read again when the attach stream shows a turn start or end,
// an end or a notice, and after an action; the change stream's `run`
// events bring the row's other changes (R-CON-8). Only while that stream
// is down does a timer read it, backing off from 5 s to 60 s.
import { h, replace, runName } from './dom.js';
import { api, get, session, BASE } from './api.js';
import { errorLine } from './ui.js';
import { watcher } from './attention.js';
import { Timeline } from './timeline.js';
import { runHead, LIVE } from './runhead.js';
import { follow } from './runattach.js';
import { composer } from './runcomposer.js';
import { runTabs } from './runtabs.js';

const STDERR_MAX = 256 << 10;
const POLL_MIN = 5000;
const POLL_MAX = 60000;

export function runView(main, ref, { tab = '' } = {}) {
  // v is the view's state, shared with its parts: the run's row as last
  // read, the profiles by ref, the runs it was handed off to, the
  // timeline, and what each part offers the others.
  const v = {
    ref, run: null, profiles: new Map(), handedTo: [], tl: null, destroyed: false,
    canWrite: session.can('sessions:run:write'),
    canAdmin: session.can('sessions:run:admin'),
    canApprove: session.can('sessions:workspace:admin') && session.me && session.me.kind === 'human',
    url: (what) => `${BASE}/runs/${encodeURIComponent(ref)}${what ? `/${what}` : ''}`,
    banners: new Map(), // key → {cls, content}
    banner, errBanner, post, load, loadEvents, schedule, renderHead,
    resetBackoff: () => { pollDelay = POLL_MIN; },
  };
  let poll = 0;
  let pollDelay = POLL_MIN;

  const bannerEl = h('div', { class: 'banners', 'aria-live': 'polite' });
  const body = h('div', { class: 'run-body' });
  // The tool's stderr, and the setup command's output before the tool
  // (R-SETUP-2), each in a collapsed pane of its own; setup's shows once
  // there is some.
  const stderrOut = outPane('stderr');
  const setupOut = outPane('setup');
  setupOut.box.hidden = true;
  const head = runHead(v);
  const c = composer(v);
  v.cards = c.cards;
  v.showWorking = c.showWorking;
  v.attach = follow(v);
  const t = runTabs(v);
  body.append(c.emptyHint);
  t.panels.get('conversation').append(setupOut.box, body, c.working, stderrOut.box, c.reqEl, c.form);
  replace(main, h('div', { class: 'run' },
    h('nav', { class: 'crumbs' }, h('a', { href: '/', 'data-nav': true }, '← Sessions')),
    head.el, bannerEl, t.bar, [...t.panels.values()]));

  function banner(key, cls, content) {
    if (content === null) v.banners.delete(key); else v.banners.set(key, { cls, content });
    replace(bannerEl, [...v.banners.entries()].map(([k, b]) => (b.content instanceof Node ? b.content :
      h('p', { class: `banner ${b.cls}`, dataset: { kind: k }, role: b.cls === 'error' ? 'alert' : 'status' }, b.content))));
  }

  function errBanner(key, e) {
    const el = errorLine(e, { workspaceRef: v.run && v.run.workspace_ref });
    el.dataset.kind = key;
    banner(key, 'error', el);
  }

  // post asks for the run's action `what` and hands then the answer; a
  // refusal is said in the 'act' banner.
  async function post(what, then, method = 'POST', body = undefined) {
    try { then(await api(method, v.url(what), body)); } catch (e) { errBanner('act', e); }
  }

  function renderHead() {
    head.render();
    c.follow(LIVE.includes(v.run.state));
    c.showWorking();
    t.follow(v.run);
    head.banners();
  }

  // onTurn: the row is read again when a turn starts or ends, the tabs
  // beside the conversation also when a tool call finishes.
  function onTurn(kind) {
    pollDelay = POLL_MIN;
    if (kind !== 'tool_call') schedule(300);
    t.turn(kind);
  }

  async function load() {
    try {
      v.run = (await get(v.url('')));
      if (v.destroyed) return;
      banner('load', '', null);
      watcher.setLabel(runName(v.run));
      watcher.observe([v.run]);
      renderHead();
      if (!v.tl) {
        v.tl = new Timeline(body, v.run.driver, { onStderr: stderrOut.add, onSetup: setupOut.add, onTurn, onFlush: c.showWorking });
        v.attach.start(undefined);
        t.select(tab);
      }
    } catch (e) {
      if (e.status === 404 && v.run) {
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
      v.handedTo = evs.filter((e) => e.kind === 'handed_off').map((e) => {
        try { return (typeof e.detail === 'string' ? JSON.parse(e.detail) : e.detail || {}).to; } catch { return ''; }
      }).filter(Boolean);
      if (v.run && !v.destroyed) renderHead();
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

  // schedule reads the row again after ms (default: the back-off delay).
  function schedule(ms) {
    clearTimeout(poll);
    if (v.destroyed || document.hidden) return;
    if (ms === undefined && watcher.changes && watcher.changes.open) return;
    const wait = ms !== undefined ? ms : pollDelay;
    poll = setTimeout(async () => {
      await load();
      if (ms === undefined) pollDelay = Math.min(POLL_MAX, v.run && LIVE.includes(v.run.state) ? pollDelay * 2 : POLL_MAX);
      schedule();
    }, wait);
  }
  const onVis = () => { if (!document.hidden) { pollDelay = POLL_MIN; load(); schedule(); } };
  document.addEventListener('visibilitychange', onVis);
  // The index's row of this run, as the change stream brings it: the
  // head follows without asking the node.
  const unlisten = watcher.listen((ev, data) => {
    if (ev === 'stream' && data.state !== 'open') schedule();
    if (ev !== 'run' || !data || data.run_ref !== ref || !v.run || Number(data.rev) <= Number(v.run.rev)) return;
    // The head is drawn again only when what it shows changed (not for
    // the ring's bounds or the usage a turn added).
    const shown = (r) => JSON.stringify({ ...r, rev: 0, ring_first_seq: 0, ring_last_seq: 0, usage: 0 });
    const same = shown(v.run) === shown(data);
    v.run = data;
    if (!same) renderHead();
  });
  get(`${BASE}/profiles`).then((ps) => {
    v.profiles = new Map(ps.items.map((p) => [p.ref, p]));
    if (v.run && !v.destroyed) renderHead();
  }).catch(() => {});
  load().then(() => schedule());
  loadEvents();
  return {
    destroy() {
      v.destroyed = true;
      unlisten();
      clearTimeout(poll);
      document.removeEventListener('visibilitychange', onVis);
      v.attach.close();
      if (v.tl) v.tl.destroy();
      t.destroy();
      watcher.setLabel('');
    },
  };
}
