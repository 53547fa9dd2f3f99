// push.js: this browser's Web Push subscription (R-NOTIF-8). Loaded when
// the person asks for it, never on the first paint.
import { api, get, BASE } from './api.js';

function keyBytes(b64) {
  const s = atob(b64.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((b64.length + 3) % 4));
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

// registration is the console's service worker, registered once.
export async function registration() {
  if (!('serviceWorker' in navigator) || !('PushManager' in window)) throw new Error('This browser has no Web Push.');
  // Its scope is /assets/: it serves pushes, never the pages, so it is
  // never the page's controller and serviceWorker.ready would not settle.
  const reg = await navigator.serviceWorker.register('/assets/sw.js', { scope: '/assets/' });
  const w = reg.installing || reg.waiting || (reg.active && reg.active.state !== 'activated' ? reg.active : null);
  if (w) {
    await new Promise((resolve, reject) => w.addEventListener('statechange', () => {
      if (w.state === 'activated') resolve();
      else if (w.state === 'redundant') reject(new Error('the service worker did not install'));
    }));
  }
  return reg;
}

// subscribe asks the browser for a push subscription with the
// coordinator's key and records it for the reasons given.
export async function subscribe(reasons) {
  const reg = await registration();
  const { public_key: key } = await get(`${BASE}/push/key`);
  if ('Notification' in window && Notification.permission === 'default') await Notification.requestPermission();
  if ('Notification' in window && Notification.permission === 'denied') throw new Error('This browser blocks notifications for this site; allow them in its settings.');
  const sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(key) });
  const j = sub.toJSON();
  const { data } = await api('POST', `${BASE}/push/subscriptions`, { endpoint: j.endpoint, keys: { p256dh: j.keys.p256dh, auth: j.keys.auth }, reasons });
  return data;
}
