// list.js: the sessions list (GET /runs). Pinned runs first, then the
// others, then "Earlier" for runs marked done (R-DONE-1); snoozed runs
// hidden until their time (R-SNZ-4) and archived ones left out (R-ARC-4),
// each with a toggle. Each row says when the run needs the person
// (attention.js). It follows the fleet-wide change stream (R-CHG-1)
// through the attention watcher, which holds the page's one stream: a
// `reset` refetches, the other events change rows in place at once, and
// nothing is read while nothing changes (R-CON-8).
import { h, replace, relTime, localTime, runName, TOOLS } from './dom.js';
import { api, get, session, explain, BASE } from './api.js';
import { openLaunch } from './launch.js';
import { attentionOf, watcher } from './attention.js';
const PAGE = 100;
const STATES = ['pending_approval', 'starting', 'running', 'idle', 'failed', 'stopped', 'released'];

export function listView(main) {
  const st = {
    runs: new Map(), order: [], next: '', error: '', loaded: false,
    filters: { state: '', tool: '', node: '', workspace: '', q: '', attention: false },
    showSnoozed: false, showArchived: false,
    profiles: new Map(), workspaces: new Map(), nodes: new Map(),
    editing: '', snoozing: '',
  };
  let destroyed = false;
  const canWrite = session.can('sessions:run:write');

  const listEl = h('div', { class: 'runs', id: 'runs', 'aria-live': 'polite' });
  const status = h('p', { class: 'banner error', role: 'alert', hidden: true });
  const more = h('button', { type: 'button', class: 'ghost', id: 'more', hidden: true, onclick: loadMore }, 'Load more');
  const filterBar = filters();
  replace(main,
    h('div', { class: 'list-head' },
      h('h1', null, 'Sessions'),
      canWrite ? h('button', { type: 'button', id: 'launch', onclick: () => openLaunch() }, 'New session') : null),
    filterBar, status, listEl, more);

  function filters() {
    const sel = (id, label, opts, key) => h('select', { id, 'aria-label': label, onchange: (e) => { st.filters[key] = e.target.value; if (key === 'state') refresh(true); else render(); } },
      h('option', { value: '' }, label), opts.map(([v, t]) => h('option', { value: v }, t)));
    const bar = h('div', { class: 'filters' },
      h('input', { type: 'search', id: 'q', placeholder: 'Search names', 'aria-label': 'Search names', oninput: (e) => { st.filters.q = e.target.value; render(); } }),
      sel('f-state', 'Any state', STATES.map((s) => [s, s.replace('_', ' ')]), 'state'),
      sel('f-tool', 'Any tool', TOOLS, 'tool'),
      h('span', { id: 'f-node-slot' }),
      h('span', { id: 'f-ws-slot' }),
      h('label', { class: 'toggle' }, h('input', { type: 'checkbox', id: 'f-attention', onchange: (e) => { st.filters.attention = e.target.checked; render(); } }), 'Needs me'),
      h('label', { class: 'toggle' }, h('input', { type: 'checkbox', id: 'show-snoozed', onchange: (e) => { st.showSnoozed = e.target.checked; render(); } }), 'Snoozed'),
      h('label', { class: 'toggle' }, h('input', { type: 'checkbox', id: 'show-archived', onchange: (e) => { st.showArchived = e.target.checked; render(); } }), 'Archived'));
    return bar;
  }

  function refillSelects() {
    const mk = (id, label, entries, key) => {
      const s = h('select', { id, 'aria-label': label, onchange: (e) => { st.filters[key] = e.target.value; render(); } },
        h('option', { value: '' }, label), entries.map(([v, t]) => h('option', { value: v, selected: st.filters[key] === v }, t)));
      return s;
    };
    replace(filterBar.querySelector('#f-node-slot'), mk('f-node', 'Any node', [...st.nodes.values()].map((n) => [n.id, n.hostname || n.id]), 'node'));
    replace(filterBar.querySelector('#f-ws-slot'), mk('f-ws', 'Any workspace', [...st.workspaces.values()].map((w) => [w.ref, w.name]), 'workspace'));
  }

  async function loadRefs() {
    try {
      const [ps, ws, ns] = await Promise.all([get(`${BASE}/profiles`), get(`${BASE}/workspaces`), get('/v1/nodes')]);
      st.profiles = new Map(ps.items.map((p) => [p.ref, p]));
      st.workspaces = new Map(ws.items.map((w) => [w.ref, w]));
      st.nodes = new Map(ns.items.map((n) => [n.id, n]));
      refillSelects();
    } catch (e) { showError(e); }
  }

  function query(extra) {
    const p = new URLSearchParams(extra);
    if (st.filters.state) p.set('state', st.filters.state);
    return `${BASE}/runs?${p}`;
  }

  // refresh reloads the first page (cursor mode) and, in default mode, the
  // caller's pins that fall outside it (R-LIST-3).
  async function refresh(reset = false) {
    try {
      const [page, pins] = await Promise.all([
        get(query({ pagination: 'cursor', limit: PAGE })),
        get(query({ limit: 1 })),
      ]);
      if (destroyed) return;
      if (reset) { st.runs.clear(); st.order = []; }
      const seen = new Set();
      for (const r of [...page.items, ...pins.items]) {
        seen.add(r.run_ref);
        st.runs.set(r.run_ref, r);
      }
      if (reset || !st.next) st.next = page.next || '';
      // When the first page holds every run, a row it lacks was deleted.
      if (!page.next) for (const ref of [...st.runs.keys()]) if (!seen.has(ref)) st.runs.delete(ref);
      st.loaded = true;
      hideError();
      // An open rename or snooze form is not torn down under the person.
      if (!st.editing && !st.snoozing) render();
    } catch (e) { showError(e); }
  }

  async function loadMore() {
    if (!st.next) return;
    try {
      const page = await get(query({ pagination: 'cursor', limit: PAGE, cursor: st.next }));
      for (const r of page.items) st.runs.set(r.run_ref, r);
      st.next = page.next || '';
      render();
    } catch (e) { showError(e); }
  }

  function showError(e) {
    status.hidden = false;
    status.textContent = explain(e);
  }
  function hideError() { status.hidden = true; }

  function activity(r) { return r.ended_at || r.started_at || r.created_at; }

  function visible(r) {
    const f = st.filters;
    if (f.tool && r.driver !== f.tool) return false;
    if (f.node && r.node_id !== f.node) return false;
    if (f.workspace && r.workspace_ref !== f.workspace) return false;
    if (f.q && !runName(r).toLowerCase().includes(f.q.toLowerCase())) return false;
    if (f.attention && !attentionOf(r)) return false;
    return true;
  }


  function render() {
    const all = [...st.runs.values()].filter(visible);
    const hiddenSnoozed = all.filter((r) => r.snoozed_until && !st.showSnoozed).length;
    const hiddenArchived = all.filter((r) => r.archived_at && !st.showArchived).length;
    const rows = all.filter((r) => (st.showSnoozed || !r.snoozed_until) && (st.showArchived || !r.archived_at));
    const byActivity = (a, b) => String(activity(b)).localeCompare(String(activity(a)));
    const pinned = rows.filter((r) => r.pinned && !r.done).sort((a, b) => String(b.pinned_at).localeCompare(String(a.pinned_at)));
    const others = rows.filter((r) => !r.pinned && !r.done).sort(byActivity);
    const earlier = rows.filter((r) => r.done).sort(byActivity);
    st.order = [...pinned, ...others, ...earlier].map((r) => r.run_ref);
    const group = (id, title, list) => (list.length ? h('section', { class: 'group', id, 'aria-label': title },
      h('h2', null, title, h('span', { class: 'count' }, String(list.length))), h('ul', { class: 'rows' }, list.map(row))) : null);
    const notes = [];
    if (hiddenSnoozed) notes.push(`${hiddenSnoozed} snoozed hidden`);
    if (hiddenArchived) notes.push(`${hiddenArchived} archived hidden`);
    replace(listEl,
      !st.loaded ? h('p', { class: 'muted' }, 'Loading…') : null,
      st.loaded && !rows.length ? h('p', { class: 'empty muted' }, canWrite ? 'No sessions here. Start one with “New session”.' : 'No sessions here.') : null,
      group('g-pinned', 'Pinned', pinned),
      group('g-sessions', 'Sessions', others),
      group('g-earlier', 'Earlier', earlier),
      notes.length ? h('p', { class: 'muted hidden-note' }, notes.join(' · ')) : null);
    more.hidden = !st.next;
  }

  function badge(r) {
    const cls = `state s-${r.state}`;
    let text = r.state.replace('_', ' ');
    if (!['running', 'idle', 'starting', 'pending_approval'].includes(r.state)) {
      if (r.exit_code !== null && r.exit_code !== undefined) text += ` · exit ${r.exit_code}`;
      else if (r.signal) text += ` · ${r.signal}`;
    }
    return h('span', { class: cls }, text);
  }

  function row(r) {
    const p = st.profiles.get(r.provider_profile_ref);
    const w = st.workspaces.get(r.workspace_ref);
    const n = st.nodes.get(r.node_id);
    const li = h('li', { class: `row${r.archived_at ? ' archived' : ''}`, dataset: { ref: r.run_ref } });
    const title = st.editing === r.run_ref ? renameForm(r) : h('a', { href: `/runs/${encodeURIComponent(r.run_ref)}`, 'data-nav': true, class: 'title' }, runName(r));
    const meta = h('div', { class: 'meta' },
      h('span', { class: 'tool' }, r.driver), p ? h('span', null, p.name) : null,
      h('span', { class: 'node' }, n ? (n.hostname || n.id) : r.node_id, r.node_reachable === false ? h('span', { class: 'badge warn' }, 'unreachable') : null),
      w ? h('span', null, w.name) : null,
      r.limit ? h('span', { class: 'badge warn', title: r.limit.resets_at ? localTime(r.limit.resets_at) : '' }, `${r.limit.kind} limit${r.limit.resets_at ? `, resets ${relTime(r.limit.resets_at)}` : ''}`) : null,
      r.snoozed_until ? h('span', { class: 'badge' }, `snoozed until ${localTime(r.snoozed_until)}`) : null,
      r.archived_at ? h('span', { class: 'badge' }, 'archived') : null,
      h('time', { datetime: activity(r), title: localTime(activity(r)) }, relTime(activity(r))));
    // One tap for the common action (pin); the others in the row's menu.
    const actions = h('div', { class: 'actions' },
      act(r.pinned ? 'Unpin' : 'Pin', 'pin', () => mark(r, 'pin', r.pinned ? 'DELETE' : 'POST'), r.pinned),
      h('details', { class: 'row-menu' }, h('summary', { class: 'act', 'aria-label': 'More actions' }, '⋯'),
        h('div', { class: 'row-menu-items' },
          act(r.snoozed_until ? 'Unsnooze' : 'Snooze', 'snooze', () => (r.snoozed_until ? mark(r, 'snooze', 'DELETE') : toggleSnooze(r))),
          act(r.done ? 'Undone' : 'Done', 'done', () => mark(r, 'done', r.done ? 'DELETE' : 'POST'), r.done),
          canWrite ? act('Rename', 'rename', () => { st.editing = r.run_ref; render(); }) : null,
          canWrite ? act(r.archived_at ? 'Unarchive' : 'Archive', 'archive', () => mark(r, 'archive', r.archived_at ? 'DELETE' : 'POST')) : null)));
    const att = attentionOf(r);
    li.append(h('div', { class: 'line1' }, title, h('span', { class: 'badges' },
      att ? h('span', { class: `attn at-${att.reason}`, title: 'This session needs you' }, att.text) : null, badge(r))),
    meta, actions);
    if (r.last_message) meta.before(h('p', { class: 'preview', title: r.last_message }, r.last_message)); // R-LIST-8
    if (st.snoozing === r.run_ref) li.append(snoozeForm(r));
    return li;
  }

  function act(label, name, fn, pressed) {
    return h('button', { type: 'button', class: `act act-${name}`, 'aria-pressed': pressed === undefined ? undefined : String(!!pressed), onclick: (e) => { e.stopPropagation(); fn(); } }, label);
  }

  function renameForm(r) {
    const input = h('input', { type: 'text', class: 'rename', value: r.name || '', maxlength: 200, 'aria-label': 'Name' });
    const f = h('form', { class: 'rename-form', onsubmit: async (e) => {
      e.preventDefault();
      try {
        const { data } = await api('PUT', `${BASE}/runs/${encodeURIComponent(r.run_ref)}/name`, { name: input.value });
        st.runs.set(r.run_ref, data);
        st.editing = '';
        render();
      } catch (err) { showError(err); }
    } }, input, h('button', { type: 'submit' }, 'Save'), h('button', { type: 'button', class: 'ghost', onclick: () => { st.editing = ''; render(); } }, 'Cancel'));
    queueMicrotask(() => { input.focus(); input.select(); });
    f.addEventListener('keydown', (e) => { if (e.key === 'Escape') { st.editing = ''; render(); } });
    return f;
  }

  function toggleSnooze(r) {
    st.snoozing = st.snoozing === r.run_ref ? '' : r.run_ref;
    render();
  }

  function snoozeForm(r) {
    const at = (ms) => new Date(Date.now() + ms).toISOString();
    const tomorrow9 = () => { const d = new Date(); d.setDate(d.getDate() + 1); d.setHours(9, 0, 0, 0); return d.toISOString(); };
    const monday9 = () => { const d = new Date(); d.setDate(d.getDate() + ((8 - d.getDay()) % 7 || 7)); d.setHours(9, 0, 0, 0); return d.toISOString(); };
    const picker = h('input', { type: 'datetime-local', 'aria-label': 'Snooze until' });
    const go = (until) => mark(r, 'snooze', 'POST', { until });
    return h('div', { class: 'snooze' },
      h('button', { type: 'button', class: 'preset', onclick: () => go(at(3600e3)) }, '1 hour'),
      h('button', { type: 'button', class: 'preset', onclick: () => go(at(4 * 3600e3)) }, '4 hours'),
      h('button', { type: 'button', class: 'preset', onclick: () => go(tomorrow9()) }, 'Tomorrow 9:00'),
      h('button', { type: 'button', class: 'preset', onclick: () => go(monday9()) }, 'Monday 9:00'),
      picker,
      h('button', { type: 'button', onclick: () => { if (picker.value) go(new Date(picker.value).toISOString()); } }, 'Snooze'));
  }

  async function mark(r, what, method, body) {
    try {
      const { data } = await api(method, `${BASE}/runs/${encodeURIComponent(r.run_ref)}/${what}`, body);
      const cur = { ...st.runs.get(r.run_ref) };
      if (what === 'pin') Object.assign(cur, { pinned: data.pinned, pinned_at: data.pinned_at || undefined });
      else if (what === 'snooze' || what === 'done') { cur.done = data.done; cur.snoozed_until = data.snoozed_until; }
      else Object.assign(cur, data, { archived_at: data.archived_at });
      if (what === 'archive' && !data.archived_at) delete cur.archived_at;
      st.runs.set(r.run_ref, cur);
      st.snoozing = '';
      hideError();
      render();
    } catch (e) { showError(e); }
  }

  // R-CHG-2: apply one change to the rows.
  function onChange(name, data) {
    if (destroyed || !data) return;
    if (name === 'reset') { refresh(); return; }
    if (name === 'run') {
      const cur = st.runs.get(data.run_ref);
      // A row older than the one held (a fetch overtook the event) is kept out.
      if (cur && Number(data.rev) < Number(cur.rev)) return;
      st.runs.set(data.run_ref, data);
    } else if (name === 'mark') {
      const cur = st.runs.get(data.run_ref);
      if (!cur) return;
      const next = { ...cur, pinned: data.pinned, done: data.done };
      if (data.pinned_at) next.pinned_at = data.pinned_at; else delete next.pinned_at;
      if (data.snoozed_until) next.snoozed_until = data.snoozed_until; else delete next.snoozed_until;
      st.runs.set(data.run_ref, next);
    } else if (name === 'run_removed') {
      st.runs.delete(data.run_ref);
    } else if (name === 'node') {
      for (const [ref, r] of st.runs) {
        if (r.node_id !== data.node_id) continue;
        const next = { ...r };
        if (data.connected) delete next.node_reachable; else next.node_reachable = false;
        st.runs.set(ref, next);
      }
    } else return;
    changesSeen.push({ name, run_ref: data.run_ref || data.node_id });
    if (!st.editing && !st.snoozing) render();
  }
  const changesSeen = [];
  window.olivaresChanges = changesSeen; // tests read what the stream applied
  const unlisten = watcher.listen((name, data) => {
    if (name === 'stream') listEl.dataset.stream = data.state; else onChange(name, data);
  });
  listEl.dataset.stream = watcher.changes && watcher.changes.open ? 'open' : 'connecting';

  loadRefs().then(() => render());
  refresh();
  return {
    destroy() {
      destroyed = true;
      unlisten();
    },
  };
}
