// runactions.js: the write side of a run: hand off to another tool
// (R-HOF-*), move a Claude Code conversation to another account
// (R-MOVE-*), release (R-CLN-*, with "discard the worktree" behind a
// confirmation when the branch holds unmerged work) and delete (R-DEL-*,
// admins, released runs only). Each is a dialog over the public API.
import { h, replace, toolName } from './dom.js';
import { api, get, session, BASE } from './api.js';
import { navigate } from './app.js';
import { modal, errorLine, copyButton, say, bytes } from './ui.js';
import { loadEvents, cleanedText } from './events.js';

const LIVE = ['starting', 'running', 'idle'];
const runPath = (r, what) => `${BASE}/runs/${encodeURIComponent(r.run_ref)}${what ? `/${what}` : ''}`;

const profilesOf = async () => (await get(`${BASE}/profiles`)).items;

const SUMMARY_STATE = {
  delivered: 'The summary reached the new session as its first turn.',
  not_delivered: 'The first turn did not get through: send the text below to the new session yourself.',
  unknown: 'The first turn was written but not confirmed: check the new session before sending the text below again.',
  waits_for_approval: 'The new session waits for approval; no first turn is sent until it starts. The text below is what to send then.',
};

// openHandoff: preview the summary (GET handoff), edit it, pick the target
// profile, POST. A live source is stopped first by the server (R-HOF-4).
export async function openHandoff(run, onDone) {
  const m = modal('handoff-dialog', 'Hand off to another tool', { wide: true });
  const msg = h('p', { class: 'banner', hidden: true, id: 'handoff-msg' });
  m.body.append(msg, h('p', { class: 'muted' }, 'Reading the conversation on the node…'));
  let preview;
  let profiles;
  try {
    [preview, profiles] = await Promise.all([get(runPath(run, 'handoff')), profilesOf()]);
  } catch (e) {
    replace(m.body, errorLine(e, { id: 'handoff-error' }));
    return;
  }
  const targets = profiles.filter((p) => p.active !== false && p.node_id === run.node_id && p.tool !== 'grok');
  const summary = h('textarea', { id: 'handoff-summary', rows: 12, 'aria-label': 'Summary' });
  summary.value = preview.summary;
  const target = h('select', { id: 'handoff-profile', 'aria-label': 'Target profile' },
    targets.map((p) => h('option', { value: p.ref, selected: p.tool !== run.driver }, `${p.name} (${toolName(p.tool)})`)));
  const name = h('input', { type: 'text', id: 'handoff-name', maxlength: 200, placeholder: 'optional' });
  const go = h('button', { type: 'submit', id: 'handoff-submit' }, 'Hand off');
  const form = h('form', { class: 'stack', onsubmit: async (e) => {
    e.preventDefault();
    go.disabled = true;
    say(msg, '', LIVE.includes(run.state) ? 'Stopping the session, then starting the new one…' : 'Starting the new session…');
    const body = { provider_profile_ref: target.value, summary: summary.value };
    if (name.value.trim()) body.name = name.value.trim();
    try {
      const { status, data } = await api('POST', runPath(run, 'handoff'), body);
      result(status, data);
      if (onDone) onDone();
    } catch (err) {
      go.disabled = false;
      msg.hidden = true;
      form.prepend(errorLine(err, { workspaceRef: run.workspace_ref, id: 'handoff-error' }));
    }
  } },
  h('p', { class: 'meta' }, h('span', null, `from ${toolName(preview.source_driver)}`),
    h('span', null, `${preview.turns} turn${preview.turns === 1 ? '' : 's'} read`), h('span', null, `transcript ${bytes(preview.transcript_bytes)}`)),
  h('p', { class: 'muted' }, 'The summary was generated from the stored conversation without a model: review and edit it. The new session gets it as its first turn, with the path of the full transcript, in the same workspace.'),
  h('label', { for: 'handoff-summary' }, 'Summary'), summary,
  h('label', { for: 'handoff-profile' }, 'Continue in'), target,
  targets.length ? null : h('p', { class: 'banner warn' }, 'No active profile on this run\u2019s node can take it.'),
  h('label', { for: 'handoff-name' }, 'Name of the new session'), name,
  LIVE.includes(run.state) ? h('p', { class: 'banner warn' }, 'This session is live: it is stopped first, exactly as Stop does, and stays resumable.') : null,
  h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), go));
  m.body.replaceChildren(msg, form);

  function result(status, data) {
    const ft = h('textarea', { id: 'handoff-first-turn', readonly: true, rows: 8, 'aria-label': 'First turn' });
    ft.value = data.first_turn || '';
    replace(m.body,
      h('p', { class: `banner${data.summary_state === 'delivered' ? '' : ' warn'}`, id: 'handoff-state', dataset: { state: data.summary_state } },
        `${status === 202 ? 'Held for approval. ' : ''}${SUMMARY_STATE[data.summary_state] || data.summary_state}`),
      data.first_turn ? [h('label', { for: 'handoff-first-turn' }, 'First turn'), ft, copyButton('Copy the first turn', data.first_turn, { id: 'handoff-copy', fallback: ft })] : null,
      h('p', null, h('a', { href: `/runs/${encodeURIComponent(data.run_ref)}`, 'data-nav': true, id: 'handoff-new', onclick: () => m.close() }, 'Open the new session'),
        h('span', { class: 'muted' }, ` ${data.run_ref}`)));
  }
}

