// profiles.js: provider profiles (an account home of one tool on one node)
// with their policy: active, launch approval, allowed workspaces, the
// engine's Claude Code hook and its denied tools (GET, POST and PATCH
// /profiles); and the tenant's vault secrets (names only, never values),
// which launches grant to runs. Changes need workspace administration.
// Sign in runs the tool's own sign-in on the profile's node and relays it
// (R-ACCT-1..5: POST, GET and DELETE /profiles/{ref}/signin); API key puts
// a key in the vault for launches to grant instead (R-ACCT-7).
import { h, replace, localTime, TOOLS, toolName } from './dom.js';
import { api, get, session, BASE } from './api.js';
import { errorLine, modal, say } from './ui.js';


// KEY_ENV is the variable each tool reads its API key from.
const KEY_ENV = { claude: 'ANTHROPIC_API_KEY', codex: 'OPENAI_API_KEY', gemini: 'GEMINI_API_KEY', grok: 'XAI_API_KEY', opencode: 'ANTHROPIC_API_KEY' };

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
      p.on_limit && p.on_limit.length ? `at a limit: ${p.on_limit.join(', then ')}` : null,
      p.stall_after ? `stalled after ${p.stall_after} without output` : null,
      p.resume_after_loss ? 'lost sessions resumed after a reboot' : null,
    ].filter(Boolean);
    // R-TR-7: what its sessions reach on the node, said plainly.
    const isolated = p.isolation === 'sandbox' || p.isolation === 'container';
    const boundary = isolated
      ? `${p.isolation === 'sandbox' ? 'Sandbox' : 'Container'}: its sessions see only their working directory and this home${p.network === 'none' ? ', with no network' : ''}.`
      : 'Native: its sessions run as the agent\u2019s user and can read the node\u2019s files.';
    return h('li', { class: 'card', dataset: { ref: p.ref } },
      h('div', { class: 'line1' }, h('span', { class: 'title' }, p.name), h('span', { class: 'badge' }, toolName(p.tool)), p.active ? null : h('span', { class: 'badge warn' }, 'inactive')),
      h('div', { class: 'meta' }, h('code', null, p.home), h('span', null, p.node_id), p.env_keys && p.env_keys.length ? h('span', null, `env ${p.env_keys.join(', ')}`) : null, h('span', { class: 'muted' }, p.ref)),
      h('p', { class: 'muted policy' }, policy.length ? policy.join(' · ') : 'No restriction.'),
      h('p', { class: isolated ? 'muted isolation' : 'isolation warn' }, boundary),
      account(p),
      canAdmin ? h('div', { class: 'actions' }, h('button', { type: 'button', class: 'ghost act-policy', onclick: () => editPolicy(p) }, 'Policy'),
        h('button', { type: 'button', class: 'ghost act-signin', onclick: () => signIn(p) }, 'Sign in'),
        h('button', { type: 'button', class: 'ghost act-apikey', onclick: () => apiKey(p) }, 'API key')) : null);
  }

  // account is the card's line on the profile's account (R-ACCT-9), filled
  // in when the node answers.
  function account(p) {
    const el = h('p', { class: 'muted account' }, 'Account: asking the node\u2026');
    get(`${BASE}/profiles/${encodeURIComponent(p.ref)}/account`).then((a) => {
      const who = `${a.email ? ` as ${a.email}` : ''}${a.plan ? ` (${a.plan})` : ''}`;
      const state = a.signed_in === true ? `signed in${who}` : a.signed_in === false ? 'not signed in' : 'unknown';
      const windows = (a.rate_limits || []).map((w) => `${w.name} ${Math.round(w.used_percent)}% used${w.resets_at ? `, resets ${localTime(w.resets_at)}` : ''}`);
      el.className = a.signed_in === false ? 'account warn' : 'muted account';
      replace(el, [`Account: ${state}`, a.message ? ` \u2014 ${a.message}` : '', windows.length ? ` \u00b7 ${windows.join(' \u00b7 ')}` : ''].join(''));
    }).catch((e) => replace(el, `Account: unknown (${e.message || e})`));
    return el;
  }

  // signIn starts the tool's sign-in on the node and follows it: the URL to
  // open, the code to paste back (Claude Code) or to enter there (Codex),
  // then how it ended. Closing the dialog before the end cancels it.
  async function signIn(p) {
    const m = modal('signin-dialog', `Sign in ${p.name}`);
    const state = h('div', { id: 'signin-state', 'aria-live': 'polite' });
    m.body.append(state);
    const path = `${BASE}/profiles/${encodeURIComponent(p.ref)}/signin`;
    let a = null;
    let timer = 0;
    let sent = false;
    const done = () => a && ['signed_in', 'failed', 'expired'].includes(a.state);
    m.dlg.addEventListener('close', () => {
      clearTimeout(timer);
      if (a && !done()) api('DELETE', `${path}/${encodeURIComponent(a.id)}`).catch(() => {});
    });
    const link = (url) => h('a', { href: url, target: '_blank', rel: 'noopener noreferrer', id: 'signin-url', class: 'signin-url' }, url);
    const close = h('button', { type: 'button', class: 'ghost', id: 'signin-close', onclick: m.close }, 'Close');
    function render() {
      if (!a) { replace(state, h('p', { class: 'muted' }, 'Starting the sign-in on the node\u2026')); return; }
      switch (a.state) {
        case 'waiting_for_code': {
          if (sent) break;
          const code = h('input', { type: 'text', id: 'signin-code', required: true, autocomplete: 'off', 'aria-label': 'Code from the sign-in page' });
          const msg = h('div');
          replace(state, h('p', null, 'Open this page, sign in, and paste the code it shows:'), link(a.url),
            h('form', { class: 'stack', onsubmit: async (e) => {
              e.preventDefault();
              try {
                a = (await api('POST', `${path}/${encodeURIComponent(a.id)}/code`, { code: code.value.trim() })).data;
                sent = true;
                render();
                poll();
              } catch (err) { replace(msg, errorLine(err)); }
            } }, msg, h('label', { for: 'signin-code' }, 'Code'), code,
            h('div', { class: 'buttons' }, close, h('button', { type: 'submit', id: 'signin-send' }, 'Send the code'))));
          return;
        }
        case 'waiting_for_browser':
          replace(state, h('p', null, 'Open this page in any browser, sign in, and enter the code:'), link(a.url),
            h('p', { class: 'signin-code', id: 'signin-user-code' }, h('code', null, a.user_code)),
            h('p', { class: 'muted' }, 'This dialog follows until the tool says you are signed in.'), h('div', { class: 'buttons' }, close));
          return;
        case 'signed_in': {
          const who = a.account && a.account.email ? ` as ${a.account.email}${a.account.plan ? ` (${a.account.plan})` : ''}` : '';
          replace(state, h('p', { class: 'banner', role: 'status', id: 'signin-done' }, `Signed in${who}. ${a.message || ''}`), h('div', { class: 'buttons' }, close));
          load();
          return;
        }
        case 'failed':
        case 'expired':
          replace(state, h('p', { class: 'banner error', role: 'alert', id: 'signin-done' }, `The sign-in ${a.state === 'expired' ? 'expired' : 'failed'}: ${a.message || ''}`),
            h('p', { class: 'muted' }, 'Try again, or give the profile an API key instead.'), h('div', { class: 'buttons' }, close));
          return;
      }
      replace(state, h('p', { class: 'muted' }, a.message ? `${a.message}\u2026` : 'The tool is signing in\u2026'), h('div', { class: 'buttons' }, close));
    }
    function poll() {
      clearTimeout(timer);
      if (done() || (a.state === 'waiting_for_code' && !sent)) return;
      timer = setTimeout(async () => {
        try { a = await get(`${path}/${encodeURIComponent(a.id)}`); } catch (err) { replace(state, errorLine(err)); return; }
        render();
        poll();
      }, 1000);
    }
    render();
    try {
      a = (await api('POST', path)).data;
    } catch (err) {
      replace(state, errorLine(err), h('div', { class: 'buttons' }, close, h('button', { type: 'button', class: 'ghost', onclick: () => { m.close(); apiKey(p); } }, 'Use an API key')));
      return;
    }
    render();
    poll();
  }

  // apiKey keeps a key in the vault (sealed, never shown again) and makes
  // it the profile's: every launch hands it to the tool as its key
  // variable (R-ACCT-7).
  function apiKey(p) {
    const m = modal('apikey-dialog', `API key for ${p.name}`);
    const env = KEY_ENV[p.tool] || 'API_KEY';
    const name = h('input', { type: 'text', id: 'key-name', required: true, value: `${p.name}-api-key` });
    const value = h('input', { type: 'password', id: 'key-value', required: true, autocomplete: 'off' });
    const msg = h('div');
    m.body.append(h('form', { class: 'stack', onsubmit: async (e) => {
      e.preventDefault();
      try {
        const sec = (await api('POST', `${BASE}/vault/secrets`, { name: name.value.trim(), value: value.value })).data;
        try {
          await api('PATCH', `${BASE}/profiles/${encodeURIComponent(p.ref)}`, { api_key_ref: sec.ref });
        } catch (err) {
          // Nothing half-done: the key goes if the profile did not take it.
          await api('DELETE', `${BASE}/vault/secrets/${encodeURIComponent(sec.ref)}`).catch(() => {});
          throw err;
        }
        replace(m.body, h('p', { class: 'banner', role: 'status', id: 'key-done' }, `The key is in the vault as ${sec.name}, and every new session of ${p.name} gets it as ${env}.`),
          h('div', { class: 'buttons' }, h('button', { type: 'button', onclick: m.close }, 'Close')));
        loadVault();
        load();
      } catch (err) { replace(msg, errorLine(err)); }
    } }, msg, h('p', { class: 'muted' }, `Instead of a sign-in, the profile can use an API key: it is sealed in the vault and every new session of ${p.name} gets it as ${env}.`),
    h('label', { for: 'key-name' }, 'Name in the vault'), name, h('label', { for: 'key-value' }, 'API key'), value,
    h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: m.close }, 'Cancel'), h('button', { type: 'submit', id: 'key-save' }, 'Keep in the vault'))));
  }

  function editPolicy(p) {
    const m = modal('policy-dialog', `Policy of ${p.name}`);
    const active = h('input', { type: 'checkbox', id: 'pol-active', checked: p.active });
    const approval = h('input', { type: 'checkbox', id: 'pol-approval', checked: !!p.launch_requires_approval });
    const hooks = h('input', { type: 'checkbox', id: 'pol-hooks', checked: !!p.engine_hooks, disabled: p.tool !== 'claude' });
    const denied = h('input', { type: 'text', id: 'pol-denied', value: (p.denied_tools || []).join(', '), placeholder: 'Bash, Write (or *)', disabled: p.tool !== 'claude' });
    const isolation = h('select', { id: 'pol-isolation' }, [['native', 'Native: runs as the agent\u2019s user, can read the node\u2019s files'], ['sandbox', 'Sandbox: sees only its working directory and its home'], ['container', 'Container (podman): the same boundary as the sandbox']]
      .map(([v, t]) => h('option', { value: v, selected: (p.isolation || 'native') === v }, t)));
    const network = h('select', { id: 'pol-network' }, [['host', 'The node\u2019s network'], ['none', 'No network (sandbox or container only)']]
      .map(([v, t]) => h('option', { value: v, selected: (p.network || 'host') === v }, t)));
    const stall = h('input', { type: 'text', id: 'pol-stall', value: p.stall_after || '10m0s', placeholder: '10m' });
    const resumeLoss = h('input', { type: 'checkbox', id: 'pol-resume-loss', checked: !!p.resume_after_loss });
    const allowed = h('select', { id: 'pol-workspaces', multiple: true, size: Math.min(6, Math.max(2, workspaces.size)) },
      [...workspaces.values()].filter((w) => w.node_id === p.node_id).map((w) => h('option', { value: w.ref, selected: (p.allowed_workspaces || []).includes(w.ref) }, w.name)));
    // R-ONL-1: the plan tried when a session stops on a usage limit.
    const onLimit = h('input', { type: 'text', id: 'pol-onlimit', value: (p.on_limit || []).join(', '),
      placeholder: p.tool === 'claude' ? 'move:claude-b, handoff:codex-a, continue_at_reset' : 'handoff:claude-a, continue_at_reset' });
    const msg = h('div');
    m.body.append(h('form', { class: 'stack', onsubmit: async (e) => {
      e.preventDefault();
      const body = {
        on_limit: onLimit.value.split(',').map((x) => x.trim()).filter(Boolean),
        active: active.checked, launch_requires_approval: approval.checked,
        allowed_workspaces: [...allowed.selectedOptions].map((o) => o.value),
        isolation: isolation.value, network: network.value,
        stall_after: stall.value.trim() || undefined, resume_after_loss: resumeLoss.checked,
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
    h('label', { for: 'pol-stall' }, 'A turn that writes nothing this long is marked stalled (1m to 24h; nothing is stopped)'), stall,
    h('label', { class: 'check' }, resumeLoss, 'After a host reboot, resume its lost sessions on their conversations'),
    h('label', { class: 'check' }, hooks, 'Engine hooks (Claude Code): tool uses are recorded and the denied tools refused'),
    h('label', { for: 'pol-denied' }, 'Denied tools'), denied,
    h('label', { for: 'pol-onlimit' }, 'At a usage limit, try in order: move:PROFILE (Claude Code: the same conversation on another account), handoff:PROFILE (any tool, with the handoff summary), continue_at_reset (last). Empty: wait for a person. Rotating accounts must respect each vendor’s terms.'), onLimit,
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
