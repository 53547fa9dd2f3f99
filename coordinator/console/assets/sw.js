// sw.js: the console's service worker, for Web Push alone (R-NOTIF-8): a
// push shows a notification, with the console closed; a click opens the
// run. It intercepts no request.
self.addEventListener('push', (event) => {
  let m = {};
  try { m = event.data ? event.data.json() : {}; } catch { m = {}; }
  event.waitUntil(self.registration.showNotification(m.title || 'Olivares', {
    body: m.body || '', tag: m.tag || undefined, icon: '/assets/icon.svg', data: { url: m.url || '/' },
  }));
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const url = (event.notification.data && event.notification.data.url) || '/';
  event.waitUntil(self.clients.openWindow(url));
});
