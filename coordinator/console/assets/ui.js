// ui.js: pieces shared by the console's screens: modal dialogs, a
// confirmation step, copy buttons, error lines (with a link to the
// workspace when a launch is refused by one of its gates), tabs.
import { h, replace } from './dom.js';
import { explain } from './api.js';

// modal opens a dialog; close() removes it.
export function modal(id, title, { wide = false } = {}) {
  const dlg = h('dialog', { class: `modal${wide ? ' wide' : ''}`, id, 'aria-labelledby': `${id}-title` });
  const body = h('div', { class: 'modal-body' });
  dlg.append(h('div', { class: 'modal-head' }, h('h2', { id: `${id}-title` }, title),
    h('button', { type: 'button', class: 'ghost close', 'aria-label': 'Close', onclick: () => dlg.close() }, '×')), body);
  document.body.append(dlg);
  dlg.addEventListener('close', () => dlg.remove());
  dlg.showModal();
  return { dlg, body, close: () => dlg.close() };
}

// errorLine is a refusal in words (R-API-4: the server's message, never
// "error"). A launch or resume refused by a workspace gate links to the
// workspace page where it is reviewed and approved.
export function errorLine(e, { workspaceRef = '', id } = {}) {
  const p = h('p', { class: 'banner error', role: 'alert', id }, explain(e));
  if (workspaceRef && e && (e.code === 'setup_not_approved' || e.code === 'project_config_not_approved')) {
    p.append(' ', h('a', { href: `/workspaces/${encodeURIComponent(workspaceRef)}`, 'data-nav': true, class: 'gate-link',
      onclick: (ev) => { const d = ev.target.closest('dialog'); if (d) d.close(); } },
      e.code === 'setup_not_approved' ? 'Review the setup command' : 'Review the repository configuration'));
  }
  return p;
}

// status replaces el's content with one banner (kind '', 'warn', 'error').
export function say(el, kind, ...text) {
  el.hidden = false;
  el.className = `banner${kind ? ` ${kind}` : ''}`;
  el.setAttribute('role', kind === 'error' ? 'alert' : 'status');
  replace(el, ...text);
}

// copyButton copies text() to the clipboard, or, where the browser will
// not (no secure context, no focus), selects it in fallback for Ctrl+C.
export function copyButton(label, text, { id, fallback } = {}) {
  const b = h('button', { type: 'button', class: 'ghost copy', id, onclick: async () => {
    const t = typeof text === 'function' ? await text() : text;
    try {
      await navigator.clipboard.writeText(t);
      b.textContent = 'Copied';
    } catch {
      if (fallback) { fallback.focus(); fallback.select(); }
      b.textContent = 'Select and copy';
    }
    setTimeout(() => { b.textContent = label; }, 2500);
  } }, label);
  return b;
}

// tabs makes a tab bar; select(name) shows one panel. onShow(name) runs
// when a tab is shown.
export function tabs(names, { onShow, initial } = {}) {
  const bar = h('div', { class: 'tabs', role: 'tablist' });
  const panels = new Map();
  const buttons = new Map();
  let current = '';
  for (const [name, label] of names) {
    const b = h('button', { type: 'button', role: 'tab', class: 'tab', id: `tab-${name}`, 'aria-controls': `panel-${name}`,
      onclick: () => select(name) }, label);
    buttons.set(name, b);
    bar.append(b);
    panels.set(name, h('section', { class: 'panel', id: `panel-${name}`, role: 'tabpanel', 'aria-labelledby': `tab-${name}`, hidden: true }));
  }
  function select(name) {
    if (!panels.has(name)) name = names[0][0];
    current = name;
    for (const [n, p] of panels) {
      p.hidden = n !== name;
      buttons.get(n).setAttribute('aria-selected', String(n === name));
    }
    if (onShow) onShow(name, panels.get(name));
  }
  return { bar, panels, select, buttons, get current() { return current; }, initial };
}

// kv is a definition list of [label, value] rows, skipping empty values.
export function kv(rows, cls = 'kv') {
  return h('dl', { class: cls }, rows.filter(([, v]) => v !== undefined && v !== null && v !== '' && v !== false)
    .map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
}

export function shortHash(s, n = 12) { return s ? s.slice(0, n) : ''; }

export function bytes(n) {
  if (n === undefined || n === null) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1 << 20)).toFixed(1)} MiB`;
}
