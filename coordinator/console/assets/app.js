// app.js: the console's entry: sign-in, the tenant, the header with its
// navigation and notification settings, and the router between the
// screens: sessions (/), a run (/runs/{ref}), workspaces, the fleet's
// nodes, the Codex catalog, the audit ledger, and profiles and the vault.
import { h, replace } from './dom.js';
import { api, get, session, explain } from './api.js';
import { watcher, REASONS, notifyPrefs, setNotifyPref } from './attention.js';

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

let unsubNav = null;

function unmount() {
  if (view && view.destroy) view.destroy();
  view = null;
  if (unsubNav) unsubNav();
  unsubNav = null;
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
  replace(root, shell(main, path));
  const rest = (prefix) => (path.startsWith(prefix) ? decodeURIComponent(path.slice(prefix.length)) : '');
  const screen = (file, view, ...args) => import(`./${file}.js`).then((m) => m[view](main, ...args));
  const tab = new URLSearchParams(location.search).get('tab') || '';
  let v;
  if (path.startsWith('/runs/')) v = screen('run', 'runView', rest('/runs/'), { tab });
  else if (path === '/workspaces' || path.startsWith('/workspaces/')) v = screen('workspaces', 'workspacesView', rest('/workspaces/'));
  else if (path === '/nodes' || path.startsWith('/nodes/')) v = screen('fleet', 'fleetView', rest('/nodes/'));
  else {
    const SCREENS = { '/codex': 'codex', '/claude': 'claude', '/audit': 'audit', '/webhooks': 'webhooks', '/profiles': 'profiles', '/usage': 'usage' };
    v = SCREENS[path] ? screen(SCREENS[path], `${SCREENS[path]}View`) : screen('list', 'listView');
  }
  const nav0 = NAV.find(([, , on]) => on(path));
  watcher.setLabel(nav0 && nav0[0] !== '/' ? nav0[1] : '');
  const mounted = await v;
  if (location.pathname !== path) { if (mounted.destroy) mounted.destroy(); return; }
  view = mounted;
  watcher.start();
}

function tenantChooser(tenants) {
  return h('main', { class: 'chooser' },
    h('h1', null, 'Choose a tenant'),
    h('ul', { class: 'tenants' }, tenants.map((t) => h('li', null,
      h('button', { type: 'button', onclick: () => { session.setTenant(t.id); route(); } }, t.id, h('span', { class: 'muted' }, ` ${t.role}`))))));
}

const NAV = [
  ['/', 'Sessions', (p) => p === '/' || p.startsWith('/runs')],
  ['/workspaces', 'Workspaces', (p) => p.startsWith('/workspaces')],
  ['/nodes', 'Fleet', (p) => p.startsWith('/nodes')],
  ['/codex', 'Codex', (p) => p === '/codex'],
  ['/claude', 'Claude Code', (p) => p === '/claude'],
  ['/profiles', 'Profiles', (p) => p === '/profiles'],
  ['/usage', 'Usage', (p) => p === '/usage'],
  ['/audit', 'Audit', (p) => p === '/audit', 'sessions:run:admin'],
  ['/webhooks', 'Webhooks', (p) => p === '/webhooks', 'sessions:run:admin'],
];

// nav is the screens' navigation: a row in the header on a wide screen;
// on a phone, a bar at the bottom with the first screens and a menu with
// the rest, the signed-in person and sign-out (R-CON-5).
const PHONE_NAV = 3;
function nav(path) {
  const count = h('span', { class: 'attn-count', id: 'attn-count', hidden: true });
  const countM = h('span', { class: 'attn-count', hidden: true });
  const update = () => {
    const n = watcher.count();
    for (const c of [count, countM]) {
      c.hidden = !n;
      c.textContent = String(n);
      c.title = `${n} session${n === 1 ? '' : 's'} need${n === 1 ? 's' : ''} you`;
    }
  };
  unsubNav = watcher.subscribe(update);
  update();
  const items = NAV.filter(([, , , perm]) => !perm || session.can(perm));
  const link = ([href, label, on], c) => h('a', { href, 'data-nav': true, class: on(path) ? 'on' : '', 'aria-current': on(path) ? 'page' : undefined }, label, href === '/' ? c : null);
  const me = session.me;
  const more = items.slice(PHONE_NAV);
  const bottom = h('nav', { class: 'bottom-nav', id: 'bottom-nav', 'aria-label': 'Screens' }, items.slice(0, PHONE_NAV).map((it) => link(it, countM)),
    h('details', { class: `more${more.some(([, , on]) => on(path)) ? ' on' : ''}`, id: 'nav-more' }, h('summary', null, 'More'),
      h('div', { class: 'more-menu' }, more.map((it) => link(it)),
        me ? h('div', { class: 'me', id: 'nav-me' }, me.name, session.whoami ? h('span', { class: 'role' }, session.whoami.role) : null) : null,
        me ? h('button', { type: 'button', class: 'ghost', onclick: signout }, 'Sign out') : null)));
  return [h('nav', { class: 'nav', 'aria-label': 'Screens' }, items.map((it) => link(it, count))), bottom];
}

