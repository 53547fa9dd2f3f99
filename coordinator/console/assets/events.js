// events.js: the Events tab: the run's lifecycle ledger (R-EVT-*) as a
// timeline, each row in words: created, started with its pid and
// generation, interrupted, stop requested, exited with its code or signal,
// resumed, lost, limit reached, handed off (with a link to the new run),
// moved (with both profiles), cleaned (with what happened to the worktree).
import { h, replace, localTime, relTime } from './dom.js';
import { get, session, BASE } from './api.js';
import { errorLine } from './ui.js';

const OUTCOME = {
  merged_removed: 'the branch was merged, so the worktree and the branch were removed',
  discarded: 'the worktree and its branch were discarded',
  left_in_place: 'the node could not reach the worktree, so it was left in place',
};

export function cleanedText(d) {
  if (!d || !d.worktree) return 'Released: the run\u2019s runtime state on the node was removed; its output and ledger stay until it is deleted.';
  return `Released: ${OUTCOME[d.worktree] || d.worktree}${d.branch_tip ? ` (branch tip ${d.branch_tip.slice(0, 12)})` : ''}.`;
}

function parse(raw) {
  if (!raw) return null;
  if (typeof raw === 'object') return raw;
  try { return JSON.parse(raw); } catch { return null; }
}

const runLink = (ref) => h('a', { href: `/runs/${encodeURIComponent(ref)}`, 'data-nav': true }, ref);

const ASKED = { command: 'to run a command', file_change: 'to change files', permission: 'for a permission', question: 'a question', elicitation: 'for input' };
const DECIDED = { allow: 'Allowed', deny: 'Denied', answer: 'Answered' };
const BY = { policy: 'a rule', timeout: 'the timeout', tool: 'the tool' };
const byWho = (by, name) => BY[by] || (session.whoami && by === session.whoami.principal_id ? 'you' : name || by);
const SETTLED = { allow: 'allowed', deny: 'denied', answer: 'answered' };

// asked says what a request of the run's list asked, as its card does:
// "Bash: make deploy" (R-EVT-3).
function asked(q) {
  const d = q.detail || {};
  const what = d.command || (d.files && d.files.join(', ')) || d.question || q.title || ASKED[q.kind] || 'a request';
  return q.tool ? `${q.tool}: ${what}` : what;
}

// sentence says one event in words; profiles maps refs to names and
// requests ids to the run's requests (GET requests), so that a request's
// events say what it asked and who settled it.
export function sentence(e, profiles = new Map(), requests = new Map()) {
  const d = parse(e.detail) || {};
  const q = d.id && requests.get(d.id);
  if (q && e.kind === 'request_asked') return [`${asked(q)} \u2014 asked`];
  if (q && e.kind === 'request_settled') return [`${asked(q)} \u2014 ${SETTLED[d.decision] || 'settled'}${d.by ? ` by ${byWho(d.by, q.by_name)}` : ''}`];
  if (q && e.kind === 'request_expired') return [`${asked(q)} \u2014 expired unanswered`];
  const prof = (ref) => (profiles.get(ref) ? `${profiles.get(ref).name} (${ref})` : ref);
  switch (e.kind) {
    case 'created': return ['Created'];
    case 'approval_requested': return ['The launch waits for a person\u2019s approval'];
    case 'approved': return ['Approved'];
    case 'started': return [`Started generation ${e.generation}${e.pid ? ` as pid ${e.pid}` : ''}`];
    case 'input_accepted': return [`Input accepted${d.count ? ` (${d.count})` : ''}`];
    case 'interrupted': return [d.noop ? 'Interrupt with no turn to cancel' : 'Turn interrupted'];
    case 'stop_requested': return ['Stop requested'];
    case 'exited': return [e.exit_code !== undefined && e.exit_code !== null ? `Exited with code ${e.exit_code}` : e.signal ? `Ended by ${e.signal}` : 'Exited'];
    case 'lost': return ['The process was lost: no exit was observed'];
    case 'resumed': return [`Resumed as generation ${e.generation}`];
    case 'failed': return [`Failed${e.reason ? `: ${e.reason.replace(/_/g, ' ')}` : ''}`];
    case 'limit_reached': return [`${d.kind === 'rate' ? 'Rate' : d.kind === 'usage' ? 'Usage' : 'A'} limit reached${d.account_ref ? ` on profile ${prof(d.account_ref)}` : ''}`];
    case 'handed_off': return ['Handed off to ', d.to ? runLink(d.to) : 'a new run', d.profile ? ` on profile ${prof(d.profile)}` : ''];
    case 'moved': return [`Moved from profile ${prof(d.from)} to ${prof(d.to)}${d.files !== undefined ? `, ${d.files} file${d.files === 1 ? '' : 's'} carried` : ''}`];
    case 'cleaned': return [cleanedText(d)];
    // The tool's requests, said with what they asked (R-EVT-3).
    case 'request_asked': return [`The tool asked ${ASKED[d.kind] || 'a question'}${d.tool ? ` (${d.tool})` : ''}`];
    case 'request_settled': return [`${DECIDED[d.decision] || 'Settled'}: ${ASKED[d.kind] || 'the request'}${d.tool ? ` (${d.tool})` : ''}${d.by ? ` by ${byWho(d.by)}` : ''}`];
    case 'request_expired': return [`A request expired unanswered: ${ASKED[d.kind] || 'the request'}${d.tool ? ` (${d.tool})` : ''}`];
    default: return [e.kind.replace(/_/g, ' ')];
  }
}

// loadEvents reads every row of the run's ledger, following next.
export async function loadEvents(ref) {
  const out = [];
  let cursor = '';
  for (let i = 0; i < 100; i++) {
    const r = await get(`${BASE}/runs/${encodeURIComponent(ref)}/events?limit=500${cursor ? `&after=${encodeURIComponent(cursor)}` : ''}`);
    out.push(...r.items);
    if (!r.next) break;
    cursor = r.next;
  }
  return out;
}

// requestsOf reads the run's requests by id; a run whose requests cannot
// be read (its node away) still shows its events, in general words.
function requestsOf(ref) {
  return get(`${BASE}/runs/${encodeURIComponent(ref)}/requests`).then((l) => new Map(l.items.map((q) => [q.id, q])), () => new Map());
}

export function eventsPanel(el, run, { profiles } = {}) {
  const list = h('ol', { class: 'events', id: 'events' });
  replace(el, list);
  async function refresh() {
    try {
      const [evs, reqs] = await Promise.all([loadEvents(run.run_ref),
        requestsOf(run.run_ref)]);
      replace(list, evs.length ? evs.map((e) => h('li', { class: `ev k-${e.kind}`, dataset: { kind: e.kind } },
        h('time', { datetime: e.at, title: localTime(e.at) }, localTime(e.at), h('span', { class: 'muted' }, ` ${relTime(e.at)}`)),
        h('span', { class: 'ev-gen muted' }, `g${e.generation}`),
        h('span', { class: 'ev-text' }, sentence(e, profiles, reqs))))
        : h('li', { class: 'muted' }, 'No event yet.'));
    } catch (e) {
      replace(list, h('li', null, errorLine(e)));
    }
  }
  refresh();
  return { refresh, destroy() {} };
}
