// webhooks.js: the tenant's outgoing webhooks (R-NOTIF-1..7), for
// administrators: add one (its signing secret shown once), send a test
// delivery, read a webhook's delivery log, delete one.
import { h, replace, localTime } from './dom.js';
import { api, get, session, BASE } from './api.js';
import { errorLine, say, copyButton } from './ui.js';
import { REASONS } from './attention.js';

export function webhooksView(main) {
  const status = h('p', { class: 'banner', hidden: true, id: 'wh-status', role: 'status' });
  if (!session.can('sessions:run:admin')) {
    replace(main, h('h1', null, 'Webhooks'), status);
    say(status, 'warn', 'Webhooks are configured by administrators: your role lacks the sessions:run:admin permission.');
    return { destroy() {} };
  }
  const url = h('input', { type: 'url', id: 'wh-url', required: true, placeholder: 'URL of the receiver (http or https)', 'aria-label': 'URL', size: 48 });
  const boxes = REASONS.map(([reason, label]) => h('label', { class: 'check' }, h('input', { type: 'checkbox', id: `wh-r-${reason}`, value: reason }), label));
  // R-NOTIF-11: action links, one per answer of a request, that settle it
  // as the person named here (the administrator adding the webhook, or an
  // operator's principal id).
  const actAs = h('input', { type: 'text', id: 'wh-act-as', placeholder: 'answer as (principal id; empty: no action links)', 'aria-label': 'Action links answer as', size: 30 });
  const asMe = h('button', { type: 'button', class: 'ghost', id: 'wh-act-me', onclick: () => { actAs.value = session.whoami ? session.whoami.principal_id : ''; } }, 'Me');
  const secret = h('div', { id: 'wh-secret' });
  const rows = h('tbody', { id: 'wh-rows' });
  const log = h('div', { id: 'wh-log' });
  replace(main, h('div', { class: 'list-head' }, h('h1', null, 'Webhooks')),
    h('p', { class: 'muted' }, 'Each change of a session that needs a person is POSTed, signed (X-Olivares-Signature: v1=HMAC-SHA256 of the timestamp, a dot and the body), to these URLs.'),
    h('form', { class: 'filters', id: 'wh-add', onsubmit: add }, url, h('span', { class: 'muted' }, 'for'), boxes, actAs, asMe, h('button', { type: 'submit' }, 'Add')),
    h('p', { class: 'muted' }, 'With "answer as", a delivery for a decision carries one signed link per answer (Allow, Deny): a chat bot POSTs it once, and the request is settled as that person, yourself or an operator.'),
    secret, status,
    h('div', { class: 'table-wrap' }, h('table', { class: 'audit' }, h('thead', null, h('tr', null, ['Webhook', 'URL', 'Reasons', 'Last delivery', ''].map((x) => h('th', null, x)))), rows)),
    log);

  function outcome(d) {
    if (!d) return '–';
    const what = d.last_status ? `HTTP ${d.last_status}` : (d.last_error || '');
    return `${d.state}${what ? ` (${what})` : ''}, ${d.attempts} attempt(s), ${localTime(d.updated_at)}`;
  }

  async function load() {
    try {
      const l = await get(`${BASE}/webhooks`);
      replace(rows, l.items.length ? l.items.map((w) => h('tr', { dataset: { id: w.id } },
        h('td', null, h('code', null, w.id)), h('td', null, w.url), h('td', null, w.reasons.length ? w.reasons.join(', ') : 'every reason', w.act_as ? h('div', { class: 'muted wh-act-as' }, `action links answer as ${w.act_as}`) : null),
        h('td', { class: 'wh-last' }, outcome(w.last_delivery)),
        h('td', null,
          h('button', { type: 'button', class: 'ghost wh-test', onclick: () => test(w) }, 'Test'),
          h('button', { type: 'button', class: 'ghost wh-log', onclick: () => deliveries(w) }, 'Deliveries'),
          h('button', { type: 'button', class: 'ghost wh-delete', onclick: () => del(w) }, 'Delete'))))
        : h('tr', null, h('td', { colspan: 5, class: 'muted' }, 'No webhooks yet.')));
    } catch (e) { say(status, 'error', errorLine(e)); }
  }

  async function add(e) {
    e.preventDefault();
    const reasons = boxes.map((b) => b.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
    try {
      const body = { url: url.value.trim(), reasons };
      if (actAs.value.trim()) body.act_as = actAs.value.trim();
      const { data } = await api('POST', `${BASE}/webhooks`, body);
      replace(secret, h('div', { class: 'banner' }, h('p', null, `Webhook ${data.id} added. Its signing secret, shown this once:`),
        h('code', { id: 'wh-secret-value' }, data.secret), copyButton('Copy', data.secret)));
      url.value = '';
      actAs.value = '';
      status.hidden = true;
      load();
    } catch (err) { say(status, 'error', errorLine(err)); }
  }

  async function test(w) {
    try {
      const { data } = await api('POST', `${BASE}/webhooks/${encodeURIComponent(w.id)}/test`);
      say(status, data.state === 'delivered' ? 'ok' : 'warn', `Test delivery: ${outcome(data)}`);
      load();
    } catch (e) { say(status, 'error', errorLine(e)); }
  }

  async function deliveries(w) {
    try {
      const l = await get(`${BASE}/webhooks/${encodeURIComponent(w.id)}/deliveries`);
      replace(log, h('h2', null, `Deliveries of ${w.id}`), h('table', { class: 'audit', id: 'wh-deliveries' },
        h('thead', null, h('tr', null, ['When', 'Event', 'Session', 'Reason', 'Outcome', 'Response'].map((x) => h('th', null, x)))),
        h('tbody', null, l.items.map((d) => h('tr', null, h('td', null, localTime(d.created_at)), h('td', null, d.event),
          h('td', null, d.run_ref ? h('a', { href: `/runs/${encodeURIComponent(d.run_ref)}`, 'data-nav': true }, d.run_ref) : '–'),
          h('td', null, d.attention || '–'), h('td', null, outcome(d)), h('td', null, h('code', null, d.last_response || '')))))));
    } catch (e) { say(status, 'error', errorLine(e)); }
  }

  async function del(w) {
    if (!window.confirm(`Delete webhook ${w.id} (${w.url})? Its delivery log goes with it.`)) return;
    try {
      await api('DELETE', `${BASE}/webhooks/${encodeURIComponent(w.id)}`);
      replace(log);
      load();
    } catch (e) { say(status, 'error', errorLine(e)); }
  }

  load();
  return { destroy() {} };
}
