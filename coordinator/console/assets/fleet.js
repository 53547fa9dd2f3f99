// fleet.js: the nodes (GET /v1/nodes) with their connection state,
// transport, last heartbeat and round trip, agent version, certificate
// expiry, labels and capabilities (each CLI with its version, PTY,
// worktree directory, container runtimes, Codex supervision); revoke for
// admins behind a confirmation; and one node's page with its runs
// (GET /runs?node_id=).
import { h, replace, localTime, relTime, runName } from './dom.js';
import { api, get, session, BASE } from './api.js';
import { errorLine, kv, modal, say } from './ui.js';

const DAY = 86400e3;

function state(n) {
  if (n.revoked_at) return 'revoked';
  if (n.connected) return 'connected';
  if (n.online) return 'reconnecting';
  return 'offline';
}

function caps(n) {
  const c = n.capabilities || {};
  return c;
}

function certBadge(n) {
  const left = Date.parse(n.cert_not_after) - Date.now();
  const cls = left < 0 ? 'badge error' : left < 2 * DAY ? 'badge warn' : 'badge';
  return h('span', { class: cls, title: localTime(n.cert_not_after) }, left < 0 ? 'certificate expired' : `certificate expires ${relTime(n.cert_not_after)}`);
}

function summaryLine(n) {
  const s = state(n);
  return h('div', { class: 'meta' },
    h('span', { class: `state n-${s}`, dataset: { state: s } }, s),
    n.transport ? h('span', null, n.transport) : null,
    n.last_heartbeat ? h('span', { title: localTime(n.last_heartbeat) }, `heartbeat ${relTime(n.last_heartbeat)}`) : null,
    n.rtt_ms !== undefined ? h('span', { class: 'rtt' }, `RTT ${n.rtt_ms.toFixed(2)} ms`) : null,
    n.agent_version ? h('span', null, `agent ${n.agent_version}`) : null,
    certBadge(n));
}

export function fleetView(main, id) {
  return id ? nodePage(main, id) : nodesPage(main);
}

function revoke(n, done) {
  const m = modal('revoke-dialog', `Revoke ${n.hostname || n.id}?`);
  const msg = h('div');
  const go = h('button', { type: 'button', class: 'danger', id: 'revoke-confirm', onclick: async () => {
    go.disabled = true;
    try {
      await api('POST', `/v1/nodes/${encodeURIComponent(n.id)}/revoke`);
      m.close();
      done();
    } catch (e) {
      go.disabled = false;
      replace(msg, errorLine(e));
    }
  } }, 'Revoke the node');
  replace(m.body, h('p', null, `Node ${n.id}${n.hostname ? ` (${n.hostname})` : ''} is cut off at once, live tunnel included, and its certificate is never accepted again: the host must enroll anew with a join token. Its runs stay listed with their last known state, marked unreachable.`),
    msg, h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), go));
}

function nodesPage(main) {
  const canAdmin = session.can('sessions:run:admin');
  const status = h('div');
  const rows = h('ul', { class: 'cards', id: 'nodes' }, h('li', { class: 'muted' }, 'Loading…'));
  replace(main, h('div', { class: 'list-head' }, h('h1', null, 'Fleet')), status, rows);
  let timer = 0;
  let destroyed = false;
  async function load() {
    try {
      const { items: nodes } = await get('/v1/nodes');
      if (destroyed) return;
      replace(rows, nodes.length ? nodes.map((n) => {
        const c = caps(n);
        return h('li', { class: `card node n-${state(n)}`, dataset: { node: n.id } },
          h('div', { class: 'line1' }, h('a', { href: `/nodes/${encodeURIComponent(n.id)}`, 'data-nav': true, class: 'title' }, n.hostname || n.id),
            h('span', { class: 'muted' }, n.id)),
          summaryLine(n),
          h('div', { class: 'meta' },
            n.labels ? Object.entries(n.labels).map(([k, v]) => h('span', { class: 'chip' }, `${k}=${v}`)) : null,
            (c.clis || []).map((x) => h('span', { class: 'chip', title: x.version || x.error || '' }, `${x.name}${x.version ? ` ${x.version.split('\n')[0].slice(0, 24)}` : ''}`)),
            c.codex_supervision ? h('span', { class: 'chip' }, 'Codex supervision') : null,
            c.claude_supervision ? h('span', { class: 'chip' }, 'Claude Code supervision') : null),
          canAdmin && !n.revoked_at ? h('div', { class: 'actions' }, h('button', { type: 'button', class: 'ghost act-revoke', onclick: () => revoke(n, load) }, 'Revoke')) : null);
      }) : h('li', { class: 'muted' }, 'No node enrolled: olivares-coordinator token create makes a join token for olivares-agent enroll.'));
    } catch (e) {
      replace(status, errorLine(e));
    }
    clearTimeout(timer);
    if (!destroyed) timer = setTimeout(load, 10000);
  }
  load();
  return { destroy() { destroyed = true; clearTimeout(timer); } };
}

