// sw.js: the console's service worker, for Web Push alone (R-NOTIF-8): a
// push shows a notification, with the console closed; a click opens the
// run. A decision's push carries the request and its buttons (R-NOTIF-10):
// Allow once or Deny settles it from here, with the person's own session
// (the cookie, same-origin), and the notification is replaced by the
// outcome. It intercepts no request.
const BASE = '/v1/m/sessions';

// keep extends the event's life until p settles. A click a test
// dispatches is not trusted, and waitUntil refuses it; the work goes on.
function keep(event, p) {
  try { event.waitUntil(p); } catch { /* an untrusted event */ }
  return p;
}

function show(m) {
  const r = m.request;
  const lines = r ? [r.command, r.cwd ? `in ${r.cwd}` : '', (r.files || []).join(', '), r.diff_summary, r.question].filter(Boolean) : [];
  return self.registration.showNotification(m.title || 'Olivares', {
    body: lines.length ? lines.join('\n') : (m.body || ''), tag: m.tag || undefined, icon: '/assets/icon.svg',
    requireInteraction: !!r,
    actions: (m.actions || []).map((a) => ({ action: a.action, title: a.title })),
    data: { url: m.url || '/', run_ref: m.run_ref, tenant: m.tenant, request: r ? r.id : '', actions: m.actions || [] },
  });
}

self.addEventListener('push', (event) => {
  let m = {};
  try { m = event.data ? event.data.json() : {}; } catch { m = {}; }
  keep(event, show(m));
});

// outcome is the sentence that replaces the notification.
async function outcome(resp, act) {
  if (resp.ok) return act.decision === 'allow' ? 'Allowed by you.' : 'Denied by you.';
  let e = {};
  try { e = (await resp.json()).error || {}; } catch { e = {}; }
  if (e.code === 'request_settled') {
    const m = / already answered by (.+) \((\w+)\)$/.exec(e.message || '');
    return m ? `Already answered by ${m[1]} (${m[2]}).` : 'Already answered.';
  }
  if (e.code === 'request_expired') return 'Expired: nobody can answer it any more.';
  if (resp.status === 401) return 'Your console session ended: open the console, sign in, and answer there.';
  return `Not answered: ${e.message || resp.status}`;
}

// answer settles the notification's request with one of its actions,
// then replaces the notification by what happened.
async function answer(n, act) {
  const d = n.data || {};
  let text;
  try {
    const resp = await fetch(`${BASE}/runs/${encodeURIComponent(d.run_ref)}/requests/${encodeURIComponent(d.request)}`, {
      method: 'POST', credentials: 'same-origin', cache: 'no-store',
      headers: { Accept: 'application/json', 'Content-Type': 'application/json', 'X-Olivares-Tenant': d.tenant || '' },
      body: JSON.stringify({ decision: act.decision, option_id: act.option_id }),
    });
    text = await outcome(resp, act);
  } catch (err) {
    text = `Not answered: the console could not be reached (${err && err.message ? err.message : err}).`;
  }
  n.close();
  await self.registration.showNotification(n.title, {
    body: text, tag: n.tag || undefined, icon: '/assets/icon.svg', data: { url: d.url || '/', outcome: text },
  });
}

self.addEventListener('notificationclick', (event) => {
  const n = event.notification;
  const d = n.data || {};
  const act = (d.actions || []).find((a) => a.action === event.action);
  if (act && act.action !== 'answer' && d.request) {
    keep(event, answer(n, act));
    return;
  }
  n.close();
  keep(event, self.clients.openWindow(d.url || '/'));
});
