// launch.js: the "New session" dialog (POST /runs): profile, workspace,
// worktree, worktree_from, no_setup, name and grants. A 202 means the
// profile's policy holds the launch for a person: the dialog says so and
// offers Approve to those who may approve (workspace administration).
import { h, replace } from './dom.js';
import { api, get, session, explain, BASE } from './api.js';
import { navigate } from './app.js';
import { errorLine } from './ui.js';

export async function openLaunch() {
  const dlg = h('dialog', { class: 'launch', id: 'launch-dialog', 'aria-labelledby': 'launch-title' });
  document.body.append(dlg);
  dlg.addEventListener('close', () => dlg.remove());
  const msg = h('div', { id: 'l-error', hidden: true });
  replace(dlg, h('p', null, 'Loading profiles…'));
  dlg.showModal();
  let profiles = [];
  let workspaces = [];
  let secrets = [];
  try {
    [profiles, workspaces] = await Promise.all([get(`${BASE}/profiles`).then((r) => r.items), get(`${BASE}/workspaces`).then((r) => r.items)]);
    if (session.can('sessions:workspace:admin')) secrets = await get(`${BASE}/vault/secrets`).then((r) => r.items).catch(() => []);
  } catch (e) {
    replace(dlg, h('p', { class: 'banner error', role: 'alert' }, explain(e)), h('button', { type: 'button', onclick: () => dlg.close() }, 'Close'));
    return;
  }
  const active = profiles.filter((p) => p.active !== false);
  const profile = h('select', { id: 'l-profile', name: 'profile', required: true },
    active.map((p) => h('option', { value: p.ref }, `${p.name} (${p.tool})`)));
  const workspace = h('select', { id: 'l-workspace', name: 'workspace' }, h('option', { value: '' }, 'No workspace'),
    workspaces.map((w) => h('option', { value: w.ref, selected: w.name === 'default' }, `${w.name} — ${w.path}`)));
  const worktree = h('input', { type: 'checkbox', id: 'l-worktree' });
  const from = h('input', { type: 'text', id: 'l-from', placeholder: 'branch or commit (optional)', disabled: true });
  const noSetup = h('input', { type: 'checkbox', id: 'l-nosetup', disabled: true });
  worktree.addEventListener('change', () => { from.disabled = noSetup.disabled = !worktree.checked; });
  const name = h('input', { type: 'text', id: 'l-name', maxlength: 200, placeholder: 'optional' });
  const grants = h('div', { class: 'grants' });
  const addGrant = () => {
    const kind = h('select', { 'aria-label': 'Grant kind' }, ['vault_secret', 'repository_credential', 'managed_credential', 'package_registry_token'].map((k) => h('option', { value: k }, k.replace(/_/g, ' '))));
    const sec = h('select', { 'aria-label': 'Secret' }, secrets.map((s) => h('option', { value: s.ref }, s.name)));
    const env = h('input', { type: 'text', placeholder: 'ENV_NAME', 'aria-label': 'Environment variable' });
    const asFile = h('input', { type: 'checkbox', 'aria-label': 'As a file' });
    const rowEl = h('div', { class: 'grant' }, kind, sec, env, h('label', null, asFile, 'as file'),
      h('button', { type: 'button', class: 'ghost', onclick: () => rowEl.remove() }, 'Remove'));
    rowEl.read = () => ({ kind: kind.value, secret_ref: sec.value, env: env.value.trim(), as_file: asFile.checked || undefined });
    grants.append(rowEl);
  };
  const submit = h('button', { type: 'submit', id: 'l-submit' }, 'Start');
  const form = h('form', { method: 'dialog', onsubmit: async (e) => {
    e.preventDefault();
    const body = { provider_profile_ref: profile.value };
    if (workspace.value) body.workspace_ref = workspace.value;
    if (worktree.checked) {
      body.worktree = true;
      if (from.value.trim()) body.worktree_from = from.value.trim();
      if (noSetup.checked) body.no_setup = true;
    }
    if (name.value.trim()) body.name = name.value.trim();
    const gs = [...grants.children].map((g) => g.read());
    if (gs.length) body.grants = gs;
    submit.disabled = true;
    msg.hidden = true;
    try {
      const r = await api('POST', `${BASE}/runs`, body);
      dlg.close();
      navigate(`/runs/${encodeURIComponent(r.data.run_ref)}`);
    } catch (err) {
      // A refusal by a workspace gate links to where it is approved.
      msg.hidden = false;
      replace(msg, errorLine(err, { workspaceRef: body.workspace_ref }));
      submit.disabled = false;
    }
  } },
  h('h2', { id: 'launch-title' }, 'New session'),
  msg,
  active.length ? null : h('p', { class: 'banner' }, 'No active profile: an admin registers one (olivares profile add).'),
  h('label', { for: 'l-profile' }, 'Profile'), profile,
  h('label', { for: 'l-workspace' }, 'Workspace'), workspace,
  h('label', { class: 'check' }, worktree, 'Work in a new git worktree'),
  h('label', { for: 'l-from' }, 'Start the worktree from'), from,
  h('label', { class: 'check' }, noSetup, 'Skip the workspace setup command this once'),
  h('label', { for: 'l-name' }, 'Name'), name,
  secrets.length ? h('fieldset', null, h('legend', null, 'Grants (the run is tainted by their kinds for good)'), grants,
    h('button', { type: 'button', class: 'ghost', onclick: addGrant }, 'Add a grant')) : null,
  h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'ghost', onclick: () => dlg.close() }, 'Cancel'), submit));
  replace(dlg, form);
  profile.focus();
}
