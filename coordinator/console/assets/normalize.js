// normalize.js: turns a run's output frames (the attach stream's output
// events) into conversation items, from each tool's own protocol:
//
//   claude    Claude Code --print stream-json lines
//   codex     Codex app-server JSON-RPC (server messages have no "jsonrpc")
//   gemini, opencode, grok   the Agent Client Protocol (JSON-RPC 2.0)
//
// Items (the contract shared with testdata/frames/*.golden.jsonl):
//   {kind:'turn_start'}                            a turn began
//   {kind:'user', by, name, text}                  what a person sent (the input frames, R-ATT-11)
//   {kind:'user', text}                            a user message the tool shows that no input frame holds
//   {kind:'assistant', id, text}                   assistant text (grows while it streams)
//   {kind:'thinking', id, text}                    the model's reasoning, when the tool shows it
//   {kind:'tool_call', id, name, input, result, status}  status: running | done | error
//   {kind:'turn_end', status, detail?}             status: completed | interrupted | failed
//   {kind:'error', text}                           the tool's errors and refusals
//   {kind:'system', text}                          session facts and warnings
//   {kind:'output', text}                          a stdout line that is not the protocol
// Stderr is not part of the conversation: feed returns it separately.
//
// The module touches no DOM, so the same code runs in the golden test.
// shared/conversation is its Go twin (the CLI's session attach): a change
// here is made there too, and both are checked against the same goldens.

const INTERRUPTED = '[Request interrupted by user]';

export function normalizer(driver) {
  const n = new Normalizer(driver);
  return n;
}

class Normalizer {
  constructor(driver) {
    this.driver = driver;
    this.items = [];
    this.byKey = new Map();   // tool call / message id → item index
    this.partial = '';        // stdout bytes after the last newline
    this.gen = 0;
    this.changed = new Set();
    this.stderr = [];
    this.openText = -1;       // index of the assistant item still streaming
    this.openThought = -1;
    this.inTurn = false;
    this.turnError = false;
    this.sent = [];           // texts of input frames the tool has not echoed yet
  }

