// workspaces.js: the workspaces (GET /workspaces) and one workspace
// (GET /workspaces/{ref}) with its two gates: the setup command with its
// sha256 and approval state (R-SETUP-*: setup_approved decides, never the
// mere presence of setup_approval), edited by workspace admins and
// approved by a person who sees the exact text and hash approved; and the
// repository-carried agent configuration (R-PCS-*): flagged keys grouped by
// tool and file, values as the API masks them, the hash, its approval.
import { h, replace, localTime, relTime, toolName } from './dom.js';
import { api, get, session, BASE } from './api.js';
import { navigate } from './app.js';
import { errorLine, kv, say, modal } from './ui.js';

const wsPath = (ref, p = '') => `${BASE}/workspaces/${encodeURIComponent(ref)}${p}`;

export function workspacesView(main, ref) {
  return ref ? detail(main, ref) : list(main);
}

function list(main) {
  const canAdmin = session.can('sessions:workspace:admin');
  const rows = h('ul', { class: 'cards', id: 'workspaces' }, h('li', { class: 'muted' }, 'Loading…'));
  const status = h('div');
  const add = canAdmin ? h('button', { type: 'button', id: 'ws-add', onclick: () => create(load) }, 'Register a workspace') : null;
  replace(main, h('div', { class: 'list-head' }, h('h1', null, 'Workspaces'), add), status, rows);
  let nodes = new Map();
  async function load() {
    try {
      const [ws, ns] = await Promise.all([get(`${BASE}/workspaces`), get('/v1/nodes').catch(() => ({ items: [] }))]);
      nodes = new Map(ns.items.map((n) => [n.id, n]));
      replace(rows, ws.items.length ? ws.items.map((w) => h('li', { class: 'card', dataset: { ref: w.ref } },
        h('div', { class: 'line1' }, h('a', { href: `/workspaces/${encodeURIComponent(w.ref)}`, 'data-nav': true, class: 'title' }, w.name),
          w.read_only ? h('span', { class: 'badge' }, 'read-only') : null, w.dlp === 'deny' ? h('span', { class: 'badge warn' }, 'file reads refused (DLP)') : null),
        h('div', { class: 'meta' }, h('code', null, w.path), h('span', null, nodes.get(w.node_id) ? nodes.get(w.node_id).hostname || w.node_id : w.node_id), h('span', { class: 'muted' }, w.ref))))
        : h('li', { class: 'muted' }, 'No workspace registered yet.'));
    } catch (e) {
      replace(status, errorLine(e));
    }
  }
  load();
  return { destroy() {} };
}

// create registers a folder of a node (POST /workspaces).
async function create(done) {
  const m = modal('ws-create', 'Register a workspace');
  let nodes = [];
  try { nodes = (await get('/v1/nodes')).items.filter((n) => !n.revoked_at); } catch (e) { m.body.append(errorLine(e)); return; }
  const node = h('select', { id: 'ws-node' }, nodes.map((n) => h('option', { value: n.id }, n.hostname ? `${n.hostname} (${n.id})` : n.id)));
  const path = h('input', { type: 'text', id: 'ws-path', required: true, placeholder: '/home/me/src/project' });
  const name = h('input', { type: 'text', id: 'ws-name', required: true });
  const ro = h('input', { type: 'checkbox', id: 'ws-ro' });
  const dlp = h('input', { type: 'checkbox', id: 'ws-dlp' });
  const msg = h('div');
  m.body.append(h('form', { class: 'stack', onsubmit: async (e) => {
    e.preventDefault();
    try {
      const { data } = await api('POST', `${BASE}/workspaces`, { node_id: node.value, path: path.value.trim(), name: name.value.trim(), read_only: ro.checked || undefined, dlp: dlp.checked ? 'deny' : undefined });
      m.close();
      done();
      navigate(`/workspaces/${encodeURIComponent(data.ref)}`);
    } catch (err) { replace(msg, errorLine(err)); }
  } }, msg, h('label', { for: 'ws-node' }, 'Node'), node, h('label', { for: 'ws-path' }, 'Folder on the node'), path,
  h('label', { for: 'ws-name' }, 'Name'), name,
  h('label', { class: 'check' }, ro, 'Read-only: no run may write it'), h('label', { class: 'check' }, dlp, 'Refuse reading its files through the API (DLP)'),
  h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), h('button', { type: 'submit', id: 'ws-create-submit' }, 'Register'))));
}