// openMove: a stopped or failed Claude Code run to another Claude Code
// profile of the same node (R-MOVE-1..3); every other run is told why not
// and offered the handoff.
export async function openMove(run, onDone) {
  const m = modal('move-dialog', 'Move to another account');
  const why = (text) => {
    replace(m.body, h('p', { class: 'banner', id: 'move-why' }, text),
      h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Close'),
        session.can('sessions:run:write') && run.driver !== 'grok' && run.state !== 'released' ? h('button', { type: 'button', id: 'move-handoff', onclick: () => { m.close(); openHandoff(run, onDone); } }, 'Hand off instead') : null));
  };
  if (run.driver !== 'claude') {
    why(`Only a Claude Code conversation can move between accounts: move copies Claude Code\u2019s own stored conversation into another profile\u2019s home. A ${toolName(run.driver)} session continues elsewhere by a handoff, which starts a new session from a summary and the transcript.`);
    return;
  }
  if (LIVE.includes(run.state) || run.state === 'pending_approval') {
    why('A live session cannot move: stop it first (its conversation must be complete on disk), then move it and resume it under the other account.');
    return;
  }
  if (run.state === 'released') {
    why('This session was released: there is nothing left on the node to move.');
    return;
  }
  let profiles;
  try { profiles = await profilesOf(); } catch (e) { replace(m.body, errorLine(e)); return; }
  const targets = profiles.filter((p) => p.tool === 'claude' && p.node_id === run.node_id && p.ref !== run.provider_profile_ref && p.active !== false);
  if (!targets.length) {
    why('No other active Claude Code profile on this node: an admin adds one (another account) with olivares profile add. A handoff can also continue the work in another tool.');
    return;
  }
  const target = h('select', { id: 'move-profile', 'aria-label': 'Target profile' }, targets.map((p) => h('option', { value: p.ref }, `${p.name} (${p.home})`)));
  const go = h('button', { type: 'submit', id: 'move-submit' }, 'Move');
  const form = h('form', { class: 'stack', onsubmit: async (e) => {
    e.preventDefault();
    go.disabled = true;
    try {
      const { data } = await api('POST', runPath(run, 'move'), { provider_profile_ref: target.value });
      const p = targets.find((x) => x.ref === data.provider_profile_ref);
      replace(m.body, h('p', { class: 'banner', id: 'move-done' }, `Moved to ${p ? p.name : data.provider_profile_ref}: the same session and conversation, now under that account. Resume it to continue; that profile\u2019s policy applies.`),
        h('div', { class: 'buttons' }, h('button', { type: 'button', onclick: m.close }, 'Close')));
      if (onDone) onDone(data);
    } catch (err) {
      go.disabled = false;
      form.prepend(errorLine(err, { id: 'move-error' }));
    }
  } },
  h('p', { class: 'muted' }, 'The conversation (its transcript, sub-agent and tool-result files) is copied to the other profile\u2019s home and verified; nothing starts. The source home is only read.'),
  h('label', { for: 'move-profile' }, 'Claude Code profile'), target,
  h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), go));
  replace(m.body, form);
}

