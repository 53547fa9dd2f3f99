// runhead.js: a run's head: its name, state and attention, what it runs on
// and where, the buttons its state allows (R-CON-6), and the banners its
// row implies. The dialogs behind Hand off, Move, Release and Delete are
// runactions.js, loaded when first opened; the limit banner's controls are
// runlimit.js.
import { h, replace, localTime, relTime, runName, toolName } from './dom.js';
import { api, get } from './api.js';
import { errorLine } from './ui.js';
import { attentionOf } from './attention.js';
import { limitText, onLimitHistory, runLink } from './runlimit.js';

export const LIVE = ['starting', 'running', 'idle'];

// exitWords says how a process ended, in words (R-CON-6): 143 is SIGTERM.
const SIGNALS = { 1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 6: 'SIGABRT', 9: 'SIGKILL', 13: 'SIGPIPE', 15: 'SIGTERM' };
export function exitWords(code, signal) {
  if (signal) return `was killed by ${signal}`;
  if (code === null || code === undefined) return 'ended, its exit code unobserved';
  if (code === 0) return 'exited normally (exit code 0)';
  if (code > 128 && SIGNALS[code - 128]) return `ended on ${SIGNALS[code - 128]} (exit code ${code})`;
  return `exited with an error (exit code ${code})`;
}

