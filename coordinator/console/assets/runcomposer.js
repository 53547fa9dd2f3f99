// runcomposer.js: what sits below a run's conversation: the tool's
// requests, each answered on its card (docs/rules/requests.md), the line
// that says the tool is at work (R-ATT-12), and the composer that sends
// input (R-IN-2); and the hint an empty conversation shows instead of a
// blank box.
import { h, toolName } from './dom.js';
import { api } from './api.js';
import { requestCards } from './requests.js';
import { LIVE } from './runhead.js';

const PLACEHOLDER = 'Message the session — Enter sends, Shift+Enter for a new line';

// composer is the run view v's (run.js) composer, request cards, working
// line and empty hint.
export function composer(v) {
  const reqEl = h('div', { class: 'requests', id: 'requests', 'aria-live': 'polite' });
  const cards = requestCards(reqEl, v.ref, { canWrite: v.canWrite, base: () => (v.run && v.run.workspace_path) || '', onSettled: () => { v.schedule(300); showWorking(); } });
  const input = h('textarea', { id: 'input', rows: 2, placeholder: PLACEHOLDER, 'aria-label': 'Message' });
  const send = h('button', { type: 'submit', id: 'send' }, 'Send');
  // R-ATT-12: while a turn runs, the page says the tool is at work (or
  // waits for a person's decision), right above the composer.
  const working = h('div', { class: 'working', id: 'working', role: 'status', hidden: true });
  const emptyHint = h('p', { class: 'empty-hint muted', id: 'empty-hint', hidden: true });
  const form = v.canWrite ? h('form', { class: 'composer', onsubmit: (e) => { e.preventDefault(); sendInput(); } }, input, send) : null;
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); sendInput(); }
  });

  function showWorking() {
    const { tl, run } = v;
    if (tl) tl.setWaiting(cards.pending() > 0);
    emptyHint.hidden = !tl || !run || tl.n.items.length > 0 || tl.raw;
    if (!emptyHint.hidden) {
      emptyHint.textContent = LIVE.includes(run.state) ? (v.canWrite ? `Nothing said yet. ${toolName(run.driver)} is ready: write the first message below.` : 'Nothing said yet.') :
        run.state === 'pending_approval' ? 'The session starts once its launch is approved.' : 'This session has no retained output.';
    }
    const on = !!(tl && run && (tl.n.inTurn || cards.pending() > 0) && LIVE.includes(run.state));
    working.hidden = !on;
    if (!on) return;
    const waiting = cards.pending() > 0;
    working.classList.toggle('waiting', waiting);
    working.textContent = waiting ? 'Waiting for your decision' : `${toolName(run.driver)} is working…`;
  }

  async function sendInput() {
    const text = input.value;
    if (!text.trim() || !v.run) return;
    // The field the driver takes (R-IN-2): Claude Code wraps a message,
    // the others take plain text.
    const payload = v.run.driver === 'claude' ? { message: text } : { text };
    send.disabled = true;
    // What was sent comes back on the attach stream as an input frame
    // (R-ATT-11), to this viewer and every other, in its place. The box
    // empties at once, so what is typed while the call is under way is
    // kept; a refused message comes back into an empty box.
    input.value = '';
    v.tl.list.scrollToBottom();
    try {
      await api('POST', v.url('input'), payload);
      v.banner('act', '', null);
      v.resetBackoff();
    } catch (e) {
      if (!input.value) input.value = text;
      v.errBanner('act', e);
    } finally {
      send.disabled = false;
      input.focus();
    }
  }

  // follow opens the composer while the run is live.
  function follow(live) {
    if (!form) return;
    input.disabled = send.disabled = !live;
    input.placeholder = live ? PLACEHOLDER : 'The session is not live; resume it to send input.';
  }

  return { cards, reqEl, form, working, emptyHint, showWorking, follow };
}