function approvalLine(a, approved, what) {
  if (!a) return h('p', { class: 'muted' }, `No ${what} approval yet.`);
  return h('p', { class: 'muted approval' }, `Last approval: sha256 ${a.sha256.slice(0, 16)}… by ${a.actor}, ${localTime(a.at)} (${relTime(a.at)})`,
    approved ? '' : '. It does not cover the current text, so it no longer applies.');
}

function detail(main, ref) {
  const canAdmin = session.can('sessions:workspace:admin');
  const human = session.me && session.me.kind === 'human';
  const head = h('header', { class: 'run-head' });
  const status = h('p', { class: 'banner', hidden: true, id: 'ws-status' });
  const setup = h('section', { class: 'gate', id: 'setup' });
  const pcfg = h('section', { class: 'gate', id: 'project-config' });
  replace(main, h('nav', { class: 'crumbs' }, h('a', { href: '/workspaces', 'data-nav': true }, '← Workspaces')), head, status, setup, pcfg);
  let ws = null;

  async function load() {
    try {
      ws = await get(wsPath(ref));
      renderHead();
      renderSetup();
    } catch (e) {
      replace(head, errorLine(e));
      return;
    }
    loadConfig();
  }

  function renderHead() {
    replace(head, h('div', { class: 'line1' }, h('h1', null, ws.name), ws.read_only ? h('span', { class: 'badge' }, 'read-only') : null),
      kv([['Folder', h('code', null, ws.path)], ['Node', h('a', { href: `/nodes/${encodeURIComponent(ws.node_id)}`, 'data-nav': true }, ws.node_id)], ['Reference', ws.ref],
        ['Files shown', ws.allowed_subpaths && ws.allowed_subpaths.length ? ws.allowed_subpaths.join(', ') : 'all'],
        ['Read limit', `${ws.max_read_bytes} bytes`], ['DLP', ws.dlp === 'deny' ? 'file reads refused' : 'file reads allowed']]));
  }

  // The setup command (R-SETUP-5..9): what a worktree launch waits for.
  function renderSetup() {
    const cmd = ws.setup_command;
    const approved = ws.setup_approved === true;
    const state = cmd ? h('span', { class: `state ${approved ? 's-idle' : 's-pending_approval'}`, id: 'setup-state' }, approved ? 'approved' : 'not approved') : null;
    const edit = canAdmin ? h('button', { type: 'button', class: 'ghost', id: 'setup-edit', onclick: editSetup }, cmd ? 'Edit' : 'Set a setup command') : null;
    const approve = canAdmin && human && cmd && !approved ? h('button', { type: 'button', id: 'setup-approve', onclick: () => approveDialog('setup', cmd, ws.setup_command_sha256) }, 'Review and approve') : null;
    replace(setup, h('h2', null, 'Setup command ', state),
      cmd ? [h('pre', { class: 'command', id: 'setup-command' }, cmd), h('p', { class: 'hash' }, 'sha256 ', h('code', { id: 'setup-sha' }, ws.setup_command_sha256))] :
        h('p', { class: 'muted', id: 'setup-none' }, 'No setup command: worktree launches need no approval.'),
      cmd ? h('p', { class: 'muted' }, approved ? 'Worktree launches may start: this exact text was approved.' :
        'Worktree launches are refused until a person approves this exact text (or a launch skips it with “skip the setup command”).') : null,
      approvalLine(ws.setup_approval, approved, 'setup'),
      canAdmin && !human ? h('p', { class: 'muted' }, 'An agent identity cannot approve.') : null,
      h('div', { class: 'actions' }, edit, approve));
  }

  function editSetup() {
    const ta = h('textarea', { id: 'setup-text', rows: 4, 'aria-label': 'Setup command' });
    ta.value = ws.setup_command || '';
    const msg = h('div');
    const form = h('form', { class: 'stack', onsubmit: async (e) => {
      e.preventDefault();
      try {
        const { data } = await api('PUT', wsPath(ref, '/setup-command'), { command: ta.value });
        ws = data;
        say(status, '', ta.value ? 'Setup command saved: every change of even one character needs a new approval.' : 'Setup command cleared.');
        renderSetup();
      } catch (err) { replace(msg, errorLine(err)); }
    } }, msg, h('p', { class: 'muted' }, 'Stored exactly as written, whitespace included (at most 8192 bytes). Anyone who can read the workspace can read it: no secrets. An empty text clears it.'), ta,
    h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: renderSetup }, 'Cancel'), h('button', { type: 'submit', id: 'setup-save' }, 'Save')));
    setup.append(form);
    ta.focus();
  }

  async function loadConfig() {
    try {
      renderConfig(await get(wsPath(ref, '/project-config')));
    } catch (e) {
      replace(pcfg, h('h2', null, 'Repository configuration'), errorLine(e));
    }
  }

  // renderConfig groups the flagged keys by tool, then file (R-PCS-19).
  function renderConfig(pc) {
    const byTool = new Map();
    for (const f of pc.files) for (const t of (f.tools.length ? f.tools : ['any'])) {
      if (!byTool.has(t)) byTool.set(t, []);
      byTool.get(t).push(f);
    }
    const flagged = pc.files.length > 0;
    const state = flagged ? h('span', { class: `state ${pc.approved ? 's-idle' : 's-pending_approval'}`, id: 'pcfg-state' }, pc.approved ? 'approved' : 'not approved') : null;
    const approve = canAdmin && human && flagged && !pc.approved ? h('button', { type: 'button', id: 'pcfg-approve', onclick: () => approveDialog('pcfg', pc, pc.sha256) }, 'Review and approve') : null;
    replace(pcfg, h('h2', null, 'Repository configuration ', state),
      h('p', { class: 'muted' }, 'Agent configuration carried by the repository that could run a program or redirect traffic. A tool that reads a flagged file starts only once a person approved exactly what is flagged.'),
      flagged ? [...byTool.entries()].map(([tool, files]) => h('div', { class: 'pcfg-tool', dataset: { tool } },
        h('h3', null, toolName(tool)), files.map(fileBlock))) : h('p', { class: 'muted', id: 'pcfg-none' }, 'Nothing flagged: every tool may start here.'),
      flagged ? h('p', { class: 'hash' }, 'sha256 of the flagged part ', h('code', { id: 'pcfg-sha' }, pc.sha256)) : null,
      flagged ? approvalLine(pc.approval, pc.approved, 'repository configuration') : null,
      h('div', { class: 'actions' }, approve));
  }

  function fileBlock(f) {
    return h('div', { class: 'pcfg-file', dataset: { path: f.path } }, h('h4', null, h('code', null, f.path)),
      f.unreadable ? h('p', { class: 'banner warn' }, `Flagged whole: it could not be read (${f.unreadable.replace(/_/g, ' ')}${f.detail ? `: ${f.detail}` : ''}).`) : null,
      f.keys && f.keys.length ? h('table', { class: 'keys' }, h('tbody', null, f.keys.map((k) => h('tr', null, h('th', null, h('code', null, k.path)),
        h('td', null, h('pre', { class: 'value' }, typeof k.value === 'string' ? JSON.stringify(k.value) : JSON.stringify(k.value, null, 2))))))) : null);
  }

  // approveDialog shows exactly what is approved and its hash; the POST
  // carries that hash, so a text changed meanwhile is refused (409).
  function approveDialog(kind, what, sha) {
    const m = modal(`${kind}-approve-dialog`, kind === 'setup' ? 'Approve the setup command' : 'Approve the repository configuration', { wide: true });
    const msg = h('div');
    const go = h('button', { type: 'button', id: `${kind}-approve-confirm`, onclick: async () => {
      go.disabled = true;
      try {
        await api('POST', wsPath(ref, kind === 'setup' ? '/setup-command/approve' : '/project-config/approve'), { sha256: sha });
        m.close();
        say(status, '', kind === 'setup' ? 'Setup command approved: worktree launches may start.' : 'Repository configuration approved: the tools that read it may start.');
        load();
      } catch (e) {
        go.disabled = false;
        replace(msg, errorLine(e));
        if (e.status === 409) msg.append(h('p', { class: 'muted' }, 'What is stored changed since this page read it: close this and review it again.'));
      }
    } }, 'Approve exactly this');
    replace(m.body, h('p', null, 'You approve exactly this, and nothing else:'),
      kind === 'setup' ? h('pre', { class: 'command', id: 'approve-text' }, what) :
        h('div', { id: 'approve-text' }, what.files.map(fileBlock)),
      h('p', { class: 'hash' }, 'sha256 ', h('code', { id: 'approve-sha' }, sha)), msg,
      h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), go));
  }

  load();
  return { destroy() {} };
}
