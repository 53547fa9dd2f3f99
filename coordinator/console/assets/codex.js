// codex.js: Codex supervision (docs/rules/codex-supervision.md): the fleet catalog of
// native Codex threads, each host's rows or its own error (R-CX-HOST-1),
// title search and per-host paging; bounded transcript pages read newest
// first and shown oldest first, older pages prepended (R-CX-TRN-3);
// continue as a supervised run (or open the one that exists); archive with
// the explicit no-other-runner confirmation (R-CX-ARC-1); the run holding
// a thread's lease when it is busy.
import { h, replace, localTime, relTime } from './dom.js';
import { api, get, session, BASE } from './api.js';
import { navigate } from './app.js';
import { hostCatalog } from './catalog.js';
import { errorLine, modal, say } from './ui.js';

const CAT = `${BASE}/catalog/codex/threads`;
const STATE = { idle: 'idle', active: 'active', notLoaded: 'activity unknown', error: 'error' };

export function codexView(main) {
  const canWrite = session.can('sessions:run:write');
  const status = h('p', { class: 'banner', hidden: true, id: 'codex-status' });
  const hostsEl = h('div', { id: 'codex-hosts' });
  const search = h('input', { type: 'search', id: 'codex-search', placeholder: 'Search titles', 'aria-label': 'Search titles' });
  const limit = h('select', { id: 'codex-limit', 'aria-label': 'Rows per host' }, ['20', '50', '100'].map((n) => h('option', { value: n, selected: n === '50' }, `${n} per host`)));
  const cat = hostCatalog(hostsEl, status, {
    url: CAT,
    search,
    params: () => ({ limit: limit.value }),
    row,
    none: h('p', { class: 'muted', id: 'codex-none' }, 'No node has Codex supervision on: a node turns it on in its own agent config ([codex_supervision] enabled = true).'),
    empty: 'No thread.',
  });
  replace(main, h('div', { class: 'list-head' }, h('h1', null, 'Codex threads')),
    h('p', { class: 'muted' }, 'The native Codex threads of the nodes that opted in to supervision: their own CLI and editor sessions, listed without being resumed or answered.'),
    h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); cat.load(); } }, search, limit, h('button', { type: 'submit', id: 'codex-go' }, 'Search')),
    status, hostsEl);
  if (!canWrite) {
    say(status, 'warn', 'The Codex catalog asks each node\u2019s Codex, so it needs the sessions:run:write permission, which your role lacks.');
    return { destroy() {} };
  }

  function row(hst, r) {
    const busy = r.lease_holder;
    const active = r.state === 'active' || r.state === 'error';
    const holderEl = busy ? (busy.startsWith('run_') ? h('a', { href: `/runs/${encodeURIComponent(busy)}`, 'data-nav': true }, busy) : busy) : null;
    return h('li', { class: 'row thread', dataset: { thread: r.thread_id } },
      h('div', { class: 'line1' }, h('span', { class: 'title' }, r.title === null ? h('span', { class: 'muted' }, '(untitled)') : r.title),
        h('span', { class: `state cx-${r.state}` }, STATE[r.state] || r.state)),
      h('div', { class: 'meta' }, h('code', null, r.cwd), r.git_branch ? h('span', null, `branch ${r.git_branch}`) : null,
        h('span', null, r.source), h('span', null, `${r.model_provider} · Codex ${r.codex_version}`),
        h('time', { datetime: r.updated_at, title: localTime(r.updated_at) }, `updated ${relTime(r.updated_at)}`),
        r.active_flags.length ? h('span', { class: 'badge warn' }, r.active_flags.join(', ')) : null,
        busy ? h('span', { class: 'badge warn lease' }, 'busy: written by ', holderEl) : null,
        r.supervised_run ? h('span', { class: 'supervised' }, 'continued in ', h('a', { href: `/runs/${encodeURIComponent(r.supervised_run)}`, 'data-nav': true }, r.supervised_run)) : null),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'ghost act-transcript', onclick: () => transcript(hst, r) }, 'Transcript'),
        r.supervised_run ? h('button', { type: 'button', class: 'act-open', onclick: () => navigate(`/runs/${encodeURIComponent(r.supervised_run)}`) }, 'Open the supervised run') :
          (!active && !busy ? h('button', { type: 'button', class: 'act-continue', onclick: () => cat.cont(`${encodeURIComponent(hst.host)}/${encodeURIComponent(r.thread_id)}`) }, 'Continue') : null),
        !active && !busy && !r.supervised_run ? h('button', { type: 'button', class: 'ghost act-archive', onclick: () => archive(hst, r) }, 'Archive') : null,
        active ? h('span', { class: 'muted' }, 'Active in another client: it cannot be continued or archived now.') : null));
  }

  function archive(hst, r) {
    const m = modal('archive-dialog', 'Archive the thread');
    const sure = h('input', { type: 'checkbox', id: 'archive-sure' });
    const msg = h('div');
    const go = h('button', { type: 'button', class: 'danger', id: 'archive-confirm', disabled: true, onclick: async () => {
      go.disabled = true;
      try {
        await api('POST', `${CAT}/${encodeURIComponent(hst.host)}/${encodeURIComponent(r.thread_id)}/archive`, { confirmNoOtherRunner: true });
        m.close();
        hst.rows = hst.rows.filter((x) => x.thread_id !== r.thread_id);
        cat.render();
        say(status, '', `Archived ${r.title || r.thread_id}: Codex\u2019s own clients can still restore it.`);
      } catch (e) {
        go.disabled = false;
        replace(msg, errorLine(e));
      }
    } }, 'Archive');
    sure.addEventListener('change', () => { go.disabled = !sure.checked; });
    replace(m.body, h('p', null, `Thread ${r.title || r.thread_id} on ${hst.hostname || hst.host} is archived in Codex itself. Olivares cannot see whether Codex Desktop, the CLI or an editor is running it right now (its activity here is “${STATE[r.state] || r.state}”).`),
      h('label', { class: 'check' }, sure, 'No other Codex client is running this thread.'), msg,
      h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), go));
  }

  // transcript: pages of at most 20 turns, newest first; each shown oldest
  // first, older ones put above (R-CX-TRN-2/3). A page over 20 MiB is a
  // placeholder, and the cursors around it go on (R-CX-TRN-6).
  function transcript(hst, r) {
    const m = modal('transcript-dialog', r.title || r.thread_id, { wide: true });
    const list = h('div', { class: 'transcript', id: 'transcript' });
    const older = h('button', { type: 'button', class: 'ghost', id: 'transcript-older', hidden: true }, 'Older turns');
    replace(m.body, older, list);
    let cursor = '';
    async function page() {
      older.disabled = true;
      const url = `${CAT}/${encodeURIComponent(hst.host)}/${encodeURIComponent(r.thread_id)}/turns${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`;
      try {
        const p = await get(url);
        const turns = (p.turns || []).slice().reverse();
        list.prepend(...turns.map(turnEl));
        if (!turns.length && !list.children.length) list.append(h('p', { class: 'muted' }, 'No persisted turn.'));
        cursor = p.next_cursor || '';
      } catch (e) {
        if (e.status === 422 && e.code === 'page_too_large') {
          list.prepend(h('p', { class: 'banner warn' }, 'A page of turns over 20 MiB was not sent; older turns follow.'));
          cursor = (e.body && e.body.next_cursor) || '';
        } else {
          list.prepend(errorLine(e));
          cursor = '';
        }
      }
      older.hidden = !cursor;
      older.disabled = false;
    }
    older.addEventListener('click', page);
    page();
  }

  cat.load();
  return { destroy() {} };
}