// runHead draws v.run into el on render(); v is the run view's state
// (run.js).
export function runHead(v) {
  const el = h('header', { class: 'run-head' });
  const { banner, errBanner, post } = v;
  const act = (what, done) => post(what, () => { banner('act', '', done); v.load(); });

  // confirmStop asks before it stops (R-CON-6): a stop ends the process,
  // and a running turn with it.
  async function confirmStop() {
    if (document.getElementById('stop-dialog')) return;
    const { modal } = await import('./ui.js');
    if (document.getElementById('stop-dialog')) return;
    const m = modal('stop-dialog', 'Stop the session?');
    const go = h('button', { type: 'button', class: 'danger', id: 'stop-confirm', onclick: () => { m.close(); stop(); } }, 'Stop');
    replace(m.body, h('p', null, v.run && v.run.state === 'running' ? 'The process is ended, and the running turn with it. The conversation stays; Resume starts the tool again.' :
      'The process is ended. The conversation stays; Resume starts the tool again.'),
    h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), go));
    go.focus();
  }

  async function stop() {
    const b = document.getElementById('stop');
    if (b) { b.disabled = true; b.textContent = 'Stopping…'; }
    try {
      const { data } = await api('POST', v.url('stop'));
      v.run = data;
      v.renderHead();
      // One banner says how it ended; the stream's end says the same
      // thing and takes its place.
      banner('act', '', null);
      banner('end', '', `Stopped: the process ${exitWords(data.exit_code, data.signal)}.`);
    } catch (e) { errBanner('act', e); v.load(); }
  }

  const resume = () => post('resume', ({ status, data }) => {
    v.run = data;
    for (const k of ['end', 'act']) v.banners.delete(k);
    banner('act', status === 202 ? 'warn' : '', status === 202 ? 'Resumed; the new generation waits for approval.' : `Resumed: generation ${data.generation}.`);
    v.renderHead();
    v.attach.restart();
  });
  const approve = () => post('approve', ({ data }) => {
    v.run = data;
    banner('act', '', 'Approved: the process starts.');
    v.renderHead();
    v.attach.restart();
  });
  const pin = () => post('pin', ({ data }) => { v.run.pinned = data.pinned; v.renderHead(); }, v.run.pinned ? 'DELETE' : 'POST');

  // codexHistory shows the bounded visible history the supervised branch
  // was created with (GET /runs/{ref}/codex-branch, R-CX-HIST-*).
  async function codexHistory() {
    const { modal } = await import('./ui.js');
    const m = modal('codex-history-dialog', 'The branch’s visible history', { wide: true });
    try {
      const b = await get(v.url('codex-branch'));
      replace(m.body, h('p', { class: 'muted' }, `${b.history.length} message${b.history.length === 1 ? '' : 's'} of the source thread, reasoning and tool calls left out.`),
        h('div', { class: 'transcript' }, b.history.map((x) => h('div', { class: `item ${x.role === 'user' ? 'user' : 'assistant'}` },
          x.role === 'user' ? h('div', { class: 'who' }, 'Person') : null, h('div', { class: 'text' }, x.text)))));
    } catch (e) {
      replace(m.body, errorLine(e));
    }
  }

  function render() {
    const r = v.run;
    const { canWrite, canAdmin, canApprove } = v;
    const live = LIVE.includes(r.state);
    const ended = !live && r.state !== 'pending_approval';
    const exit = ended && ((r.exit_code !== null && r.exit_code !== undefined) || r.signal) ? exitWords(r.exit_code, r.signal) : '';
    const btn = (id, label, fn, show, cls = '') => (show ? h('button', { type: 'button', id, class: cls, onclick: fn }, label) : null);
    const prof = v.profiles.get(r.provider_profile_ref);
    const att = attentionOf(r);
    const actions = (what) => import('./runactions.js').then((m) => what(m));
    const after = () => { v.load(); v.loadEvents(); };
    replace(el,
      h('div', { class: 'line1' }, h('h1', { id: 'run-name' }, runName(r)),
        h('span', { class: `state s-${r.state}`, id: 'run-state' }, r.state.replace('_', ' ')),
        exit ? h('span', { class: 'exit', id: 'run-exit' }, exit) : null,
        att ? h('span', { class: `attn at-${att.reason}`, id: 'run-attention' }, att.text) : null),
      h('div', { class: 'meta' },
        h('span', null, toolName(r.driver)), prof ? h('span', { title: r.provider_profile_ref }, `profile ${prof.name}`) : null,
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
        v.handedTo.length ? h('span', { id: 'handed-to' }, 'handed off to ', v.handedTo.map((x, i) => [i ? ', ' : '', runLink(x)])) : null,
        h('time', { datetime: r.created_at, title: localTime(r.created_at) }, `started ${relTime(r.started_at || r.created_at)}`)),
      h('div', { class: 'actions' },
        // R-CON-6: the buttons follow the run's state: Interrupt only
        // while a turn runs, Stop (which asks first) while it is live.
        btn('interrupt', 'Interrupt', () => act('interrupt', null), canWrite && r.state === 'running'), // the turn's end says it
        btn('stop', 'Stop', confirmStop, canWrite && live, 'ghost danger-text'),
        btn('resume', 'Resume', resume, canWrite && ended && r.state !== 'released'),
        btn('approve', 'Approve', approve, canApprove && r.state === 'pending_approval'),
        h('button', { type: 'button', id: 'pin', class: 'ghost', 'aria-pressed': String(!!r.pinned), onclick: pin }, r.pinned ? 'Unpin' : 'Pin'),
        btn('handoff', 'Hand off', () => actions((m) => m.openHandoff(v.run, after)), canWrite && r.state !== 'released' && r.state !== 'pending_approval' && r.driver !== 'grok', 'ghost'),
        btn('move', 'Move', () => actions((m) => m.openMove(v.run, after)), canWrite && r.state !== 'released', 'ghost'),
        btn('cleanup', 'Release', () => actions((m) => m.openCleanup(v.run, after)), canAdmin && (r.state === 'stopped' || r.state === 'failed'), 'ghost'),
        btn('delete', 'Delete', () => actions((m) => m.openDelete(v.run)), canAdmin && r.state === 'released', 'danger')));
  }

  // banners are what the row implies, beside the head.
  function banners() {
    const r = v.run;
    banner('unreachable', 'warn', r.node_reachable === false ? `Node ${r.node_id} is unreachable: the state shown is the last one it reported.` : null);
    banner('pending', 'warn', r.state === 'pending_approval' ? (v.canApprove ? 'This launch waits for approval. Approve it to start the process.' : 'This launch waits for approval by someone with workspace administration.') : null);
    banner('limit', 'warn', r.limit ? limitText(v, r.limit) : null);
    banner('onlimit', '', onLimitHistory(r));
    // The tools' permission requests and questions: the head's attention
    // badge says one waits; each is answered on its card, pinned above
    // the composer.
    banner('lasterror', 'error', r.last_error ? `The tool failed (${r.last_error.kind.replace('_', ' ')}): ${r.last_error.message}` : null);
    if (r.pending_requests !== v.cards.pending()) v.cards.refresh();
    banner('codex', 'warn', r.codex_binding && r.codex_binding.last_error ? `The branch's canonical Codex thread could not be created yet: ${r.codex_binding.last_error}. The next message tries again.` : null);
    banner('released', '', r.state === 'released' ? (v.canAdmin ? 'This session was released: its worktree and runtime state are gone. Delete removes its record for good.' : 'This session was released.') : null);
  }

  return { el, render, banners };
}