function nodePage(main, id) {
  const canAdmin = session.can('sessions:run:admin');
  const head = h('header', { class: 'run-head' });
  const status = h('p', { class: 'banner', hidden: true });
  const capsEl = h('section', { id: 'node-caps' });
  const runsEl = h('section', { id: 'node-runs' });
  replace(main, h('nav', { class: 'crumbs' }, h('a', { href: '/nodes', 'data-nav': true }, '← Fleet')), head, status, capsEl, runsEl);
  let next = '';
  const runItems = [];
  async function load() {
    let n;
    try {
      n = await get(`/v1/nodes/${encodeURIComponent(id)}`);
    } catch (e) {
      replace(head, errorLine(e));
      return;
    }
    const c = caps(n);
    replace(head, h('div', { class: 'line1' }, h('h1', null, n.hostname || n.id)), summaryLine(n),
      kv([['Node', n.id], ['Enrolled', localTime(n.enrolled_at)], ['Connected since', n.connected_since ? localTime(n.connected_since) : ''],
        ['Certificate', `serial ${n.cert_serial}, valid until ${localTime(n.cert_not_after)}`], ['Revoked', n.revoked_at ? localTime(n.revoked_at) : ''],
        ['Labels', n.labels ? Object.entries(n.labels).map(([k, v]) => `${k}=${v}`).join(', ') : '']]),
      canAdmin && !n.revoked_at ? h('div', { class: 'actions' }, h('button', { type: 'button', class: 'ghost act-revoke', id: 'revoke', onclick: () => revoke(n, () => { say(status, 'warn', 'Revoked: the node is cut off.'); load(); }) }, 'Revoke')) : null);
    replace(capsEl, h('h2', null, 'Capabilities'),
      kv([['PTY', c.pty ? 'available' : 'not available'], ['Worktree directory', c.worktree_dir ? h('code', null, c.worktree_dir) : 'not configured (worktree launches answer 503)'],
        ['Containers', [c.podman ? `podman ${c.podman}` : '', c.docker ? `docker ${c.docker}` : ''].filter(Boolean).join(', ') || 'no podman or Docker'],
        // R-TR-7: which isolating runners work here, and why not.
        ['Sandbox isolation', c.sandbox ? 'available (bubblewrap)' : `not available: ${c.sandbox_error || 'unknown'}`],
        ['Container isolation', c.container ? 'available (podman)' : `not available: ${c.container_error || 'unknown'}`],
        ['Codex supervision', c.codex_supervision ? `on (${c.codex_supervision.transport}, home ${c.codex_supervision.home_scope})` : 'off'],
        ['Claude Code supervision', c.claude_supervision ? `on (${c.claude_supervision.homes} home${c.claude_supervision.homes === 1 ? '' : 's'})` : 'off']]),
      h('table', { class: 'clis', id: 'node-clis' }, h('thead', null, h('tr', null, h('th', null, 'CLI'), h('th', null, 'Version'), h('th', null, 'Path'))),
        h('tbody', null, (c.clis || []).map((x) => h('tr', null, h('td', null, x.name), h('td', null, x.version || h('span', { class: 'muted' }, x.error || 'unknown')), h('td', null, h('code', null, x.path)))))));
  }
  async function loadRuns(more) {
    try {
      const p = new URLSearchParams({ node_id: id, pagination: 'cursor', limit: '100' });
      if (more && next) p.set('cursor', next);
      const page = await get(`${BASE}/runs?${p}`);
      if (!more) runItems.length = 0;
      runItems.push(...page.items);
      next = page.next || '';
      replace(runsEl, h('h2', null, 'Runs ', h('span', { class: 'count' }, String(runItems.length))),
        runItems.length ? h('ul', { class: 'rows', id: 'node-run-list' }, runItems.map((r) => h('li', { class: 'row', dataset: { ref: r.run_ref } },
          h('div', { class: 'line1' }, h('a', { href: `/runs/${encodeURIComponent(r.run_ref)}`, 'data-nav': true, class: 'title' }, runName(r)),
            h('span', { class: `state s-${r.state}` }, r.state.replace('_', ' '))),
          h('div', { class: 'meta' }, h('span', null, r.driver), h('time', { datetime: r.created_at }, relTime(r.created_at)))))) : h('p', { class: 'muted' }, 'No run on this node.'),
        next ? h('button', { type: 'button', class: 'ghost', onclick: () => loadRuns(true) }, 'More') : null);
    } catch (e) {
      replace(runsEl, errorLine(e));
    }
  }
  load();
  loadRuns(false);
  return { destroy() {} };
}
