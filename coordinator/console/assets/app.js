// app.js: the console's entry: sign-in, the tenant, and the router between
// the sessions list (/) and a run (/runs/{ref}).
import { h, replace } from './dom.js';
import { api, get, session, explain } from './api.js';

const root = document.getElementById('app');
let view = null; // the mounted view: {destroy()}

export function navigate(path, replaceState = false) {
  if (replaceState) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  route();
}

window.addEventListener('popstate', () => route());
document.addEventListener('click', (e) => {
  const a = e.target.closest && e.target.closest('a[data-nav]');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.getAttribute('href'));
});

session.onUnauthenticated = () => {
  if (location.pathname !== '/signin') navigate('/signin', true);
};

function unmount() {
  if (view && view.destroy) view.destroy();
  view = null;
}

async function route() {
  unmount();
  const path = location.pathname;
  if (path === '/signin') {
    const { signinView } = await import('./signin.js');
    view = signinView(root);
    return;
  }
  try {
    if (!session.me) session.me = await get('/v1/tenants', { noTenant: true });
  } catch (e) {
    if (e.status !== 401) replace(root, h('p', { class: 'banner error', role: 'alert' }, explain(e)));
    return;
  }
  const tenants = session.me.items;
  if (!tenants.length) {
    replace(root, shell(h('p', { class: 'banner error', role: 'alert' }, 'You belong to no tenant yet; ask an admin for a role.')));
    return;
  }
  if (!tenants.some((t) => t.id === session.tenant)) {
    if (tenants.length === 1) session.setTenant(tenants[0].id);
    else {
      replace(root, shell(tenantChooser(tenants)));
      return;
    }
  }
  try {
    session.whoami = await get('/v1/whoami');
  } catch (e) {
    if (e.status !== 401) replace(root, shell(h('p', { class: 'banner error', role: 'alert' }, explain(e))));
    return;
  }
  const main = h('main', { id: 'main' });
  replace(root, shell(main));
  if (path.startsWith('/runs/')) {
    const { runView } = await import('./run.js');
    view = runView(main, decodeURIComponent(path.slice('/runs/'.length)));
  } else {
    const { listView } = await import('./list.js');
    view = listView(main);
  }
}

function tenantChooser(tenants) {
  return h('main', { class: 'chooser' },
    h('h1', null, 'Choose a tenant'),
    h('ul', { class: 'tenants' }, tenants.map((t) => h('li', null,
      h('button', { type: 'button', onclick: () => { session.setTenant(t.id); route(); } }, t.id, h('span', { class: 'muted' }, ` ${t.role}`))))));
}

function shell(main) {
  const me = session.me;
  const tenants = me ? me.items : [];
  let tenantEl = null;
  if (tenants.length > 1) {
    tenantEl = h('select', { 'aria-label': 'Tenant', class: 'tenant', onchange: (e) => { session.setTenant(e.target.value); session.whoami = null; navigate('/'); } },
      tenants.map((t) => h('option', { value: t.id, selected: t.id === session.tenant }, t.id)));
  } else if (session.tenant) {
    tenantEl = h('span', { class: 'tenant muted' }, session.tenant);
  }
  const role = session.whoami ? session.whoami.role : '';
  return h('div', { class: 'shell' },
    h('header', { class: 'top' },
      h('a', { href: '/', 'data-nav': true, class: 'brand' }, h('img', { src: '/assets/icon.svg', alt: '', width: 20, height: 20 }), 'Olivares'),
      h('div', { class: 'spacer' }),
      tenantEl,
      me ? h('span', { class: 'who', title: me.principal_id }, me.name, role ? h('span', { class: 'role' }, role) : null) : null,
      me ? h('button', { type: 'button', class: 'ghost', id: 'signout', onclick: signout }, 'Sign out') : null),
    main);
}

async function signout() {
  try {
    await api('POST', '/v1/signout', {}, { noTenant: true });
  } catch { /* the cookie is cleared either way */ }
  session.me = session.whoami = null;
  navigate('/signin');
}

route();
