// requests.js: the tool's requests on a run (people in the loop,
// docs/rules/requests.md): a card per request with what it asks (the
// command and its directory, the files and the diff, the question), the
// tool's own options as buttons, free text where the tool takes it, and,
// once settled, who answered and how. Each card answers only its own
// request id; a second answer is refused by the server (409, naming who
// answered first) and the card says so.
import { h, replace, relTime, localTime } from './dom.js';
import { api, get, BASE } from './api.js';
import { errorLine } from './ui.js';

const KIND = { command: 'Run a command', file_change: 'Change files', permission: 'Permission', question: 'Question', elicitation: 'Input requested' };

const BY = { policy: 'a rule', timeout: 'the timeout', tool: 'the tool' };

// settledLine says how a request was settled, naming the person by name
// (R-CON-7).
export function settledLine(r) {
  const who = r.by_name || BY[r.by] || r.by;
  const how = r.state === 'expired' ? `Expired: ${r.reason || ''}` :
    `${r.decision === 'allow' ? 'Allowed' : r.decision === 'deny' ? 'Denied' : 'Answered'}${r.option_id ? ` (${(r.options.find((o) => o.id === r.option_id) || {}).label || r.option_id})` : ''} by ${who}${r.reason ? `: ${r.reason}` : ''}`;
  return h('div', { class: 'req-settled' }, how, r.at ? h('time', { datetime: r.at, title: localTime(r.at) }, ` · ${relTime(r.at)}`) : null);
}

// diffView colours a unified diff's added and removed lines.
function diffView(diff) {
  const lines = diff.split('\n');
  const cls = (l) => (l.startsWith('+') && !l.startsWith('+++') ? 'dl add' : l.startsWith('-') && !l.startsWith('---') ? 'dl del' : 'dl');
  return h('div', { class: 'tdiff' }, lines.slice(0, 600).map((l) => h('div', { class: cls(l) }, l || ' ')),
    lines.length > 600 ? h('div', { class: 'muted' }, `… ${lines.length - 600} more lines`) : null);
}

// requestCards: base() is the run's directory, under which paths are shown
// relative to it.
export function requestCards(el, ref, { canWrite, onSettled, base = () => '' } = {}) {
  const dir = () => (base() || '').replace(/\/$/, '');
  const rel = (p) => (dir() && p.startsWith(`${dir()}/`) ? p.slice(dir().length + 1) : p);
  const reqs = new Map(); // id → request, in the order first seen
  const errors = new Map(); // id → error of the last answer
  const busy = new Set();

  function put(r) {
    if (!r || !r.id) return;
    const old = reqs.get(r.id);
    // A settlement never goes back to pending (a replayed frame).
    if (old && old.state !== 'pending' && r.state === 'pending') return;
    reqs.set(r.id, r);
    render();
  }

  async function refresh() {
    try {
      const l = await get(`${BASE}/runs/${encodeURIComponent(ref)}/requests`);
      for (const r of [...l.items].reverse()) put(r);
    } catch { /* the node may be unreachable: the stream still brings them */ }
  }

  async function answer(r, opt, text) {
    busy.add(r.id);
    errors.delete(r.id);
    render();
    const body = { decision: opt.decision, option_id: opt.id };
    if (text) body.text = text;
    try {
      const { data } = await api('POST', `${BASE}/runs/${encodeURIComponent(ref)}/requests/${encodeURIComponent(r.id)}`, body);
      put(data);
      if (onSettled) onSettled(data);
    } catch (e) {
      errors.set(r.id, e);
      refresh();
    } finally {
      busy.delete(r.id);
      render();
    }
  }

  function detail(r) {
    const d = r.detail || {};
    return [
      d.command ? h('pre', { class: 'req-cmd' }, d.command) : null,
      d.cwd ? h('div', { class: 'req-cwd muted' }, `in ${rel(d.cwd) === d.cwd ? d.cwd : rel(d.cwd) || '.'}`) : null,
      d.files && d.files.length ? h('div', { class: 'req-files' }, d.files.map(rel).join(', ')) : null,
      d.question ? h('p', { class: 'req-question' }, d.question) : null,
      d.diff ? h('details', { class: 'req-diff', open: d.diff.length < 4000 }, h('summary', null, 'Diff'), diffView(dir() ? d.diff.split(`${dir()}/`).join('') : d.diff)) : null,
      !d.command && !d.diff && d.input ? h('details', { class: 'req-input' }, h('summary', null, 'The tool’s arguments'),
        h('pre', null, typeof d.input === 'string' ? d.input : JSON.stringify(d.input, null, 2))) : null,
    ];
  }

  function card(r) {
    const pending = r.state === 'pending';
    const head = h('div', { class: 'req-head' }, h('span', { class: 'req-kind' }, KIND[r.kind] || r.kind),
      r.tool ? h('span', { class: 'badge' }, r.tool) : null, h('strong', { class: 'req-title' }, r.title));
    let foot;
    if (pending) {
      const text = r.detail && r.detail.text ? h('textarea', { rows: 2, class: 'req-text', placeholder: 'Your answer (or why you deny)', 'aria-label': 'Your answer' }) : null;
      const buttons = canWrite ? r.options.map((o) => h('button', {
        type: 'button', class: `req-opt d-${o.decision}${o.decision === 'deny' ? ' danger' : ''}`, dataset: { option: o.id },
        disabled: busy.has(r.id),
        onclick: () => {
          const t = text ? text.value.trim() : '';
          if (o.decision === 'answer' && r.detail && r.detail.text && o.id === 'text' && !t) { text.focus(); return; }
          answer(r, o, o.decision === 'allow' ? '' : t);
        },
      }, o.label)) : [h('span', { class: 'muted' }, 'Someone with write access answers it.')];
      foot = [canWrite ? text : null, h('div', { class: 'req-actions' }, buttons),
        r.expires_at ? h('div', { class: 'muted req-expiry' }, `Denied ${relTime(r.expires_at)} unless answered (${localTime(r.expires_at)}).`) : null];
    } else {
      foot = settledLine(r);
    }
    const err = errors.get(r.id);
    return h('section', { class: `req-card st-${r.state}`, id: `req-${r.id}`, dataset: { request: r.id, state: r.state }, 'aria-label': r.title },
      head, detail(r), foot, err ? errorLine(err) : null);
  }

  // render pins the pending cards above the composer; a settled one
  // leaves, and stays where it was asked in the conversation (R-CON-7).
  function render() {
    const pending = [...reqs.values()].filter((r) => r.state === 'pending');
    replace(el, pending.map(card));
    el.hidden = !pending.length;
  }

  render();
  refresh();
  return { put, refresh, pending: () => [...reqs.values()].filter((r) => r.state === 'pending').length };
}
