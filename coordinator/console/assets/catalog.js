// catalog.js: a fleet catalog asked of every node that opted in (Claude
// Code's conversations, Codex's threads): each host's rows or its own
// error, and per-host paging.
import { h, replace } from './dom.js';
import { api, get } from './api.js';
import { navigate } from './app.js';
import { errorLine, say } from './ui.js';

// hostCatalog lists the catalog at url in el, saying errors in status.
// A read asks for what the search input holds, with params() (the
// page size) and, for more of one host, the host and its cursor;
// row(hst, r) draws a row, none the element shown when no host answers, and
// empty the words for a host without rows. load() reads it anew,
// render() draws it again, cont(path) continues a row as a run.
export function hostCatalog(el, status, { url, search, params = () => ({}), row, none, empty }) {
  const hosts = new Map(); // host → {host, hostname, rows, next, error}
  const query = (extra) => {
    const p = new URLSearchParams({ ...extra, ...params() });
    if (search.value.trim()) p.set('search', search.value.trim());
    return p;
  };

  async function load() {
    replace(el, h('p', { class: 'muted' }, 'Asking the nodes…'));
    try {
      const cat = await get(`${url}?${query({})}`);
      hosts.clear();
      for (const hst of cat.hosts) hosts.set(hst.host, { ...hst, next: hst.next_cursor || '' });
      render();
    } catch (e) {
      replace(el, errorLine(e));
    }
  }

  async function more(id) {
    const hst = hosts.get(id);
    try {
      const page = (await get(`${url}?${query({ host: id, cursor: hst.next })}`)).hosts[0];
      hst.rows.push(...page.rows);
      hst.next = page.next_cursor || '';
      hst.error = page.error;
      render();
    } catch (e) {
      say(status, 'error', errorLine(e).textContent);
    }
  }

  function render() {
    if (!hosts.size) {
      replace(el, none);
      return;
    }
    replace(el, [...hosts.values()].map((hst) => h('section', { class: 'codex-host', dataset: { host: hst.host } },
      h('h2', null, hst.hostname || hst.host, h('span', { class: 'muted' }, ` ${hst.host}`), h('span', { class: 'count' }, String(hst.rows.length))),
      hst.error ? h('p', { class: 'banner error host-error', role: 'alert' }, `${hst.error.message} (${hst.error.code})`) : null,
      !hst.error && !hst.rows.length ? h('p', { class: 'muted' }, empty) : null,
      h('ul', { class: 'rows' }, hst.rows.map((r) => row(hst, r))),
      hst.next ? h('button', { type: 'button', class: 'ghost more', onclick: () => more(hst.host) }, 'More') : null)));
  }

  async function cont(path) {
    try {
      const { data } = await api('POST', `${url}/${path}/continue`, {});
      navigate(`/runs/${encodeURIComponent(data.run_ref)}`);
    } catch (e) {
      say(status, 'error', errorLine(e).textContent);
    }
  }

  return { load, render, cont };
}
