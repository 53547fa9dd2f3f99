// runlimit.js: a run at a usage limit (R-LIM-*): the limit banner with
// its profile's on_limit plan, a button per step (R-ONL-7) and the
// continue at the reset (R-CONT-1, R-CONT-7); and the run's on_limit
// history (R-ONL-6).
import { h, localTime, relTime } from './dom.js';

export const runLink = (r, text) => h('a', { href: `/runs/${encodeURIComponent(r)}`, 'data-nav': true }, text || r);

// limitText is R-LIM-*: the kind, the reset time in the viewer's own
// time zone, and the account (the profile the turn ran under). v is the
// run view's state (run.js).
export function limitText(v, l) {
  const acct = v.profiles.get(l.account_ref);
  const kind = l.kind === 'usage' ? 'The account\u2019s usage limit was reached' : l.kind === 'rate' ? 'The provider is rate-limiting this account' : `Limit (${l.kind})`;
  const reset = l.resets_at ? `it resets ${localTime(l.resets_at)} (${relTime(l.resets_at)}, ${Intl.DateTimeFormat().resolvedOptions().timeZone})` : 'the tool did not say when it resets';
  return h('p', { class: 'banner warn', dataset: { kind: 'limit' }, id: 'limit-banner', role: 'status' },
    `${kind} on ${acct ? `profile ${acct.name}` : l.account_ref}: ${reset}.`,
    v.run && v.run.driver === 'claude' && v.canWrite ? ' Move it to another Claude Code account, or hand it off, to continue now.' : '',
    continueControl(v), planControl(v));
}

// answered asks for the action `what` and shows the run it answers with,
// saying what it did.
const answered = (v, what, method, body, said) => () => v.post(what, ({ data }) => {
  v.run = data;
  v.renderHead();
  v.banner('act', '', said(data));
}, method, body);

// planControl is the profile's on_limit plan with a button per step,
// each run now by POST /runs/{ref}/on-limit (R-ONL-7).
function planControl(v) {
  const prof = v.run && v.profiles.get(v.run.provider_profile_ref);
  const plan = (prof && prof.on_limit) || [];
  if (!plan.length) return null;
  const step = (s) => answered(v, 'on-limit', 'POST', { step: s }, (data) => {
    const last = (data.on_limit || [])[data.on_limit.length - 1];
    return last ? onLimitLine(last) : 'Done.';
  });
  return h('span', { id: 'on-limit-plan' }, ` Its profile’s plan at a limit: ${plan.join(', then ')}. `,
    v.canWrite && v.run.state !== 'released' ? plan.filter((s) => s !== 'continue_at_reset').map((s) =>
      h('button', { type: 'button', class: 'ghost act', dataset: { step: s }, onclick: step(s) }, stepLabel(s))) : null);
}

function stepLabel(s) {
  const [kind, p] = s.split(':');
  return kind === 'move' ? `Move to ${p} now` : kind === 'handoff' ? `Hand off to ${p} now` : s;
}

// onLimitLine is one entry of the run's on_limit history (R-ONL-6), as
// olivares session show prints it.
function onLimitLine(e) {
  const by = e.by === 'person' ? ', by a person' : '';
  const at = ` ${localTime(e.at)}`;
  switch (e.outcome) {
    case 'limited': return `limited on ${e.profile_name}${e.resets_at ? ` (resets ${localTime(e.resets_at)})` : ''}${by} at${at}`;
    case 'moved': return `moved to ${e.to_profile_name}${by} at${at}`;
    case 'handed_off': return `handed off to ${e.to_profile_name}${by} at${at}`;
    case 'waiting': return `waits for the reset${e.resets_at ? `, continues ${localTime(e.resets_at)}` : ''}${by}`;
    case 'skipped': return `skipped ${e.step}: ${e.reason}${by}`;
    default: return e.outcome;
  }
}

// onLimitHistory is the run's on_limit history, shown while it has one.
export function onLimitHistory(r) {
  const es = (r.on_limit || []).slice(-6);
  if (!es.length) return null;
  return h('p', { class: 'banner', dataset: { kind: 'onlimit' }, id: 'on-limit-history', role: 'status' },
    es.map((e, i) => [i ? '; ' : '', e.new_run_ref ? [onLimitLine(e), ' (', runLink(e.new_run_ref), ')'] : onLimitLine(e)]), '.');
}

// continueControl schedules or cancels the continue at the limit's
// reset (POST/DELETE /runs/{ref}/continue-at-reset, R-CONT-1, R-CONT-7).
function continueControl(v) {
  const run = v.run;
  if (!run || !v.canWrite || run.state === 'released') return null;
  if (run.scheduled_continue_at) {
    return h('span', { id: 'continue-scheduled' }, ` It continues by itself ${localTime(run.scheduled_continue_at)}. `,
      h('button', { type: 'button', class: 'ghost act', id: 'continue-cancel', onclick: answered(v, 'continue-at-reset', 'DELETE', undefined, () => 'The scheduled continue was cancelled.') }, 'Cancel'));
  }
  return [' ', h('button', { type: 'button', class: 'ghost act', id: 'continue-at-reset',
    onclick: answered(v, 'continue-at-reset', 'POST', {}, (d) => `It continues by itself ${localTime(d.scheduled_continue_at)}, sending \u201ccontinue\u201d.`) }, 'Continue when it resets')];
}
