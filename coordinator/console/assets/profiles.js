// profiles.js: provider profiles (an account home of one tool on one node)
// with their policy: active, launch approval, allowed workspaces, the
// engine's Claude Code hook and its denied tools (GET, POST and PATCH
// /profiles); and the tenant's vault secrets (names only, never values),
// which launches grant to runs. Changes need workspace administration.
import { h, replace, localTime, TOOLS, TOOL } from './dom.js';
import { api, get, session, BASE } from './api.js';
import { errorLine, modal, say } from './ui.js';


export function profilesView(main) {
  const canAdmin = session.can('sessions:workspace:admin');
  const status = h('p', { class: 'banner', hidden: true, id: 'profiles-status' });
  const list = h('ul', { class: 'cards', id: 'profiles' });
  const vault = h('section', { id: 'vault' });
  replace(main, h('div', { class: 'list-head' }, h('h1', null, 'Profiles'),
    canAdmin ? h('button', { type: 'button', id: 'profile-add', onclick: create }, 'Add a profile') : null),
  h('p', { class: 'muted' }, 'A profile is one account of one tool on one node: its own home directory, environment and policy.'),
  status, list, vault);
  let workspaces = new Map();
  let nodes = [];

  async function load() {
    try {
      const [ps, ws, ns] = await Promise.all([get(`${BASE}/profiles`), get(`${BASE}/workspaces`), get('/v1/nodes')]);
      workspaces = new Map(ws.items.map((w) => [w.ref, w]));
      nodes = ns.items;
      replace(list, ps.items.length ? ps.items.map(card) : h('li', { class: 'muted' }, 'No profile yet.'));
    } catch (e) {
      replace(list, h('li', null, errorLine(e)));
    }
  }

  function card(p) {
    const policy = [
      p.active ? null : 'inactive: refuses launches',
      p.launch_requires_approval ? 'launches wait for approval' : null,
      p.allowed_workspaces && p.allowed_workspaces.length ? `only in ${p.allowed_workspaces.map((r) => (workspaces.get(r) || {}).name || r).join(', ')}` : null,
      p.engine_hooks ? `engine hooks${p.denied_tools && p.denied_tools.length ? `, denies ${p.denied_tools.join(', ')}` : ''}` : null,
    ].filter(Boolean);
    // R-TR-7: what its sessions reach on the node, said plainly.
    const boundary = p.isolation === 'sandbox'
      ? `Sandbox: its sessions see only their working directory and this home${p.network === 'none' ? ', with no network' : ''}.`
      : 'Native: its sessions run as the agent\u2019s user and can read the node\u2019s files.';
    return h('li', { class: 'card', dataset: { ref: p.ref } },
      h('div', { class: 'line1' }, h('span', { class: 'title' }, p.name), h('span', { class: 'badge' }, TOOL[p.tool] || p.tool), p.active ? null : h('span', { class: 'badge warn' }, 'inactive')),
      h('div', { class: 'meta' }, h('code', null, p.home), h('span', null, p.node_id), p.env_keys && p.env_keys.length ? h('span', null, `env ${p.env_keys.join(', ')}`) : null, h('span', { class: 'muted' }, p.ref)),
      h('p', { class: 'muted policy' }, policy.length ? policy.join(' · ') : 'No restriction.'),
      h('p', { class: p.isolation === 'sandbox' ? 'muted isolation' : 'isolation warn' }, boundary),
      canAdmin ? h('div', { class: 'actions' }, h('button', { type: 'button', class: 'ghost act-policy', onclick: () => editPolicy(p) }, 'Policy')) : null);
  }

  function editPolicy(p) {
    const m = modal('policy-dialog', `Policy of ${p.name}`);
    const active = h('input', { type: 'checkbox', id: 'pol-active', checked: p.active });
    const approval = h('input', { type: 'checkbox', id: 'pol-approval', checked: !!p.launch_requires_approval });
    const hooks = h('input', { type: 'checkbox', id: 'pol-hooks', checked: !!p.engine_hooks, disabled: p.tool !== 'claude' });
    const denied = h('input', { type: 'text', id: 'pol-denied', value: (p.denied_tools || []).join(', '), placeholder: 'Bash, Write (or *)', disabled: p.tool !== 'claude' });
    const isolation = h('select', { id: 'pol-isolation' }, [['native', 'Native: runs as the agent\u2019s user, can read the node\u2019s files'], ['sandbox', 'Sandbox: sees only its working directory and its home']]
      .map(([v, t]) => h('option', { value: v, selected: (p.isolation || 'native') === v }, t)));
    const network = h('select', { id: 'pol-network' }, [['host', 'The node\u2019s network'], ['none', 'No network (sandbox only)']]
      .map(([v, t]) => h('option', { value: v, selected: (p.network || 'host') === v }, t)));
    const allowed = h('select', { id: 'pol-workspaces', multiple: true, size: Math.min(6, Math.max(2, workspaces.size)) },
      [...workspaces.values()].filter((w) => w.node_id === p.node_id).map((w) => h('option', { value: w.ref, selected: (p.allowed_workspaces || []).includes(w.ref) }, w.name)));
    const msg = h('div');
    m.body.append(h('form', { class: 'stack', onsubmit: async (e) => {
      e.preventDefault();
      const body = {
        active: active.checked, launch_requires_approval: approval.checked,
        allowed_workspaces: [...allowed.selectedOptions].map((o) => o.value),
        isolation: isolation.value, network: network.value,
      };
      if (p.tool === 'claude') {
        body.engine_hooks = hooks.checked;
        body.denied_tools = denied.value.split(',').map((x) => x.trim()).filter(Boolean);
      }
      try {
        await api('PATCH', `${BASE}/profiles/${encodeURIComponent(p.ref)}`, body);
        m.close();
        say(status, '', `Policy of ${p.name} saved.`);
        load();
      } catch (err) { replace(msg, errorLine(err)); }
    } }, msg,
    h('label', { class: 'check' }, active, 'Active: accepts launches, resumes and moves'),
    h('label', { class: 'check' }, approval, 'Launches wait for a person\u2019s approval'),
    h('label', { for: 'pol-workspaces' }, 'Allowed workspaces (none selected: all)'), allowed,
    h('label', { for: 'pol-isolation' }, 'Isolation of its sessions (a launch may ask stricter, never looser)'), isolation,
    h('label', { for: 'pol-network' }, 'Network of an isolated session'), network,
    h('label', { class: 'check' }, hooks, 'Engine hooks (Claude Code): tool uses are recorded and the denied tools refused'),
    h('label', { for: 'pol-denied' }, 'Denied tools'), denied,
    h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), h('button', { type: 'submit', id: 'pol-save' }, 'Save'))));
  }

  function create() {
    const m = modal('profile-create', 'Add a profile');
    const node = h('select', { id: 'pf-node' }, nodes.filter((n) => !n.revoked_at).map((n) => h('option', { value: n.id }, n.hostname ? `${n.hostname} (${n.id})` : n.id)));
    const tool = h('select', { id: 'pf-tool' }, TOOLS.map(([v, t]) => h('option', { value: v }, t)));
    const name = h('input', { type: 'text', id: 'pf-name', required: true });
    const home = h('input', { type: 'text', id: 'pf-home', placeholder: 'the account\u2019s home directory on the node (empty: a new one)' });
    const env = h('textarea', { id: 'pf-env', rows: 3, placeholder: 'KEY=value, one a line (values stay on the node)' });
    const msg = h('div');
    m.body.append(h('form', { class: 'stack', onsubmit: async (e) => {
      e.preventDefault();
      const envMap = {};
      for (const line of env.value.split('\n')) {
        const i = line.indexOf('=');
        if (i > 0) envMap[line.slice(0, i).trim()] = line.slice(i + 1);
      }
      try {
        await api('POST', `${BASE}/profiles`, { node_id: node.value, tool: tool.value, name: name.value.trim(), home: home.value.trim() || undefined, env: Object.keys(envMap).length ? envMap : undefined });
        m.close();
        load();
      } catch (err) { replace(msg, errorLine(err)); }
    } }, msg, h('label', { for: 'pf-node' }, 'Node'), node, h('label', { for: 'pf-tool' }, 'Tool'), tool, h('label', { for: 'pf-name' }, 'Name'), name,
    h('label', { for: 'pf-home' }, 'Home'), home, h('label', { for: 'pf-env' }, 'Environment'), env,
    h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), h('button', { type: 'submit', id: 'pf-submit' }, 'Add'))));
  }

  // The vault: names and dates only; a value is typed once and never shown.
  async function loadVault() {
    if (!canAdmin) {
      replace(vault, h('h2', null, 'Vault'), h('p', { class: 'muted' }, 'Vault secrets are managed by workspace administrators.'));
      return;
    }
    try {
      const { items } = await get(`${BASE}/vault/secrets`);
      const name = h('input', { type: 'text', id: 'sec-name', placeholder: 'name', required: true, 'aria-label': 'Secret name' });
      const value = h('input', { type: 'password', id: 'sec-value', placeholder: 'value', required: true, autocomplete: 'off', 'aria-label': 'Secret value' });
      const msg = h('div');
      replace(vault, h('h2', null, 'Vault ', h('span', { class: 'count' }, String(items.length))),
        h('p', { class: 'muted' }, 'Secrets a launch can hand to a tool; the run is tainted by the grant\u2019s kind for good. Values are sealed and never shown again.'),
        h('ul', { class: 'rows', id: 'secrets' }, items.map((s) => h('li', { class: 'row', dataset: { ref: s.ref } }, h('span', { class: 'title' }, s.name), ' ',
          h('span', { class: 'muted' }, `${s.ref} · ${localTime(s.created_at)}`), ' ',
          h('button', { type: 'button', class: 'ghost act-delete', onclick: async () => {
            if (!window.confirm(`Delete the secret ${s.name}? Runs already given it keep what they were given.`)) return;
            try { await api('DELETE', `${BASE}/vault/secrets/${encodeURIComponent(s.ref)}`); loadVault(); } catch (err) { replace(msg, errorLine(err)); }
          } }, 'Delete')))),
        msg,
        h('form', { class: 'filters', onsubmit: async (e) => {
          e.preventDefault();
          try { await api('POST', `${BASE}/vault/secrets`, { name: name.value.trim(), value: value.value }); loadVault(); } catch (err) { replace(msg, errorLine(err)); }
        } }, name, value, h('button', { type: 'submit', id: 'sec-add' }, 'Add a secret')));
    } catch (e) {
      replace(vault, h('h2', null, 'Vault'), errorLine(e));
    }
  }

  load();
  loadVault();
  return { destroy() {} };
}