  // feed takes one output event's data ({seq, generation, stream, data,
  // encoding}) and returns {changed: [item indexes], stderr: [text],
  // setup: [text]}.
  feed(o) {
    this.changed = new Set();
    this.stderr = [];
    this.setup = [];
    let data = o.data;
    if (o.encoding === 'base64') {
      try { data = new TextDecoder().decode(Uint8Array.from(atob(data), (c) => c.charCodeAt(0))); } catch { data = ''; }
    }
    if (o.generation !== this.gen) {
      // A new process: what the old one left unterminated is flushed.
      if (this.partial) this.line(this.partial, o.seq);
      this.partial = '';
      this.gen = o.generation;
      this.openText = this.openThought = -1;
      this.inTurn = false;
    }
    if (o.stream === 'stderr') {
      this.stderr.push(data);
    } else if (o.stream === 'setup') {
      // The setup command's output, before the tool (R-SETUP-2).
      this.setup.push(data);
    } else if (o.stream === 'input') {
      this.input(data, o.seq);
    } else {
      let buf = this.partial + data;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim() !== '') this.line(line, o.seq);
      }
      this.partial = buf;
    }
    return { changed: [...this.changed].sort((a, b) => a - b), stderr: this.stderr, setup: this.setup };
  }

  add(item, seq) {
    item.seq = seq;
    this.items.push(item);
    const i = this.items.length - 1;
    this.changed.add(i);
    return i;
  }

  touch(i) { this.changed.add(i); }

  // input is one input frame (R-ATT-11): what a person sent, in order,
  // with who sent it. The tools that echo a person's message (Codex) do
  // so later: echo() drops that copy.
  input(data, seq) {
    let f;
    try { f = JSON.parse(data); } catch { return; }
    if (!f || typeof f.text !== 'string') return;
    const it = { kind: 'user', by: f.by || '', name: f.name || '', text: f.text };
    if (f.clipped) it.clipped = true;
    this.add(it, seq);
    this.sent.push(f.text);
    if (this.sent.length > 64) this.sent.shift();
  }

  // echo adds a user message the tool shows, unless an input frame
  // already holds it.
  echo(item, seq) {
    const k = this.sent.indexOf(item.text);
    if (k >= 0) { this.sent.splice(0, k + 1); return; }
    this.add(item, seq);
  }

  line(line, seq) {
    let m;
    try { m = JSON.parse(line); } catch { m = undefined; }
    if (m === undefined || m === null || typeof m !== 'object') {
      this.add({ kind: 'output', text: line }, seq);
      return;
    }
    switch (this.driver) {
      case 'claude': this.claude(m, seq); break;
      case 'codex': this.codex(m, seq); break;
      default: this.acp(m, seq);
    }
  }

  turnStart(seq) {
    if (this.inTurn) return;
    this.inTurn = true;
    this.turnError = false;
    this.openText = this.openThought = -1;
    this.add({ kind: 'turn_start' }, seq);
  }

  turnEnd(status, detail, seq) {
    if (!this.inTurn) this.turnStart(seq);
    this.inTurn = false;
    this.openText = this.openThought = -1;
    const it = { kind: 'turn_end', status };
    if (detail) it.detail = detail;
    this.add(it, seq);
  }

  error(text, seq) {
    this.turnError = true;
    this.add({ kind: 'error', text: String(text) }, seq);
  }

  appendText(kind, key, text, seq) {
    const open = kind === 'thinking' ? 'openThought' : 'openText';
    let i = key !== undefined && key !== null ? this.byKey.get(`${kind}:${key}`) : undefined;
    if (i === undefined && (key === undefined || key === null) && this[open] >= 0) i = this[open];
    if (i === undefined) {
      i = this.add({ kind, id: key ?? '', text: '' }, seq);
      if (key !== undefined && key !== null) this.byKey.set(`${kind}:${key}`, i);
    }
    this.items[i].text += text;
    this[open] = i;
    this.touch(i);
    return i;
  }

  setText(kind, key, text, seq) {
    let i = this.byKey.get(`${kind}:${key}`);
    if (i === undefined) {
      i = this.add({ kind, id: key, text }, seq);
      this.byKey.set(`${kind}:${key}`, i);
    } else {
      this.items[i].text = text;
      this.touch(i);
    }
    return i;
  }

  tool(id, fields, seq) {
    let i = this.byKey.get(`tool:${id}`);
    if (i === undefined) {
      i = this.add({ kind: 'tool_call', id, name: '', input: '', result: '', status: 'running' }, seq);
      this.byKey.set(`tool:${id}`, i);
    }
    const it = this.items[i];
    for (const [k, v] of Object.entries(fields)) {
      if (v === undefined) continue;
      if (k === 'appendResult') it.result += v;
      else it[k] = v;
    }
    this.touch(i);
    return i;
  }

  // --- Claude Code stream-json (real-clis.md §1) ---
  claude(m, seq) {
    switch (m.type) {
      case 'system':
        if (m.subtype === 'init') {
          this.turnStart(seq);
        }
        return;
      case 'stream_event': {
        const e = m.event || {};
        if (e.type === 'content_block_delta' && e.delta) {
          this.turnStart(seq);
          if (e.delta.type === 'text_delta') this.appendText('assistant', null, e.delta.text || '', seq);
          else if (e.delta.type === 'thinking_delta') this.appendText('thinking', null, e.delta.thinking || '', seq);
        }
        return;
      }
      case 'assistant': {
        this.turnStart(seq);
        const msg = m.message || {};
        const content = Array.isArray(msg.content) ? msg.content : [];
        if (m.error || m.is_api_error_message) {
          // An API error dressed as an assistant message: an error, once.
          const text = content.filter((b) => b.type === 'text').map((b) => b.text).join('\n');
          this.error(text || m.error, seq);
          return;
        }
        content.forEach((b, idx) => {
          if (b.type === 'text') {
            const key = `${msg.id || ''}:${idx}`;
            if (this.openText >= 0 && !this.byKey.has(`assistant:${key}`) && this.items[this.openText].id === '') {
              // the whole message after its streamed deltas
              const i = this.openText;
              this.items[i].id = key;
              this.items[i].text = b.text || '';
              this.byKey.set(`assistant:${key}`, i);
              this.touch(i);
            } else {
              this.setText('assistant', key, b.text || '', seq);
            }
            this.openText = -1;
          } else if (b.type === 'thinking') {
            this.setText('thinking', `${msg.id || ''}:${idx}`, b.thinking || '', seq);
          } else if (b.type === 'tool_use') {
            this.tool(b.id, { name: b.name || '', input: stringify(b.input) }, seq);
          }
        });
        return;
      }
      case 'user': {
        const msg = m.message || {};
        const content = typeof msg.content === 'string' ? [{ type: 'text', text: msg.content }] : (msg.content || []);
        for (const b of content) {
          if (b.type === 'tool_result') {
            this.tool(b.tool_use_id, { result: resultText(b.content), status: b.is_error ? 'error' : 'done' }, seq);
          } else if (b.type === 'text' && b.text !== INTERRUPTED) {
            this.echo({ kind: 'user', text: b.text }, seq);
          }
        }
        return;
      }
      case 'result': {
        const interrupted = m.terminal_reason === 'aborted_streaming' || m.subtype === 'error_during_execution' && !m.result;
        if (m.is_error && !interrupted && !this.turnError) this.error(m.result || (m.errors || []).join('\n') || m.terminal_reason || 'the turn failed', seq);
        const detail = {};
        if (m.duration_ms !== undefined) detail.duration_ms = m.duration_ms;
        if (m.total_cost_usd) detail.cost_usd = m.total_cost_usd;
        this.turnEnd(m.is_error ? (interrupted ? 'interrupted' : 'failed') : 'completed', Object.keys(detail).length ? detail : undefined, seq);
        return;
      }
      case 'rate_limit_event': {
        const info = m.rate_limit_info || {};
        if (info.status && info.status !== 'allowed') {
          const at = info.resetsAt ? new Date(info.resetsAt * 1000).toISOString() : '';
          this.add({ kind: 'system', text: `rate limit ${info.status}${at ? `; resets at ${at}` : ''}` }, seq);
        }
        return;
      }
      case 'control_response': {
        const r = m.response || {};
        if (r.subtype === 'error') this.error(r.error || 'control request refused', seq);
        return;
      }
      default:
    }
  }

  // --- Codex app-server (real-clis.md §2) ---
  codex(m, seq) {
    if (m.method === undefined) {
      if (m.error) this.error(m.error.message || JSON.stringify(m.error), seq);
      return;
    }
    const p = m.params || {};
    if (m.id !== undefined) {
      // A server request, such as an approval the tool asks for.
      this.add({ kind: 'system', text: `the tool asks: ${m.method}` }, seq);
      return;
    }
    switch (m.method) {
      case 'turn/started': this.turnStart(seq); return;
      case 'item/started': this.codexItem(p.item || {}, false, seq); return;
      case 'item/completed': this.codexItem(p.item || {}, true, seq); return;
      case 'item/agentMessage/delta': this.turnStart(seq); this.appendText('assistant', p.itemId, p.delta || '', seq); return;
      case 'item/reasoning/textDelta':
      case 'item/reasoning/summaryTextDelta': this.appendText('thinking', p.itemId, p.delta || '', seq); return;
      case 'item/commandExecution/outputDelta': this.tool(p.itemId, { appendResult: p.delta || '' }, seq); return;
      case 'error':
        if (p.willRetry) {
          this.add({ kind: 'system', text: (p.error && p.error.message) || 'retrying' }, seq);
        } else {
          this.error((p.error && p.error.message) || 'the turn failed', seq);
        }
        return;
      case 'warning':
      case 'configWarning':
        this.add({ kind: 'system', text: `warning: ${p.message || p.summary || JSON.stringify(p)}` }, seq);
        return;
      case 'turn/completed': {
        const t = p.turn || {};
        if (t.status === 'failed' && t.error && !this.turnError) this.error(t.error.message || 'the turn failed', seq);
        const detail = t.durationMs !== undefined && t.durationMs !== null ? { duration_ms: t.durationMs } : undefined;
        this.turnEnd(t.status === 'interrupted' ? 'interrupted' : t.status === 'failed' ? 'failed' : 'completed', detail, seq);
        return;
      }
      default:
    }
  }

  codexItem(it, done, seq) {
    this.turnStart(seq);
    switch (it.type) {
      case 'userMessage': {
        if (done) return;
        const text = (it.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
        this.echo({ kind: 'user', text }, seq);
        return;
      }
      case 'agentMessage':
        if (done) this.setText('assistant', it.id, it.text || '', seq);
        else if (!this.byKey.has(`assistant:${it.id}`)) this.setText('assistant', it.id, it.text || '', seq);
        return;
      case 'reasoning':
        if (done) {
          const text = [...(it.summary || []), ...(it.content || [])].join('\n');
          if (text) this.setText('thinking', it.id, text, seq);
        }
        return;
      case 'commandExecution':
        this.tool(it.id, {
          name: 'command', input: it.command || '',
          result: done && it.aggregatedOutput !== undefined && it.aggregatedOutput !== null ? it.aggregatedOutput : undefined,
          status: done ? (it.status === 'failed' || (it.exitCode ?? 0) !== 0 ? 'error' : 'done') : 'running',
        }, seq);
        return;
      case 'fileChange':
        this.tool(it.id, { name: 'edit', input: (it.changes || []).map((c) => `${c.kind && c.kind.type || c.kind || ''} ${c.path}`.trim()).join('\n'), status: done ? (it.status === 'failed' ? 'error' : 'done') : 'running' }, seq);
        return;
      case 'mcpToolCall':
        this.tool(it.id, { name: `${it.server || ''}/${it.tool || ''}`, input: stringify(it.arguments), result: done ? stringify(it.result ?? it.error ?? '') : undefined, status: done ? (it.error ? 'error' : 'done') : 'running' }, seq);
        return;
      default:
        if (it.type && it.id && !['plan', 'contextCompaction'].includes(it.type)) {
          this.tool(it.id, { name: it.type, input: '', status: done ? 'done' : 'running' }, seq);
        }
    }
  }

  // --- ACP: Gemini CLI, OpenCode, Grok (real-clis.md §3, §4) ---
  acp(m, seq) {
    if (m.method === undefined) {
      if (m.error) {
        this.error(m.error.message || JSON.stringify(m.error), seq);
        return;
      }
      const r = m.result;
      if (r && typeof r === 'object' && typeof r.stopReason === 'string') {
        switch (r.stopReason) {
          case 'cancelled': this.turnEnd('interrupted', undefined, seq); return;
          case 'refusal':
            this.error('the model refused to answer', seq);
            this.turnEnd('failed', undefined, seq);
            return;
          case 'end_turn': this.turnEnd('completed', undefined, seq); return;
          default: this.turnEnd('completed', { stop_reason: r.stopReason }, seq);
        }
      }
      return;
    }
    if (m.id !== undefined) {
      this.add({ kind: 'system', text: `the tool asks: ${m.method}` }, seq);
      return;
    }
    if (m.method !== 'session/update') return;
    const u = (m.params && m.params.update) || {};
    const c = u.content || {};
    switch (u.sessionUpdate) {
      case 'agent_message_chunk':
        this.turnStart(seq);
        if (c.type === 'text') this.appendText('assistant', u.messageId, c.text || '', seq);
        return;
      case 'agent_thought_chunk':
        this.turnStart(seq);
        if (c.type === 'text') this.appendText('thinking', u.messageId, c.text || '', seq);
        return;
      case 'user_message_chunk':
        if (c.type === 'text') {
          const last = this.items[this.items.length - 1];
          if (last && last.kind === 'user' && last.id === (u.messageId || '')) { last.text += c.text; this.touch(this.items.length - 1); } else this.add({ kind: 'user', id: u.messageId || '', text: c.text || '' }, seq);
        }
        return;
      case 'tool_call':
        this.turnStart(seq);
        this.tool(u.toolCallId, { name: u.title || u.kind || 'tool', input: stringify(u.rawInput ?? ''), status: acpStatus(u.status) }, seq);
        return;
      case 'tool_call_update': {
        const out = (u.content || []).map((x) => (x.content && x.content.text) || (x.type === 'diff' ? `diff ${x.path}` : '')).filter(Boolean).join('\n');
        this.tool(u.toolCallId, { status: u.status ? acpStatus(u.status) : undefined, result: out || (u.rawOutput !== undefined ? stringify(u.rawOutput) : undefined), name: u.title || undefined }, seq);
        return;
      }
      case 'plan':
        this.add({ kind: 'system', text: `plan: ${(u.entries || []).map((e) => `${e.status === 'completed' ? '✓' : '·'} ${e.content}`).join('; ')}` }, seq);
        return;
      default:
    }
  }
}

function acpStatus(s) {
  if (s === 'completed') return 'done';
  if (s === 'failed') return 'error';
  return 'running';
}

function stringify(v) {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  return JSON.stringify(v, null, 2);
}

function resultText(c) {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((b) => (b.type === 'text' ? b.text : stringify(b))).join('\n');
  return stringify(c);
}

// toolInput is what a collapsed tool call shows on one line.
export function summary(it) {
  if (it.kind !== 'tool_call') return '';
  let s = it.input || '';
  try {
    const o = JSON.parse(s);
    if (o && typeof o === 'object') s = o.command || o.file_path || o.path || o.description || o.query || o.pattern || o.skill || s;
  } catch { /* plain text input */ }
  s = String(s).split('\n')[0];
  return s.length > 120 ? `${s.slice(0, 119)}…` : s;
}
