// runtabs.js: a run's tabs: the conversation (with its raw-frames
// switch), and beside it the activity, messages, diff and events, each
// loaded when first shown and read again after a turn.
import { h } from './dom.js';
import { tabs } from './ui.js';

const READ_SIDE = ['claude', 'codex']; // activity and messages (R-ACT-2, R-MSG-1)

// runTabs are the run view v's (run.js) tabs.
export function runTabs(v) {
  const panels = new Map(); // tab → {refresh, destroy}
  const stale = new Set();  // tabs to read again when shown
  let actTimer = 0;
  let lastAct = 0;
  const rawToggle = h('input', { type: 'checkbox', id: 'raw-toggle', onchange: (e) => v.tl && v.tl.setRaw(e.target.checked) });
  const t = tabs([['conversation', 'Conversation'], ['activity', 'Activity'], ['messages', 'Messages'], ['diff', 'Diff'], ['events', 'Events']], { onShow: showTab });
  t.bar.append(h('label', { class: 'toggle raw-switch' }, rawToggle, 'Raw frames'));

  function showTab(name, el) {
    const url = new URL(location.href);
    if (name === 'conversation') url.searchParams.delete('tab'); else url.searchParams.set('tab', name);
    history.replaceState(null, '', url.pathname + url.search);
    if (name === 'conversation') {
      if (v.tl) v.tl.list.invalidateAll();
      return;
    }
    const { run } = v;
    if (!run) return;
    if (panels.has(name)) {
      if (stale.has(name)) { stale.delete(name); panels.get(name).refresh(); }
      return;
    }
    const load = {
      activity: () => import('./activity.js').then((m) => m.activityPanel(el, run)),
      messages: () => import('./messages.js').then((m) => m.messagesPanel(el, run)),
      diff: () => import('./diff.js').then((m) => m.diffPanel(el, run)),
      events: () => import('./events.js').then((m) => m.eventsPanel(el, run, { profiles: v.profiles })),
    }[name];
    panels.set(name, { refresh() {}, destroy() {} });
    load().then((p) => { if (v.destroyed) p.destroy(); else panels.set(name, p); });
  }

  return {
    bar: t.bar,
    panels: t.panels,
    // select shows the tab asked for, if the run has it.
    select(want) { t.select(want && !t.buttons.get(want)?.hidden ? want : 'conversation'); },
    // follow shows the tabs the run has: a diff with a workspace
    // (R-DIFF-10, a workspace's or worktree's edits), activity and
    // messages for the tools whose transcripts Olivares reads.
    follow(r) {
      t.buttons.get('diff').hidden = !r.workspace_ref;
      t.buttons.get('activity').hidden = t.buttons.get('messages').hidden = !READ_SIDE.includes(r.driver);
    },
    // turn: the activity, events and diff are read again when a turn
    // starts or ends, or a tool call finishes; at most every 3 s, and
    // once more shortly after a turn ends (Claude Code writes its
    // transcript in batches, a moment after its result frame).
    turn(kind) {
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
    },
    destroy() {
      clearTimeout(actTimer);
      for (const p of panels.values()) p.destroy();
    },
  };
}