// notifications: desktop notifications when the tab is in the background,
// opted into per reason (and the browser's own permission).
function notifications() {
  const box = h('details', { class: 'notify', id: 'notify' });
  const render = () => {
    const prefs = notifyPrefs();
    const perm = 'Notification' in window ? Notification.permission : 'unsupported';
    replace(box, h('summary', { 'aria-label': 'Notifications', title: 'Notifications' }, h('img', { src: '/assets/bell.svg', alt: '', width: 18, height: 18 })),
      h('div', { class: 'notify-menu' },
        h('p', { class: 'muted' }, 'Tell me, when this tab is in the background, that a session is…'),
        REASONS.map(([reason, label]) => h('label', { class: 'check' },
          h('input', { type: 'checkbox', id: `notify-${reason}`, checked: !!prefs[reason], onchange: async (e) => {
            setNotifyPref(reason, e.target.checked);
            if (e.target.checked && 'Notification' in window && Notification.permission === 'default') {
              try { await Notification.requestPermission(); } catch { /* refused */ }
            }
            render();
            box.open = true;
          } }), label)),
        h('button', { type: 'button', class: 'ghost', id: 'push-subscribe', onclick: async () => {
          const note = box.querySelector('#push-note');
          note.textContent = 'Subscribing…';
          try {
            const { subscribe } = await import('./push.js');
            const reasons = REASONS.map(([r]) => r).filter((r) => notifyPrefs()[r]);
            await subscribe(reasons);
            note.textContent = 'This device gets these notifications with the console closed.';
          } catch (err) {
            note.textContent = `No push on this device: ${err && err.message ? err.message : err}`;
          }
        } }, 'Also push to this device'),
        h('p', { class: 'muted', id: 'push-note', role: 'status' }),
        perm === 'denied' ? h('p', { class: 'banner warn' }, 'This browser blocks notifications for this site; allow them in its settings.') : null,
        perm === 'unsupported' ? h('p', { class: 'banner warn' }, 'This browser has no desktop notifications.') : null));
  };
  render();
  return box;
}

// The theme switch beside the system default, kept in this browser.
const THEME_KEY = 'olivares.theme';
function applyTheme(t) {
  if (t === 'light' || t === 'dark') document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
}
applyTheme(localStorage.getItem(THEME_KEY));
function themeSwitch() {
  const cur = localStorage.getItem(THEME_KEY) || '';
  return h('select', { class: 'theme', id: 'theme', 'aria-label': 'Theme', title: 'Theme', onchange: (e) => {
    if (e.target.value) localStorage.setItem(THEME_KEY, e.target.value); else localStorage.removeItem(THEME_KEY);
    applyTheme(e.target.value);
  } }, [['', 'Auto'], ['light', 'Light'], ['dark', 'Dark']].map(([v, t]) => h('option', { value: v, selected: v === cur }, t)));
}

function shell(main, path = '/') {
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
  const [topNav, bottomNav] = session.whoami ? nav(path) : [null, null];
  return h('div', { class: 'shell' },
    h('header', { class: 'top' },
      h('a', { href: '/', 'data-nav': true, class: 'brand' }, h('img', { src: '/assets/icon.svg', alt: '', width: 20, height: 20 }), h('span', { class: 'brand-name' }, 'Olivares')),
      topNav,
      h('div', { class: 'spacer' }),
      session.whoami ? notifications() : null,
      themeSwitch(),
      tenantEl,
      me ? h('span', { class: 'who', title: me.principal_id }, me.name, role ? h('span', { class: 'role' }, role) : null) : null,
      me ? h('button', { type: 'button', class: 'ghost', id: 'signout', onclick: signout }, 'Sign out') : null),
    main, bottomNav);
}

async function signout() {
  try {
    await api('POST', '/v1/signout', {}, { noTenant: true });
  } catch { /* the cookie is cleared either way */ }
  session.me = session.whoami = null;
  watcher.stop();
  navigate('/signin');
}

route();
