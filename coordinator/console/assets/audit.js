// audit.js: the tenant's audit ledger (GET /v1/audit, admins) with
// filters by event, actor, run and time, cursor paging, and "verify the
// chain", which reads the whole ledger and recomputes every hash in this
// browser (auditchain.js, WebCrypto), trusting nothing the server says
// about it, and names the first broken link.
import { h, replace, localTime } from './dom.js';
import { api, session } from './api.js';
import { errorLine, say } from './ui.js';
import { parseRaw, Verifier } from './auditchain.js';

// Every event of shared/apitypes (R-AUD-*), the security actions of
// R-AUD-6 included.
const EVENTS = [
  'sessions.run.started', 'sessions.run.resumed', 'sessions.run.stopped', 'sessions.run.granted',
  'sessions.run.renamed', 'sessions.run.archived', 'sessions.run.unarchived', 'sessions.run.deleted',
  'sessions.run.request.answered',
  'sessions.run.continue_scheduled', 'sessions.run.continued', 'sessions.run.continue_cancelled', 'sessions.run.on_limit',
  'sessions.run.handoff_preview', 'sessions.run.messages', 'sessions.run.messages.text', 'sessions.run.activity',
  'sessions.run.activity.agent', 'sessions.workspace.created', 'sessions.workspace.deleted',
  'sessions.workspace.setup_command_set', 'sessions.workspace.approve-setup',
  'sessions.workspace.approve-project-config', 'sessions.workspace.file_read',
  'sessions.profile.created', 'sessions.profile.updated', 'sessions.profile.deleted',
  'sessions.profile.signin_started', 'sessions.profile.signin_code_sent', 'sessions.profile.signin_cancelled',
  'sessions.profile.signin_finished',
  'sessions.secret.added', 'sessions.secret.deleted', 'sessions.webhook.created', 'sessions.webhook.deleted', 'sessions.webhook.tested', 'sessions.push.subscribed', 'sessions.push.unsubscribed',
  'fleet.join_token.created', 'fleet.node.enrolled', 'fleet.node.revoked', 'fleet.node.forgotten', 'fleet.node.reassigned',
  'auth.tenant.created', 'auth.principal.created', 'auth.principal.revoked', 'auth.credential.created',
  'auth.credential.revoked', 'auth.signin_link.created', 'auth.signed_in', 'auth.signed_out', 'auth.failures',
];
const PAGE = 100;
const VERIFY_PAGE = 500;

const getRaw = (path) => api('GET', path, undefined, { parse: parseRaw }).then((r) => r.data);

// detailView shows a row's detail as its named fields, the exact JSON (the
// bytes the chain hashes) in its title (R-AUD-7).
function detailView(raw) {
  let d;
  try { d = JSON.parse(raw); } catch { return h('code', { class: 'detail' }, raw); }
  if (!d || typeof d !== 'object' || Array.isArray(d)) return h('code', { class: 'detail' }, raw);
  const val = (v) => (Array.isArray(v) ? v.map(val).join(', ') : v && typeof v === 'object' ? JSON.stringify(v) : String(v));
  return h('dl', { class: 'detail', title: raw }, Object.entries(d).map(([k, v]) => [h('dt', null, k.replace(/_/g, ' ')), h('dd', null, val(v))]));
}

