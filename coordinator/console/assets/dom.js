// dom.js: a few helpers to build elements from nodes, never from markup (no string
// markup ever reaches the DOM: the CSP and escaping both rely on it).

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (v === true) el.setAttribute(k, '');
      else el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

// relTime says how long ago (or until) an instant is, in words a person reads.
export function relTime(iso, now = Date.now()) {
  if (!iso) return '';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  let s = Math.round((now - t) / 1000);
  const future = s < 0;
  s = Math.abs(s);
  let out;
  if (s < 45) out = `${s}s`;
  else if (s < 3600) out = `${Math.round(s / 60)}m`;
  else if (s < 86400) out = `${Math.round(s / 3600)}h`;
  else out = `${Math.round(s / 86400)}d`;
  return future ? `in ${out}` : `${out} ago`;
}

export function localTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

// TOOLS are the tools in the order the console offers them, with their names.
export const TOOLS = [['claude', 'Claude Code'], ['codex', 'Codex'], ['gemini', 'Gemini CLI'], ['opencode', 'OpenCode'], ['grok', 'Grok']];
export const TOOL = Object.fromEntries(TOOLS);
export const toolName = (d) => TOOL[d] || d;

// runName is a run's name everywhere in the console: the one it was given,
// else its tool and its run ref, as the CLI names it (issue 32 finding 14:
// a conversation id's prefix is the same for two Codex runs minutes apart).
export function runName(r) {
  return r.name || `${toolName(r.driver)} ${r.run_ref}`;
}
