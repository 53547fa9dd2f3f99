// messages.js: the Messages tab (R-MSG-*): what was said, read on the node
// from the tool's own transcript. Search (q, case-insensitive), mine or
// all, jump to a time (at), oldest or newest first, paging with next, one
// message in full on click, and "copy the whole conversation", which
// follows next with text=1 (50 messages a page, R-MSG-8). Clipped messages
// (cut at 64 KiB) are marked.
import { h, replace, localTime } from './dom.js';
import { get, BASE } from './api.js';
import { errorLine, modal, copyButton } from './ui.js';

const PAGE = 50;

export function messagesPanel(el, run) {
  const base = `${BASE}/runs/${encodeURIComponent(run.run_ref)}/messages`;
  const st = { q: '', role: 'user', at: '', order: 'asc', next: null, items: [], total: 0, transcript: '', open: new Map() };
  let seq = 0; // drops answers of superseded queries
  const q = h('input', { type: 'search', id: 'msg-q', placeholder: 'Search messages', maxlength: 256, 'aria-label': 'Search messages' });
  const role = h('select', { id: 'msg-role', 'aria-label': 'Whose messages' }, h('option', { value: 'user' }, 'Mine'), h('option', { value: 'all' }, 'All'));
  const at = h('input', { type: 'datetime-local', id: 'msg-at', 'aria-label': 'From this time' });
  const order = h('select', { id: 'msg-order', 'aria-label': 'Order' }, h('option', { value: 'asc' }, 'Oldest first'), h('option', { value: 'desc' }, 'Newest first'));
  const list = h('ol', { class: 'messages', id: 'msg-list' });
  const info = h('p', { class: 'muted', id: 'msg-info' });
  const more = h('button', { type: 'button', class: 'ghost', id: 'msg-more', hidden: true, onclick: () => page(false) }, 'More');
  const copy = h('button', { type: 'button', class: 'ghost', id: 'msg-copy', onclick: copyAll }, 'Copy the whole conversation');
  const form = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); apply(); } },
    q, role, h('label', { class: 'toggle' }, 'from ', at), order, h('button', { type: 'submit', id: 'msg-search' }, 'Search'), copy);
  role.addEventListener('change', apply);
  order.addEventListener('change', apply);
  at.addEventListener('change', apply);
  replace(el, form, info, list, more);

  function apply() {
    st.q = q.value;
    st.role = role.value;
    st.at = at.value ? new Date(at.value).toISOString() : '';
    st.order = order.value;
    page(true);
  }

  function query(extra = {}) {
    const p = new URLSearchParams();
    if (st.role === 'all') p.set('role', 'all');
    if (st.q) p.set('q', st.q);
    if (st.at) p.set('at', st.at);
    if (st.order === 'desc') p.set('order', 'desc');
    p.set('limit', String(PAGE));
    for (const [k, v] of Object.entries(extra)) p.set(k, v);
    return `${base}?${p}`;
  }

  async function page(reset) {
    const my = ++seq;
    if (reset) { st.next = null; st.items = []; st.open.clear(); }
    try {
      const r = await get(query(st.next ? { cursor: String(st.next) } : {}));
      if (my !== seq) return;
      // Within a page items run oldest to newest (R-MSG-6); newest first
      // shows each page the other way round.
      const items = st.order === 'desc' ? r.items.slice().reverse() : r.items;
      st.items.push(...items);
      st.next = r.next || null;
      st.total = r.total;
      st.transcript = r.transcript;
      render();
    } catch (e) {
      if (my !== seq) return;
      replace(list, h('li', null, errorLine(e, { id: 'msg-error' })));
      more.hidden = true;
    }
  }

  function render() {
    const what = st.role === 'all' ? 'messages' : 'messages of yours';
    info.textContent = st.transcript === 'pending' ? 'The tool has not written its transcript yet.' :
      st.transcript === 'missing' ? 'The transcript is missing on the node.' :
        `${st.items.length} of ${st.total} ${what}${st.q ? ` containing “${st.q}”` : ''}${st.at ? ` from ${localTime(st.at)}` : ''}`;
    replace(list, st.items.map(item));
    if (!st.items.length && st.transcript === 'read') list.append(h('li', { class: 'muted' }, 'No message matches.'));
    more.hidden = !st.next;
  }

  function item(m) {
    const li = h('li', { class: `msg r-${m.role}`, dataset: { id: String(m.id) } });
    const head = h('button', { type: 'button', class: 'ghost msg-head', 'aria-expanded': String(st.open.has(m.id)), onclick: () => toggle(m, li, head) },
      h('span', { class: 'who' }, m.role === 'user' ? 'You' : 'Tool'), ' ', h('span', { class: 'first' }, m.first_line || '(no text)'),
      m.clipped ? h('span', { class: 'badge warn clipped' }, 'clipped at 64 KiB') : null,
      m.at ? h('time', { datetime: m.at, title: localTime(m.at) }, ` ${localTime(m.at)}`) : null,
      h('span', { class: 'muted' }, ` #${m.id}`));
    li.append(head);
    if (st.open.has(m.id)) li.append(st.open.get(m.id));
    return li;
  }

  async function toggle(m, li, head) {
    if (st.open.has(m.id)) {
      st.open.get(m.id).remove();
      st.open.delete(m.id);
      head.setAttribute('aria-expanded', 'false');
      return;
    }
    const box = h('div', { class: 'msg-full' }, h('p', { class: 'muted' }, 'Loading…'));
    st.open.set(m.id, box);
    li.append(box);
    head.setAttribute('aria-expanded', 'true');
    try {
      const full = await get(`${base}?id=${m.id}`);
      replace(box, h('div', { class: 'text' }, full.text),
        full.clipped ? h('p', { class: 'badge warn clipped' }, 'This message is longer than 64 KiB: the text ends where it was cut, at […].') : null,
        full.later_same ? h('p', { class: 'muted' }, `The same first line comes ${full.later_same} more time${full.later_same === 1 ? '' : 's'} later.`) : null);
    } catch (e) {
      replace(box, errorLine(e));
    }
  }

  // copyAll reads the whole conversation, both sides, 50 messages a page
  // following next, and offers it for the clipboard.
  async function copyAll() {
    const m = modal('copy-dialog', 'The whole conversation', { wide: true });
    const note = h('p', { class: 'muted', id: 'copy-note' }, 'Reading…');
    const out = h('textarea', { id: 'copy-text', readonly: true, rows: 16, 'aria-label': 'The conversation as text' });
    m.body.append(note, out);
    let cursor = null;
    let n = 0;
    let clipped = 0;
    const parts = [];
    try {
      for (;;) {
        const p = new URLSearchParams({ role: 'all', text: '1', limit: '50' });
        if (cursor) p.set('cursor', String(cursor));
        const r = await get(`${base}?${p}`);
        for (const it of r.items) {
          n++;
          if (it.clipped) clipped++;
          parts.push(`## ${it.role === 'user' ? 'You' : 'Tool'}${it.at ? ` — ${it.at}` : ''}\n\n${it.text ?? ''}\n`);
        }
        note.textContent = `Read ${n} messages…`;
        if (!r.next || !m.dlg.isConnected) break;
        cursor = r.next;
      }
    } catch (e) {
      m.body.prepend(errorLine(e));
    }
    const text = parts.join('\n');
    out.value = text;
    note.textContent = `${n} messages${clipped ? `, ${clipped} clipped at 64 KiB (they end with […])` : ''}.`;
    m.body.append(h('div', { class: 'buttons' }, copyButton('Copy', text, { id: 'copy-button', fallback: out })));
  }

  page(true);
  return { refresh: () => page(true), destroy() {} };
}
