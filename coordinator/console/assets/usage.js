// usage.js: what the fleet spent (GET /usage, docs/rules/usage.md): turns,
// tokens and the cost the tools reported, by profile (account), node, tool,
// model or day over a range, and each account's latest rate-limit windows
// and limit. Profile refs are shown with their names.
import { h, replace, localTime } from './dom.js';
import { get, BASE } from './api.js';
import { errorLine, say } from './ui.js';

const GROUPS = [['profile', 'Account'], ['node', 'Node'], ['tool', 'Tool'], ['model', 'Model'], ['day', 'Day (UTC)']];
const fmt = (n) => Number(n).toLocaleString('en-US');

export function usageView(main) {
  const status = h('p', { class: 'banner', hidden: true, id: 'usage-status' });
  const by = h('select', { id: 'usage-by', 'aria-label': 'Group by', onchange: () => load() }, GROUPS.map(([v, l]) => h('option', { value: v }, l)));
  const from = h('input', { type: 'date', id: 'usage-from', 'aria-label': 'From' });
  const to = h('input', { type: 'date', id: 'usage-to', 'aria-label': 'To (exclusive)' });
  const head = h('thead');
  const rows = h('tbody', { id: 'usage-rows' });
  const accounts = h('tbody', { id: 'usage-accounts' });
  replace(main, h('div', { class: 'list-head' }, h('h1', null, 'Usage')),
    h('p', { class: 'muted' }, 'Tokens as the tools reported them; input leaves out cache reads and writes. A cost marked * leaves out turns whose tool reports none.'),
    h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); load(); } },
      h('label', { class: 'toggle' }, 'by ', by), h('label', { class: 'toggle' }, 'from ', from), h('label', { class: 'toggle' }, 'to ', to),
      h('button', { type: 'submit', id: 'usage-apply' }, 'Show')),
    status,
    h('div', { class: 'table-wrap' }, h('table', { class: 'usage', id: 'usage-table' }, head, rows)),
    h('h2', null, 'Accounts'),
    h('div', { class: 'table-wrap' }, h('table', { class: 'usage' },
      h('thead', null, h('tr', null, ['Account', 'Tool', 'Reported', 'Window', 'Used', 'Resets', 'Limit'].map((x) => h('th', null, x)))), accounts)));
  let names = new Map();

  const cost = (t) => `$${Number(t.cost_usd).toFixed(4)}${t.cost_turns_unknown ? '*' : ''}`;
  const label = (key) => (by.value === 'profile' && names.get(key)) ? `${names.get(key)} (${key})` : (key || '–');
  const line = (key, t, cls) => h('tr', { class: cls, 'data-key': key },
    h('td', null, key), ...[t.turns, t.input_tokens, t.output_tokens, t.cache_read_tokens, t.cache_write_tokens].map((n) => h('td', { class: 'num' }, fmt(n))),
    h('td', { class: 'num' }, cost(t)));

  async function load() {
    const p = new URLSearchParams({ group_by: by.value });
    if (from.value) p.set('from', from.value);
    if (to.value) p.set('to', to.value);
    try {
      const [rep, ps] = await Promise.all([get(`${BASE}/usage?${p}`), get(`${BASE}/profiles`).catch(() => ({ items: [] }))]);
      names = new Map(ps.items.map((x) => [x.ref, x.name]));
      const first = GROUPS.find(([v]) => v === rep.group_by)[1];
      replace(head, h('tr', null, [first, 'Turns', 'Input', 'Output', 'Cache read', 'Cache write', 'Cost'].map((x) => h('th', null, x))));
      replace(rows, rep.groups.length ? rep.groups.map((g) => line(label(g.key), g)) : h('tr', null, h('td', { colspan: 7, class: 'muted' }, 'No turn in this range.')),
        line('Total', rep.total, 'total'));
      replace(accounts, rep.accounts.length ? rep.accounts.flatMap(account) : h('tr', null, h('td', { colspan: 7, class: 'muted' }, 'No account has reported yet.')));
      status.hidden = true;
    } catch (e) {
      say(status, 'error', errorLine(e).textContent);
    }
  }

  function account(a) {
    const who = names.get(a.profile_ref) ? `${names.get(a.profile_ref)} (${a.profile_ref})` : a.profile_ref;
    const limit = a.limit ? `${a.limit.kind}${a.limit.resets_at ? ` until ${localTime(a.limit.resets_at)}` : ''}` : '–';
    const ws = a.rate_limits.length ? a.rate_limits : [null];
    return ws.map((w) => h('tr', { class: 'account', 'data-profile': a.profile_ref },
      h('td', null, who), h('td', null, a.tool), h('td', null, localTime(a.at)),
      h('td', null, w ? w.name : '–'), h('td', { class: 'num' }, w ? `${Math.round(w.used_percent)}%` : '–'),
      h('td', null, w && w.resets_at ? localTime(w.resets_at) : '–'), h('td', null, limit)));
  }

  load();
  return { destroy() {} };
}