// openCleanup releases a run (admin). A 409 for a worktree whose branch is
// not merged offers "discard the worktree", behind a second confirmation.
export function openCleanup(run, onDone) {
  const m = modal('cleanup-dialog', 'Release the session');
  const msg = h('div', { id: 'cleanup-msg' });
  const go = h('button', { type: 'button', id: 'cleanup-submit', onclick: () => release(false) }, 'Release');
  replace(m.body,
    h('p', null, run.worktree_branch ?
      `Releasing removes the worktree and its branch ${run.worktree_branch} when the branch is merged into the workspace\u2019s current branch and nothing is left uncommitted; otherwise it is refused and nothing changes.` :
      'Releasing removes the run\u2019s runtime state on its node; its output and ledger stay until it is deleted.'),
    h('p', { class: 'muted' }, 'Every pin, snooze and done mark on it is removed, for everybody.'),
    msg,
    h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), go));

  async function release(discard) {
    go.disabled = true;
    replace(msg, h('p', { class: 'muted' }, 'Releasing…'));
    try {
      const { data } = await api('POST', runPath(run, 'cleanup'), discard ? { discard_worktree: true } : {});
      let text = 'Released.';
      try {
        const evs = await loadEvents(run.run_ref);
        const cleaned = evs.filter((e) => e.kind === 'cleaned').pop();
        if (cleaned) text = cleanedText(typeof cleaned.detail === 'string' ? JSON.parse(cleaned.detail) : cleaned.detail);
      } catch { /* the outcome is also on the Events tab */ }
      replace(m.body, h('p', { class: 'banner', id: 'cleanup-done' }, text), h('div', { class: 'buttons' }, h('button', { type: 'button', onclick: m.close }, 'Close')));
      if (onDone) onDone(data);
    } catch (e) {
      go.disabled = false;
      const worktreeRefusal = ['unmerged_work', 'uncommitted_files', 'detached_head', 'worktree_unreachable', 'branch_gone'].includes(e.code);
      replace(msg, errorLine(e, { id: 'cleanup-error' }));
      if (!discard && e.status === 409 && worktreeRefusal) {
        const sure = h('input', { type: 'checkbox', id: 'discard-sure' });
        const discardBtn = h('button', { type: 'button', class: 'danger', id: 'discard-submit', disabled: true, onclick: () => release(true) }, 'Discard the worktree and release');
        sure.addEventListener('change', () => { discardBtn.disabled = !sure.checked; });
        msg.append(h('div', { class: 'confirm', id: 'discard-confirm' },
          h('p', null, e.code === 'worktree_unreachable' ?
            'Discarding releases the session and leaves the worktree in place, since the node cannot reach it.' :
            `Discarding removes the worktree and deletes the branch ${run.worktree_branch || ''} whatever it holds: commits that are not merged elsewhere and uncommitted files are lost.`),
          h('label', { class: 'check' }, sure, 'I understand: discard this work.'), h('div', { class: 'buttons' }, discardBtn)));
        go.hidden = true;
      }
    }
  }
}

// openDelete removes a released run for good (admins, R-DEL-1..3).
export function openDelete(run) {
  const m = modal('delete-dialog', 'Delete the session');
  const msg = h('div');
  const go = h('button', { type: 'button', class: 'danger', id: 'delete-submit', onclick: async () => {
    go.disabled = true;
    try {
      await api('DELETE', runPath(run));
      m.close();
      navigate('/');
    } catch (e) {
      go.disabled = false;
      replace(msg, errorLine(e, { id: 'delete-error' }));
    }
  } }, 'Delete for good');
  replace(m.body, h('p', null, 'The run\u2019s record, its output and its lifecycle ledger are removed from the node and from the index. The audit ledger keeps a sessions.run.deleted entry.'), msg,
    h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), go));
}