export function auditView(main) {
  const status = h('p', { class: 'banner', hidden: true, id: 'audit-status' });
  if (!session.can('sessions:run:admin')) {
    replace(main, h('h1', null, 'Audit'), status);
    say(status, 'warn', 'The audit ledger is read by administrators: your role lacks the sessions:run:admin permission.');
    return { destroy() {} };
  }
  const event = h('select', { id: 'audit-event', 'aria-label': 'Event' }, h('option', { value: '' }, 'Any event'), EVENTS.map((e) => h('option', { value: e }, e)));
  const actor = h('input', { type: 'text', id: 'audit-actor', placeholder: 'actor (credential or principal id)', 'aria-label': 'Actor' });
  const run = h('input', { type: 'text', id: 'audit-run', placeholder: 'run_…', 'aria-label': 'Run' });
  const since = h('input', { type: 'datetime-local', id: 'audit-since', 'aria-label': 'From' });
  const until = h('input', { type: 'datetime-local', id: 'audit-until', 'aria-label': 'Until' });
  const verify = h('button', { type: 'button', id: 'audit-verify', onclick: verifyChain }, 'Verify the chain');
  const rows = h('tbody', { id: 'audit-rows' });
  const more = h('button', { type: 'button', class: 'ghost', id: 'audit-more', hidden: true, onclick: () => load(true) }, 'More');
  const verdict = h('div', { id: 'audit-verdict' });
  replace(main, h('div', { class: 'list-head' }, h('h1', null, 'Audit'), verify), verdict,
    h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); load(false); } }, event, actor, run,
      h('label', { class: 'toggle' }, 'from ', since), h('label', { class: 'toggle' }, 'until ', until), h('button', { type: 'submit', id: 'audit-filter' }, 'Filter')),
    status,
    h('div', { class: 'table-wrap' }, h('table', { class: 'audit' }, h('thead', null, h('tr', null, ['Seq', 'When', 'Event', 'Actor', 'Target', 'Detail'].map((x) => h('th', null, x)))), rows)),
    more);
  let next = '';
  let broken = 0;

  function query(cursor) {
    const p = new URLSearchParams({ limit: String(PAGE), order: 'newest' }); // R-AUD-7
    if (event.value) p.set('event', event.value);
    if (actor.value.trim()) p.set('actor', actor.value.trim());
    if (run.value.trim()) p.set('run_ref', run.value.trim());
    if (since.value) p.set('since', new Date(since.value).toISOString());
    if (until.value) p.set('until', new Date(until.value).toISOString());
    if (cursor) p.set('cursor', cursor);
    return `/v1/audit?${p}`;
  }

  async function load(append) {
    try {
      const page = await getRaw(query(append ? next : ''));
      if (!append) replace(rows);
      for (const e of page.items) rows.append(row(e));
      next = page.next || '';
      more.hidden = !next;
      if (!rows.children.length) rows.append(h('tr', null, h('td', { colspan: 6, class: 'muted' }, 'No entry matches.')));
      status.hidden = true;
    } catch (e) {
      say(status, 'error', errorLine(e).textContent);
    }
  }

  function row(e) {
    const t = e.target || {};
    const raw = e.__raw && e.__raw.get('detail');
    return h('tr', { dataset: { seq: String(e.seq) }, class: e.seq === broken ? 'broken' : '' },
      h('td', null, String(e.seq)),
      h('td', null, h('time', { datetime: e.at, title: e.at }, localTime(e.at))),
      h('td', null, h('code', null, e.event)),
      h('td', null, e.actor.kind, ' ', h('code', { title: e.actor.credential_id }, e.actor.principal_id || e.actor.credential_id)),
      h('td', null, t.run_ref ? h('a', { href: `/runs/${encodeURIComponent(t.run_ref)}`, 'data-nav': true }, t.run_ref) : null,
        t.workspace_ref ? h('a', { href: `/workspaces/${encodeURIComponent(t.workspace_ref)}`, 'data-nav': true }, t.workspace_ref) : null),
      h('td', null, raw ? detailView(raw) : null));
  }

  // verifyChain reads the whole ledger from its first entry, unfiltered,
  // and checks every link here.
  async function verifyChain() {
    verify.disabled = true;
    say(verdict, '', 'Reading the ledger and recomputing every hash in this browser…');
    const v = new Verifier();
    let cursor = '';
    let brk = null;
    try {
      if (!(window.crypto && crypto.subtle)) throw new Error('This page is not in a secure context (HTTPS or 127.0.0.1), so the browser offers no WebCrypto to hash with.');
      for (;;) {
        const page = await getRaw(`/v1/audit?limit=${VERIFY_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        for (const e of page.items) {
          brk = await v.add(e);
          if (brk) break;
        }
        if (brk || !page.next) break;
        cursor = page.next;
      }
    } catch (e) {
      verify.disabled = false;
      say(verdict, 'error', e.status ? errorLine(e).textContent : String(e.message || e));
      return;
    }
    verify.disabled = false;
    if (brk) {
      broken = brk.seq;
      for (const tr of rows.children) tr.classList.toggle('broken', tr.dataset.seq === String(brk.seq));
      say(verdict, 'error', h('strong', { id: 'audit-broken', dataset: { seq: String(brk.seq) } }, `The chain is broken at entry ${brk.seq}`),
        `: ${brk.reason}. ${v.count} entr${v.count === 1 ? 'y' : 'ies'} before it hold.`);
      return;
    }
    broken = 0;
    say(verdict, '', h('strong', { id: 'audit-ok' }, `All ${v.count} entries verified in this browser: the chain is whole.`),
      ' Head hash ', h('code', { id: 'audit-head' }, v.head || '(empty ledger)'),
      ' — keep it: a ledger cut at its tail can only be told from a whole one by comparing the head.');
  }

  load(false);
  return { destroy() {} };
}
