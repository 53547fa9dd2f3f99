// claude.js: Claude Code supervision (docs/rules/claude-supervision.md): the
// fleet catalog of stored Claude Code conversations, each host's rows or
// its own error (R-CL-CAT-2), search on titles and directories and
// per-host paging; transcript pages through the run messages reader
// (R-CL-TRN-1); continue as a supervised run, refused while a run holds
// the conversation (R-CL-LEASE-1) or a claude process runs it (R-CL-RUN-2).
import { h, replace, localTime, relTime } from './dom.js';
import { get, session, BASE } from './api.js';
import { hostCatalog } from './catalog.js';
import { navigate } from './app.js';
import { errorLine, modal, say } from './ui.js';

const CAT = `${BASE}/catalog/claude/sessions`;

export function claudeView(main) {
  const status = h('p', { class: 'banner', hidden: true, id: 'claude-status' });
  const hostsEl = h('div', { id: 'claude-hosts' });
  const search = h('input', { type: 'search', id: 'claude-search', placeholder: 'Search titles and directories', 'aria-label': 'Search titles and directories' });
  const cat = hostCatalog(hostsEl, status, {
    url: CAT,
    search,
    row,
    none: h('p', { class: 'muted', id: 'claude-none' }, 'No node has Claude Code supervision on: a node turns it on in its own agent config ([claude_supervision] enabled = true).'),
    empty: 'No conversation.',
  });
  replace(main, h('div', { class: 'list-head' }, h('h1', null, 'Claude Code conversations')),
    h('p', { class: 'muted' }, 'The Claude Code conversations stored on the nodes that opted in, started in a terminal or by Olivares: read one, or continue it here.'),
    h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); cat.load(); } }, search, h('button', { type: 'submit', id: 'claude-go' }, 'Search')),
    status, hostsEl);
  if (!session.can('sessions:run:write')) {
    say(status, 'warn', 'The Claude Code catalog asks each node, so it needs the sessions:run:write permission, which your role lacks.');
    return { destroy() {} };
  }

  function row(hst, r) {
    const holder = r.lease_holder;
    return h('li', { class: 'row conversation', dataset: { session: r.session_id } },
      h('div', { class: 'line1' }, h('span', { class: 'title' }, r.title === null ? h('span', { class: 'muted' }, '(untitled)') : r.title),
        r.running_pid ? h('span', { class: 'badge warn running' }, `running (pid ${r.running_pid})`) : null),
      h('div', { class: 'meta' }, h('code', null, r.cwd || '?'), r.profile_ref ? h('span', null, `profile ${r.profile_ref}`) : h('span', null, 'user home'),
        h('time', { datetime: r.updated_at, title: localTime(r.updated_at) }, `updated ${relTime(r.updated_at)}`),
        h('span', null, `${Math.max(1, Math.round(r.size_bytes / 1024))} KiB`),
        holder ? h('span', { class: 'supervised' }, 'continued in ', h('a', { href: `/runs/${encodeURIComponent(holder)}`, 'data-nav': true }, holder)) : null),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'ghost act-transcript', onclick: () => transcript(hst, r) }, 'Transcript'),
        holder ? h('button', { type: 'button', class: 'act-open', onclick: () => navigate(`/runs/${encodeURIComponent(holder)}`) }, 'Open the run') :
          h('button', { type: 'button', class: 'act-continue', disabled: !!r.running_pid, title: r.running_pid ? 'End the claude process that runs it first' : '', onclick: () => cat.cont(`${encodeURIComponent(hst.host)}/${encodeURIComponent(r.session_id)}`) }, 'Continue')));
  }

  // transcript: pages of the conversation's messages, oldest first, later
  // pages appended (the run messages reader's pages, R-MSG-12/13).
  function transcript(hst, r) {
    const m = modal('transcript-dialog', r.title || r.session_id, { wide: true });
    const list = h('div', { class: 'transcript', id: 'transcript' });
    const later = h('button', { type: 'button', class: 'ghost', id: 'transcript-later', hidden: true }, 'Later messages');
    replace(m.body, list, later);
    let cursor = 0;
    async function page() {
      later.disabled = true;
      const p = new URLSearchParams({ role: 'all', text: '1' });
      if (cursor) p.set('cursor', String(cursor));
      try {
        const pg = await get(`${CAT}/${encodeURIComponent(hst.host)}/${encodeURIComponent(r.session_id)}/messages?${p}`);
        list.append(...pg.items.map((it) => h('div', { class: `item ${it.role}` }, it.role === 'user' ? h('div', { class: 'who' }, 'Person') : null,
          h('div', { class: 'text' }, it.text || it.first_line))));
        if (!list.children.length) list.append(h('p', { class: 'muted' }, 'No message.'));
        cursor = pg.next || 0;
      } catch (e) {
        list.append(errorLine(e));
        cursor = 0;
      }
      later.hidden = !cursor;
      later.disabled = false;
    }
    later.addEventListener('click', page);
    page();
  }

  cat.load();
  return { destroy() {} };
}
