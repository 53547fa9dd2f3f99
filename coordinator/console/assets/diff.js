// diff.js: the Diff tab (R-DIFF-*). A worktree run's committed work: the
// files its branch changed since it left the workspace's commit, and one
// file's change rendered from GET diff/file (the texts at base and head) as
// a unified or side-by-side diff. Beside it, for every run, the edits its
// folder holds that are not committed yet, from git's own patch
// (GET diff/uncommitted, R-DIFF-10).
import { h, replace } from './dom.js';
import { get, BASE } from './api.js';
import { errorLine, shortHash } from './ui.js';

const MAX_D = 1500; // beyond this many edits a file is shown as replaced whole

function lines(s) {
  if (!s) return [];
  const out = s.split('\n');
  if (out[out.length - 1] === '') out.pop();
  return out;
}

// lineDiff is Myers' diff of two texts by line: a list of
// {t: ' ' | '-' | '+', a, b, text} with 1-based line numbers (a for the
// original side, b for the modified one, 0 where the line has none).
export function lineDiff(before, after) {
  const A = lines(before);
  const B = lines(after);
  let pre = 0;
  while (pre < A.length && pre < B.length && A[pre] === B[pre]) pre++;
  let ea = A.length;
  let eb = B.length;
  while (ea > pre && eb > pre && A[ea - 1] === B[eb - 1]) { ea--; eb--; }
  const mid = myers(A.slice(pre, ea), B.slice(pre, eb));
  const ops = [];
  for (let i = 0; i < pre; i++) ops.push({ t: ' ', a: i + 1, b: i + 1, text: A[i] });
  for (const [t, x, y] of mid) {
    if (t === ' ') ops.push({ t, a: pre + x + 1, b: pre + y + 1, text: A[pre + x] });
    else if (t === '-') ops.push({ t, a: pre + x + 1, b: 0, text: A[pre + x] });
    else ops.push({ t, a: 0, b: pre + y + 1, text: B[pre + y] });
  }
  for (let i = ea; i < A.length; i++) ops.push({ t: ' ', a: i + 1, b: eb + (i - ea) + 1, text: A[i] });
  return ops;
}

