// tools.js: how an opened tool call reads (R-CON-9). The common tools of
// Claude Code and Codex get a body of their own: a command and its
// output, an edit as a diff, a file read as its path and line range, a
// todo list as a list; any other tool shows its arguments and result.
// The raw arguments stay a click away.
import { h } from './dom.js';

const CAP = 20000;
const cap = (s) => (s.length > CAP ? `${s.slice(0, CAP)}\n… (${s.length - CAP} more characters in the raw frames)` : s);

function args(it) {
  try {
    const o = JSON.parse(it.input || '');
    return o && typeof o === 'object' ? o : null;
  } catch { return null; }
}

// diffLines shows old and new text as removed and added lines.
function diffLines(oldText, newText) {
  const rows = [];
  for (const l of String(oldText || '').split('\n')) if (oldText) rows.push(h('div', { class: 'dl del' }, `- ${l}`));
  for (const l of String(newText || '').split('\n')) if (newText) rows.push(h('div', { class: 'dl add' }, `+ ${l}`));
  return h('div', { class: 'tdiff' }, rows.slice(0, 400), rows.length > 400 ? h('div', { class: 'muted' }, `… ${rows.length - 400} more lines`) : null);
}

function path(p) { return h('code', { class: 'tpath' }, p); }

const TODO = { completed: '✓', in_progress: '▸', pending: '·' };

// toolBody is the opened call's content.
export function toolBody(it) {
  const a = args(it);
  const out = it.result ? h('pre', { class: 'tout' }, cap(it.result)) : null;
  const raw = it.input ? h('details', { class: 'traw' }, h('summary', null, 'Raw arguments'), h('pre', { class: 'tin' }, cap(it.input))) : null;
  const name = it.name || '';
  if (name === 'command' || (name === 'Bash' && a && a.command)) {
    const cmd = name === 'command' ? it.input : a.command;
    return [h('pre', { class: 'tcmd' }, `$ ${cmd}`), a && a.description ? h('div', { class: 'muted' }, a.description) : null, out, name === 'Bash' ? raw : null];
  }
  if (a && (name === 'Edit' || name === 'MultiEdit') && a.file_path) {
    const edits = name === 'MultiEdit' && Array.isArray(a.edits) ? a.edits : [a];
    return [path(a.file_path), edits.map((e) => diffLines(e.old_string, e.new_string)), out, raw];
  }
  if (a && name === 'Write' && a.file_path) {
    return [path(a.file_path), diffLines('', a.content), out, raw];
  }
  if (a && name === 'Read' && a.file_path) {
    const from = a.offset || 1;
    const range = a.offset || a.limit ? ` lines ${from}–${a.limit ? from + a.limit - 1 : 'end'}` : '';
    return [h('div', null, path(a.file_path), range), out, raw];
  }
  if (a && name === 'TodoWrite' && Array.isArray(a.todos)) {
    return [h('ul', { class: 'todos' }, a.todos.map((t) => h('li', { class: `td-${t.status}` }, `${TODO[t.status] || '·'} ${t.content || t.activeForm || ''}`))), raw];
  }
  if (a && (name === 'Grep' || name === 'Glob') && a.pattern) {
    return [h('div', null, h('code', null, a.pattern), a.path ? [' in ', path(a.path)] : null), out, raw];
  }
  return [it.input ? h('pre', { class: 'tin' }, cap(it.input)) : null, out];
}