function itemEl(it) {
  switch (it.type) {
    case 'userMessage': return h('div', { class: 'item user' }, h('div', { class: 'who' }, 'Person'),
      h('div', { class: 'text' }, (it.content || []).map((c) => (c.type === 'text' ? c.text : `[${c.type}]`)).join('\n')));
    case 'agentMessage': return h('div', { class: 'item assistant' }, h('div', { class: 'text' }, it.text || ''));
    case 'reasoning': return h('div', { class: 'item thinking' }, h('div', { class: 'text' }, [...(it.summary || [])].join('\n')));
    case 'commandExecution': return h('details', { class: 'item tool' }, h('summary', null, h('span', { class: 'tname' }, 'command'), ' ', it.command || ''),
      it.aggregatedOutput ? h('pre', null, it.aggregatedOutput) : null);
    case 'fileChange': return h('div', { class: 'item tool' }, 'edit ', (it.changes || []).map((c) => c.path).join(', '));
    default: return h('div', { class: 'item system' }, it.type || 'item');
  }
}

function turnEl(t) {
  return h('div', { class: `cx-turn t-${t.status || ''}` }, (t.items || []).map(itemEl),
    t.status && t.status !== 'completed' ? h('div', { class: 'item turn-end' }, `turn ${t.status}`) : null);
}