function myers(a, b) {
  const n = a.length;
  const m = b.length;
  if (!n || !m) return [...a.map((_, i) => ['-', i, 0]), ...b.map((_, j) => ['+', 0, j])];
  const max = Math.min(n + m, MAX_D);
  const off = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace = [];
  for (let d = 0; d <= max; d++) {
    trace.push(v.slice(off - d - 1, off + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let x = (k === -d || (k !== d && v[off + k - 1] < v[off + k + 1])) ? v[off + k + 1] : v[off + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) { x++; y++; }
      v[off + k] = x;
      if (x >= n && y >= m) return backtrack(trace, n, m);
    }
  }
  // Too many edits to align: the whole range replaced.
  return [...a.map((_, i) => ['-', i, 0]), ...b.map((_, j) => ['+', 0, j])];
}

function backtrack(trace, n, m) {
  const ops = [];
  let x = n;
  let y = m;
  for (let d = trace.length - 1; d > 0; d--) {
    const w = trace[d]; // v after step d-1, k from -d-1 to d+1
    const at = (k) => w[k + d + 1];
    const k = x - y;
    const pk = (k === -d || (k !== d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1;
    const px = at(pk);
    const py = px - pk;
    while (x > px && y > py) { ops.push([' ', x - 1, y - 1]); x--; y--; }
    if (pk === k + 1) { ops.push(['+', x, y - 1]); y--; } else { ops.push(['-', x - 1, y]); x--; }
    x = px; y = py;
  }
  while (x > 0 && y > 0) { ops.push([' ', x - 1, y - 1]); x--; y--; }
  return ops.reverse();
}

// hunks groups ops into runs of changes with ctx lines of context.
export function hunks(ops, ctx = 3) {
  const out = [];
  let cur = null;
  let lastChange = -Infinity;
  ops.forEach((o, i) => {
    if (o.t !== ' ') {
      if (!cur || i - lastChange > 2 * ctx) {
        cur = { ops: [] };
        out.push(cur);
        for (let j = Math.max(0, i - ctx, lastChange + ctx + 1); j < i; j++) cur.ops.push(ops[j]);
      } else {
        for (let j = lastChange + 1; j < i; j++) cur.ops.push(ops[j]);
      }
      cur.ops.push(o);
      lastChange = i;
    }
  });
  for (const hk of out) {
    const last = ops.indexOf(hk.ops[hk.ops.length - 1]);
    for (let j = last + 1; j < Math.min(ops.length, last + 1 + ctx); j++) hk.ops.push(ops[j]);
    const first = hk.ops[0];
    hk.a = first.a || (hk.ops.find((o) => o.a) || {}).a || 0;
    hk.b = first.b || (hk.ops.find((o) => o.b) || {}).b || 0;
  }
  return out;
}

function unified(ops) {
  const hs = hunks(ops);
  if (!hs.length) return h('p', { class: 'muted' }, 'The two texts are the same.');
  return h('table', { class: 'diff unified' }, h('colgroup', null, h('col', { class: 'ln' }), h('col', { class: 'ln' }), h('col')), h('tbody', null, hs.map((hk) => [
    h('tr', { class: 'hunk' }, h('td', { colspan: 3 }, `@@ -${hk.a} +${hk.b} @@`)),
    hk.ops.map((o) => h('tr', { class: o.t === '+' ? 'add' : o.t === '-' ? 'del' : 'ctx' },
      h('td', { class: 'ln' }, o.a || ''), h('td', { class: 'ln' }, o.b || ''),
      h('td', { class: 'code' }, h('span', { class: 'sign' }, o.t), o.text))),
  ])));
}

function sideBySide(ops) {
  const hs = hunks(ops);
  if (!hs.length) return h('p', { class: 'muted' }, 'The two texts are the same.');
  const rows = [];
  for (const hk of hs) {
    rows.push(h('tr', { class: 'hunk' }, h('td', { colspan: 4 }, `@@ -${hk.a} +${hk.b} @@`)));
    const o = hk.ops;
    for (let i = 0; i < o.length;) {
      if (o[i].t === ' ') {
        rows.push(h('tr', { class: 'ctx' }, h('td', { class: 'ln' }, o[i].a), h('td', { class: 'code' }, o[i].text), h('td', { class: 'ln' }, o[i].b), h('td', { class: 'code' }, o[i].text)));
        i++;
        continue;
      }
      const dels = [];
      const adds = [];
      while (i < o.length && o[i].t === '-') dels.push(o[i++]);
      while (i < o.length && o[i].t === '+') adds.push(o[i++]);
      for (let j = 0; j < Math.max(dels.length, adds.length); j++) {
        const d = dels[j];
        const a = adds[j];
        rows.push(h('tr', null,
          h('td', { class: 'ln' }, d ? d.a : ''), h('td', { class: `code${d ? ' del' : ' none'}` }, d ? d.text : ''),
          h('td', { class: 'ln' }, a ? a.b : ''), h('td', { class: `code${a ? ' add' : ' none'}` }, a ? a.text : '')));
      }
    }
  }
  return h('table', { class: 'diff split' }, h('colgroup', null, h('col', { class: 'ln' }), h('col'), h('col', { class: 'ln' }), h('col')), h('tbody', null, rows));
}

// patchFiles splits git's unified diff into one entry per file: its path,
// whether git called it binary, and its lines as ops with line numbers.
export function patchFiles(patch) {
  const out = [];
  let cur = null;
  let a = 0;
  let b = 0;
  for (const l of patch.split('\n')) {
    if (l.startsWith('diff --git ')) {
      const hp = l.slice(11); // "a/P b/P": no rename is asked for
      cur = { path: hp.slice((hp.length + 1) / 2 + 2), binary: false, ops: [] };
      out.push(cur);
      continue;
    }
    if (!cur) continue;
    const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(l);
    if (m) {
      a = +m[1]; b = +m[2];
      cur.ops.push({ t: '@', text: l });
    } else if (!cur.ops.length) {
      if (l.startsWith('+++ b/')) cur.path = l.slice(6);
      else if (l.startsWith('Binary files ')) cur.binary = true;
    } else if (l.startsWith('+')) cur.ops.push({ t: '+', a: 0, b: b++, text: l.slice(1) });
    else if (l.startsWith('-')) cur.ops.push({ t: '-', a: a++, b: 0, text: l.slice(1) });
    else if (l.startsWith(' ')) cur.ops.push({ t: ' ', a: a++, b: b++, text: l.slice(1) });
  }
  return out;
}

function patchTable(ops) {
  return h('table', { class: 'diff unified' }, h('colgroup', null, h('col', { class: 'ln' }), h('col', { class: 'ln' }), h('col')), h('tbody', null, ops.map((o) => (o.t === '@' ?
    h('tr', { class: 'hunk' }, h('td', { colspan: 3 }, o.text)) :
    h('tr', { class: o.t === '+' ? 'add' : o.t === '-' ? 'del' : 'ctx' },
      h('td', { class: 'ln' }, o.a || ''), h('td', { class: 'ln' }, o.b || ''),
      h('td', { class: 'code' }, h('span', { class: 'sign' }, o.t), o.text))))));
}

// uncommittedView renders GET diff/uncommitted: the changed paths and
// git's patch of them, or the too-large state with the paths alone.
function uncommittedView(u, where) {
  const n = u.files.length;
  const head = h('p', { class: 'meta' },
    h('span', null, `${n} path${n === 1 ? '' : 's'} with edits not committed in ${where}, against `, h('code', { title: u.head }, shortHash(u.head))),
    u.truncated ? h('span', { class: 'badge warn' }, 'more than 200 paths: the list is cut') : null);
  if (!n) return [head, h('p', { class: 'muted', id: 'uncommitted-none' }, `Nothing uncommitted: every file in ${where} matches its last commit.`)];
  if (u.too_large) {
    return [head, h('p', { class: 'banner warn', id: 'uncommitted-too-large' },
      `These edits are too large to show here (over ${Math.round(u.patch_limit / 1024)} KiB of diff, or a new file over 16 MiB); the changed paths are listed below.`),
    h('ul', { class: 'files' }, u.files.map((f) => h('li', { class: `file st-${f.status}`, dataset: { path: f.path } }, h('span', { class: `fstatus s-${f.status}` }, STATUS[f.status] || f.status), ' ', f.path)))];
  }
  const status = new Map(u.files.map((f) => [f.path, f.status]));
  return [head, patchFiles(u.patch).map((f) => h('section', { class: 'wfile', dataset: { path: f.path } },
    h('h3', null, h('span', { class: `fstatus s-${status.get(f.path) || 'modified'}` }, STATUS[status.get(f.path)] || 'modified'), ' ', f.path),
    f.binary ? h('p', { class: 'banner', dataset: { binary: f.path } }, 'Binary file: its content is not text, so no line diff is shown.') : patchTable(f.ops)))];
}

const STATUS = { added: 'added', modified: 'modified', deleted: 'deleted', renamed: 'renamed', type_changed: 'type changed' };

export function diffPanel(el, run) {
  const path = (p) => `${BASE}/runs/${encodeURIComponent(run.run_ref)}/${p}`;
  let mode = localStorage.getItem('olivares.diffmode') || 'unified';
  let open = '';
  let last = null; // the file shown: {path, data}
  const head = h('div', { class: 'diff-head' });
  const files = h('ul', { class: 'files', id: 'diff-files' });
  const view = h('div', { class: 'file-view', id: 'diff-view' });
  const modeSel = h('select', { id: 'diff-mode', 'aria-label': 'Diff layout', onchange: (e) => { mode = e.target.value; localStorage.setItem('olivares.diffmode', mode); if (last) renderFile(last); } },
    h('option', { value: 'unified', selected: mode === 'unified' }, 'Unified'), h('option', { value: 'split', selected: mode === 'split' }, 'Side by side'));
  const where = run.worktree_branch ? 'the worktree' : 'the workspace';
  const work = h('div', { class: 'diff-uncommitted', id: 'diff-uncommitted' }, h('p', { class: 'muted' }, 'Loading…'));
  replace(el,
    h('h2', { id: 'diff-uncommitted-title' }, `Not committed yet, in ${where}`), work,
    h('h2', { id: 'diff-committed' }, 'Committed on the branch'),
    head, run.worktree_branch ? h('div', { class: 'diff-body' }, files, h('div', { class: 'diff-file' }, h('div', { class: 'view-bar' }, modeSel), view)) : null);

  async function loadWork() {
    try {
      replace(work, uncommittedView(await get(path('diff/uncommitted')), where));
    } catch (e) {
      replace(work, errorLine(e));
    }
  }

  async function load() {
    loadWork();
    if (!run.worktree_branch) {
      replace(head, h('p', { class: 'muted' }, 'This run has no worktree: it works in the workspace itself, so there is no branch to compare.'));
      return;
    }
    try {
      const d = await get(path('diff'));
      replace(head, h('p', { class: 'meta' },
        h('span', null, 'branch ', h('code', null, d.branch)),
        h('span', { title: `${d.base}..${d.head}` }, 'from ', h('code', null, shortHash(d.base)), ' to ', h('code', null, shortHash(d.head))),
        h('span', null, `${d.files.length} file${d.files.length === 1 ? '' : 's'} changed`),
        d.truncated ? h('span', { class: 'badge warn', id: 'diff-truncated' }, 'more than 200 paths: the list is cut') : null));
      replace(files, d.files.length ? d.files.map((f) => h('li', { class: `file st-${f.status}`, dataset: { path: f.path } },
        h('button', { type: 'button', class: 'ghost', onclick: () => show(f.path) },
          h('span', { class: `fstatus s-${f.status}` }, STATUS[f.status] || f.status), ' ', f.old_path ? `${f.old_path} → ${f.path}` : f.path))) :
        h('li', { class: 'muted' }, 'No committed change on the branch yet.'));
      if (open && d.files.some((f) => f.path === open)) show(open);
    } catch (e) {
      replace(head, errorLine(e));
    }
  }

  async function show(p) {
    open = p;
    for (const li of files.children) li.classList.toggle('open', li.dataset.path === p);
    replace(view, h('p', { class: 'muted' }, 'Loading…'));
    try {
      const data = await get(`${path('diff/file')}?path=${encodeURIComponent(p)}`);
      last = { path: p, data };
      renderFile(last);
    } catch (e) {
      last = null;
      replace(view, h('h3', null, p), e.status === 413 ? h('p', { class: 'banner warn', id: 'diff-too-large' }, `This file is larger than 16 MiB at one end of the diff, so it is not shown. ${e.message}`) : errorLine(e));
    }
  }

  function renderFile({ path: p, data }) {
    const notes = [];
    if (data.binary) notes.push(h('p', { class: 'banner', id: 'diff-binary' }, 'Binary file: its content is not text, so no line diff is shown.'));
    if (data.original_truncated || data.modified_truncated) {
      notes.push(h('p', { class: 'banner warn', id: 'diff-file-truncated' },
        `Only the first part of the file is shown (${[data.original_truncated ? 'before' : '', data.modified_truncated ? 'after' : ''].filter(Boolean).join(' and ')} cut at the workspace's read limit): the diff below covers that part.`));
    }
    const ops = data.binary ? [] : lineDiff(data.original, data.modified);
    const add = ops.filter((o) => o.t === '+').length;
    const del = ops.filter((o) => o.t === '-').length;
    replace(view, h('h3', null, p, data.binary ? null : h('span', { class: 'muted' }, ` +${add} −${del}`)), notes,
      data.binary ? null : (mode === 'split' ? sideBySide(ops) : unified(ops)));
  }

  load();
  return { refresh: load, destroy() {} };
}
