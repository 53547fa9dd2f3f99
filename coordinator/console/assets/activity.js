// activity.js: the Activity tab (R-ACT-*): what the run is doing, read on
// its node from the tool's own transcript: the context meter, sub-agents
// (their turns open on click, R-AGT-*), commands and background work with
// workflow phases (R-WF-*), todos, files touched, skills, MCP servers,
// compactions and the transcript's state. It refreshes when a turn ends
// (seen on the attach stream), never on a fast timer.
import { h, replace, relTime, localTime } from './dom.js';
import { get, BASE } from './api.js';
import { errorLine } from './ui.js';

const TRANSCRIPT = {
  read: 'read from the tool\u2019s transcript',
  pending: 'not written yet: the tool writes its transcript once the first turn starts',
  missing: 'missing: the transcript should exist on the node and does not',
};

function n(x) { return Number(x).toLocaleString('en-US'); }

// meter is R-ACT-7: a percentage when the window is known, the tokens with
// "window unknown" when it is not.
export function meter(a) {
  if (a.context_percent !== null && a.context_percent !== undefined) {
    const pct = Math.min(100, Math.max(0, a.context_percent));
    const fill = h('div', { class: `meter-fill${pct >= 80 ? ' high' : ''}` });
    fill.style.width = `${pct}%`; // CSSOM, which the CSP allows (no style attribute)
    return h('div', { class: 'meter', id: 'context-meter', role: 'meter', 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': pct, 'aria-label': 'Context used' },
      h('div', { class: 'meter-bar' }, fill),
      h('span', { class: 'meter-text' }, `${a.context_percent.toFixed(1)} % of the context window`),
      h('span', { class: 'muted' }, ` (${n(a.context_tokens)} of ${n(a.context_window)} tokens)`));
  }
  if (a.context_tokens !== null && a.context_tokens !== undefined) {
    return h('div', { class: 'meter unknown', id: 'context-meter' }, h('span', { class: 'meter-text' }, `${n(a.context_tokens)} tokens, window unknown`),
      h('span', { class: 'muted' }, ' (the tool has not reported its context window for this model)'));
  }
  return h('div', { class: 'meter none', id: 'context-meter' }, h('span', { class: 'muted' }, 'No turn has reported its tokens yet: the context meter appears after the first that does.'));
}

function stateBadge(s) { return h('span', { class: `state a-${s}` }, s); }

export function activityPanel(el, run) {
  const ref = run.run_ref;
  const open = new Map(); // agent id → turns element
  let loading = false;
  let again = false;
  const stamp = h('p', { class: 'muted stamp' });
  const body = h('div', { class: 'activity', id: 'activity' });
  replace(el, h('div', { class: 'view-bar' }, stamp, h('button', { type: 'button', class: 'ghost', id: 'activity-refresh', onclick: () => refresh() }, 'Refresh')), body);

  async function refresh() {
    if (loading) { again = true; return; }
    loading = true;
    try {
      const a = await get(`${BASE}/runs/${encodeURIComponent(ref)}/activity`);
      render(a);
      stamp.textContent = `Read ${new Date().toLocaleTimeString()}`;
    } catch (e) {
      replace(body, errorLine(e, { id: 'activity-error' }));
    } finally {
      loading = false;
      if (again) { again = false; refresh(); }
    }
  }

  function section(id, title, count, content) {
    return h('section', { class: 'act-section', id }, h('h3', null, title, count !== undefined ? h('span', { class: 'count' }, String(count)) : null), content);
  }

  function render(a) {
    const omitted = (k, what) => (a[k] ? h('p', { class: 'muted' }, `${a[k]} older finished ${what} not listed`) : null);
    replace(body,
      h('div', { class: 'act-top' },
        meter(a),
        h('p', { class: 'meta' },
          h('span', { id: 'act-model' }, a.model ? `model ${a.model}` : 'model not reported yet'),
          h('span', { id: 'act-transcript', class: `t-${a.transcript}` }, `transcript ${TRANSCRIPT[a.transcript] || a.transcript}`),
          h('span', { id: 'act-compactions' }, `${a.compactions} compaction${a.compactions === 1 ? '' : 's'}`),
          a.unreadable ? h('span', { class: 'badge warn', id: 'act-unreadable' }, `${a.unreadable} record${a.unreadable === 1 ? '' : 's'} could not be read`) : null)),
      section('act-agents', 'Agents', a.agents.length, [
        a.agents.length ? h('ul', { class: 'act-list' }, a.agents.map(agentRow)) : h('p', { class: 'muted' }, 'No sub-agent.'),
        omitted('agents_omitted', 'agents')]),
      section('act-tasks', 'Commands and background work', a.tasks.length, [
        a.tasks.length ? h('ul', { class: 'act-list' }, a.tasks.map(taskRow)) : h('p', { class: 'muted' }, 'No command yet.'),
        omitted('tasks_omitted', 'tasks')]),
      section('act-todos', 'Todos', a.todos.length, a.todos.length ? h('ul', { class: 'todos' }, a.todos.map((t) => h('li', { class: `todo td-${t.status}` },
        h('span', { class: 'tick', 'aria-hidden': 'true' }, t.status === 'completed' ? '✓' : t.status === 'in_progress' ? '▸' : '○'), ' ',
        t.status === 'in_progress' && t.active_form ? t.active_form : t.content, h('span', { class: 'muted' }, ` ${t.status.replace('_', ' ')}`)))) : h('p', { class: 'muted' }, 'No todo list.')),
      section('act-files', 'Files', a.files.length, [
        a.files.length ? h('ul', { class: 'act-list files-touched' }, a.files.map((f) => h('li', null, h('code', null, f.path), ' ',
          h('span', { class: 'added' }, `+${f.added}`), ' ', h('span', { class: 'removed' }, `−${f.removed}`), f.created ? h('span', { class: 'badge' }, 'created') : null))) :
          h('p', { class: 'muted' }, 'No file touched.'),
        omitted('files_omitted', 'files')]),
      h('div', { class: 'act-pair' },
        section('act-skills', 'Skills', a.skills.length, a.skills.length ? h('ul', { class: 'chips' }, a.skills.map((s) => h('li', null, `${s.name} ×${s.uses}`))) : h('p', { class: 'muted' }, 'None used.')),
        section('act-mcp', 'MCP servers', a.mcp_servers.length, a.mcp_servers.length ? h('ul', { class: 'chips' }, a.mcp_servers.map((s) => h('li', null, s.name,
          s.status ? ` (${s.status})` : '', s.calls ? ` · ${s.calls} call${s.calls === 1 ? '' : 's'}` : ''))) : h('p', { class: 'muted' }, 'None.'))));
  }

  function when(x) {
    const t = x.ended_at || x.started_at;
    return t ? h('time', { datetime: t, title: localTime(t) }, relTime(t)) : null;
  }

  function agentRow(ag) {
    const li = h('li', { class: 'agent', dataset: { agent: ag.id } });
    const btn = h('button', { type: 'button', class: 'ghost agent-open', 'aria-expanded': String(open.has(ag.id)), onclick: () => toggle(ag, li, btn) },
      stateBadge(ag.state), ' ', h('strong', null, ag.name || ag.type || 'agent'), ag.description ? ` — ${ag.description}` : '');
    li.append(btn, h('span', { class: 'muted' }, ag.background ? ' background' : '', ag.workflow ? ` · workflow ${ag.workflow}${ag.phase ? ` phase ${ag.phase}` : ''}` : '', ' '), when(ag));
    if (open.has(ag.id)) li.append(open.get(ag.id));
    return li;
  }

  async function toggle(ag, li, btn) {
    if (open.has(ag.id)) {
      open.get(ag.id).remove();
      open.delete(ag.id);
      btn.setAttribute('aria-expanded', 'false');
      return;
    }
    const box = h('div', { class: 'agent-turns' }, h('p', { class: 'muted' }, 'Loading the agent\u2019s turns…'));
    open.set(ag.id, box);
    li.append(box);
    btn.setAttribute('aria-expanded', 'true');
    try {
      const t = await get(`${BASE}/runs/${encodeURIComponent(ref)}/activity/agents/${encodeURIComponent(ag.id)}`);
      replace(box, t.turns.length ? t.turns.map((x) => h('div', { class: `turn r-${x.role}` }, h('div', { class: 'who' }, x.role), h('div', { class: 'text' }, x.text))) :
        h('p', { class: 'muted' }, 'No turn recorded.'));
    } catch (e) {
      replace(box, errorLine(e));
    }
  }

  function taskRow(t) {
    const li = h('li', { class: `task k-${t.kind}` }, stateBadge(t.state), ' ',
      h('span', { class: 'kind' }, t.kind.replace('_', ' ')), ' ',
      t.command ? h('code', null, t.command) : null, t.description ? h('span', null, ` ${t.description}`) : null,
      t.exit_code !== undefined && t.exit_code !== null ? h('span', { class: 'muted' }, ` exit ${t.exit_code}`) : null,
      t.agent ? h('span', { class: 'muted' }, ` by ${t.agent}`) : null, ' ', when(t));
    if (t.workflow) li.append(workflow(t.workflow));
    return li;
  }

  function workflow(w) {
    const counters = (x) => `${x.agents_done}/${x.agents_total} done${x.agents_failed ? `, ${x.agents_failed} failed` : ''}`;
    return h('div', { class: 'workflow' },
      h('p', null, h('strong', null, w.name || w.run_id), ` · ${counters(w)}`, w.duration_ms ? ` · ${(w.duration_ms / 1000).toFixed(1)} s` : ''),
      w.phases.length ? h('ol', { class: 'phases' }, w.phases.map((p) => h('li', { class: `phase ph-${p.state}` },
        stateBadge(p.state), ' ', h('strong', null, p.title), p.detail ? ` — ${p.detail}` : '', h('span', { class: 'muted' }, ` ${counters(p)}`)))) : null);
  }

  refresh();
  return { refresh, destroy() {} };
}
