// signin.js: /signin. A one-time link carries its secret in the fragment
// (/signin#olvs_...), which no server log sees; the page takes it out of
// the address bar at once and posts it. Without one, a person pastes an
// API token, or signs in with the organisation's identity provider when
// the coordinator has one (GET /v1/sso): that button is a plain link to
// /v1/sso/login, and a refused sign-in comes back here with
// ?sso_error=CODE&sso_message=TEXT.
import { h, replace } from './dom.js';
import { api, get, session, explain } from './api.js';
import { navigate } from './app.js';

export function signinView(root) {
  const secret = location.hash.slice(1);
  if (secret) history.replaceState(null, '', '/signin');
  const msg = h('p', { class: 'banner', role: 'status', hidden: true });
  const token = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', placeholder: 'olv_…', required: true, 'aria-label': 'API token' });
  const form = h('form', { class: 'signin', onsubmit: (e) => { e.preventDefault(); send({ token: token.value.trim() }); } },
    h('h1', null, 'Sign in to Olivares'),
    msg,
    h('p', { class: 'muted' }, 'Open the sign-in link printed by olivares-coordinator dev or minted by olivares-coordinator signin-link, or paste an API token.'),
    h('label', { for: 'token' }, 'API token'),
    token,
    h('button', { type: 'submit' }, 'Sign in'));
  replace(root, h('main', { class: 'signin-page' }, form));

  const params = new URLSearchParams(location.search);
  if (params.get('sso_error')) {
    history.replaceState(null, '', '/signin');
    msg.hidden = false;
    msg.className = 'banner error';
    msg.setAttribute('role', 'alert');
    msg.textContent = params.get('sso_message') || params.get('sso_error');
  }
  get('/v1/sso', { noTenant: true, quiet401: true }).then((info) => {
    if (!info.enabled) return;
    const a = h('a', { id: 'sso', class: 'button sso', href: info.login_url }, `Sign in with ${info.display_name}`);
    form.insertBefore(a, form.querySelector('p.muted'));
  }).catch(() => {});

  async function send(body) {
    msg.hidden = false;
    msg.className = 'banner';
    msg.textContent = 'Signing in…';
    try {
      const r = await api('POST', '/v1/signin', body, { noTenant: true, quiet401: true });
      session.me = r.data;
      session.whoami = null;
      navigate('/', true);
    } catch (e) {
      msg.className = 'banner error';
      msg.setAttribute('role', 'alert');
      msg.textContent = explain(e);
    }
  }
  if (secret) send({ link: secret });
  else token.focus();
  return { destroy() {} };
}
