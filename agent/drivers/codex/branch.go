package codex

import (
	"encoding/json"
	"fmt"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/internal/jsonrpc"
)

// Codex supervision (R-CX-CONT-*, R-CX-FT-*): a run that continues a native
// thread as a branch. Its app-server runs in the supervision Codex home; the
// handshake creates no thread. On the first input the session forks the
// source with no model or provider override (pinning its snapshot, Codex
// picks the pair), starts the canonical thread with threadSource "appServer"
// and exactly the fork's pair, injects the bounded visible history, commits
// the binding, runs the turn and archives the fork (R-CX-FT-1..4). The
// source is only read by thread/fork; nothing resumes or writes it
// (R-CX-SRC-1).

// Fence is the per-thread lease of one run (a fencing token in the agent's
// store): Acquire is called once a thread this run created exists, before
// anything else writes to it, and Check before every later write (a turn, an
// inject, an archive). A failed Check fails closed: nothing is written.
type Fence interface {
	Acquire(thread string) error
	Check(thread string) error
	Release(thread string)
}

// Message is one message of a branch's visible history.
type Message struct {
	Role string // user | assistant
	Text string
}

// BranchCommit is what the first turn created.
type BranchCommit struct {
	Canonical, Fork, Model, ModelProvider string
}

// Branch is a pending branch of Source.
type Branch struct {
	Source  string
	History []Message
	// Commit records the canonical thread before its first turn runs. An
	// error (a binding race, supervision disabled) fails the turn closed
	// (R-CX-FT-8); the threads made for it are archived.
	Commit func(BranchCommit) error
	// Failed reports an attempt that failed before the turn: the branch
	// stays pending and the next input tries again (R-CX-FT-7).
	Failed func(reason string)
}

// Options extend a session beyond the plain app-server harness.
type Options struct {
	// Fence, when set, guards every write to a native thread.
	Fence Fence
	// Branch, with a spec without a conversation, makes the session a
	// pending branch.
	Branch *Branch
	// ArchiveFork is a temporary fork an earlier process left to archive;
	// it is archived once this process's first turn started.
	ArchiveFork string
	// Archived reports a thread whose archive Codex accepted (the fork, or
	// the threads of a failed attempt).
	Archived func(thread string)
}

// NewSessionWith is NewSession with Options.
func NewSessionWith(spec cliruntime.LaunchSpec, o Options) cliruntime.Session {
	s := &session{cwd: spec.Workdir, resumeID: spec.ConversationID, opt: o,
		pending: map[int64]string{}, archiving: map[int64]string{}, forkToArchive: o.ArchiveFork}
	if o.Branch != nil && spec.ConversationID == "" {
		s.branch = &branchState{}
	}
	return s
}

// Request tags of the branch steps (session.pending holds them in place of
// the method).
const (
	tagFork    = "branch:thread/fork"
	tagStart   = "branch:thread/start"
	tagInject  = "branch:thread/inject_items"
	tagArchive = "branch:thread/archive"
)

type branchPhase int

const (
	phaseIdle branchPhase = iota
	phaseForking
	phaseStarting
	phaseInjecting
)

type branchState struct {
	phase                  branchPhase
	fork, model, provider  string
	canonical              string
	forkLeased, canonLease bool
}

func (s *session) taggedLocked(tag, method string, params any) []byte {
	s.nextID++
	s.pending[s.nextID] = tag
	return jsonrpc.Line(jsonrpc.Request{JSONRPC: "2.0", ID: s.nextID, Method: method, Params: params})
}

func (s *session) acquireLocked(thread string) error {
	if s.opt.Fence == nil {
		return nil
	}
	return s.opt.Fence.Acquire(thread)
}

func (s *session) fenceCheckLocked(thread string) error {
	if s.opt.Fence == nil {
		return nil
	}
	if err := s.opt.Fence.Check(thread); err != nil {
		return fmt.Errorf("thread %s: %w; nothing was written to it", thread, err)
	}
	return nil
}

type forkParams struct {
	ThreadID string `json:"threadId"`
	// Only the source's id: no model, provider or other override pins the
	// snapshot as it is (R-CX-FT-2, AT-CX-05).
	ExcludeTurns bool `json:"excludeTurns"`
}

type branchStartParams struct {
	Cwd           string `json:"cwd,omitempty"`
	Model         string `json:"model"`
	ModelProvider string `json:"modelProvider"`
	ThreadSource  string `json:"threadSource"`
}

type injectParams struct {
	ThreadID string        `json:"threadId"`
	Items    []historyItem `json:"items"`
}

// historyItem is a raw Responses API message (thread/inject_items).
type historyItem struct {
	Type    string        `json:"type"`
	Role    string        `json:"role"`
	Content []historyPart `json:"content"`
}

type historyPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type archiveParams struct {
	ThreadID string `json:"threadId"`
}

// branchFlushLocked starts an attempt when input waits and none runs: the
// input stays queued (the run is busy) until the turn starts or the
// attempt fails.
func (s *session) branchFlushLocked() cliruntime.Step {
	b := s.branch
	if b.phase != phaseIdle || len(s.queue) == 0 || s.dead {
		return cliruntime.Step{}
	}
	*b = branchState{phase: phaseForking}
	return cliruntime.Step{Write: [][]byte{s.taggedLocked(tagFork, "thread/fork", forkParams{ThreadID: s.opt.Branch.Source, ExcludeTurns: true})}}
}

type forkResult struct {
	Thread struct {
		ID string `json:"id"`
	} `json:"thread"`
	Model         string `json:"model"`
	ModelProvider string `json:"modelProvider"`
}

func (s *session) branchResponseLocked(tag string, id int64, m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	if tag == tagArchive {
		return s.archivedLocked(id, m, raw)
	}
	b := s.branch
	if b == nil {
		return cliruntime.Step{}
	}
	if m.HasError {
		return s.branchFailLocked(tag[len("branch:"):]+": "+m.ErrorMessage, raw)
	}
	var r forkResult
	_ = json.Unmarshal(m.Result, &r)
	switch {
	case tag == tagFork && b.phase == phaseForking:
		if r.Thread.ID == "" || r.Model == "" || r.ModelProvider == "" {
			return s.branchFailLocked("thread/fork: the answer names no thread, model or provider", raw)
		}
		b.fork, b.model, b.provider = r.Thread.ID, r.Model, r.ModelProvider
		if err := s.acquireLocked(b.fork); err != nil {
			return s.branchFailLocked(fmt.Sprintf("lease of the fork %s: %v", b.fork, err), raw)
		}
		b.forkLeased = true
		b.phase = phaseStarting
		// R-CX-FT-3: exactly the pair the fork reported.
		return cliruntime.Step{Write: [][]byte{s.taggedLocked(tagStart, "thread/start", branchStartParams{
			Cwd: s.cwd, Model: b.model, ModelProvider: b.provider, ThreadSource: "appServer"})}}
	case tag == tagStart && b.phase == phaseStarting:
		if r.Thread.ID == "" {
			return s.branchFailLocked("thread/start: the answer names no thread", raw)
		}
		b.canonical = r.Thread.ID
		if err := s.acquireLocked(b.canonical); err != nil {
			return s.branchFailLocked(fmt.Sprintf("lease of the canonical thread %s: %v", b.canonical, err), raw)
		}
		b.canonLease = true
		if len(s.opt.Branch.History) == 0 {
			return s.branchCommitLocked(raw)
		}
		if err := s.fenceCheckLocked(b.canonical); err != nil {
			return s.branchFailLocked(err.Error(), raw)
		}
		b.phase = phaseInjecting
		return cliruntime.Step{Write: [][]byte{s.taggedLocked(tagInject, "thread/inject_items", injectParams{
			ThreadID: b.canonical, Items: historyItems(s.opt.Branch.History)})}}
	case tag == tagInject && b.phase == phaseInjecting:
		return s.branchCommitLocked(raw)
	}
	return cliruntime.Step{}
}

func historyItems(h []Message) []historyItem {
	out := make([]historyItem, 0, len(h))
	for _, m := range h {
		part := "input_text"
		if m.Role == "assistant" {
			part = "output_text"
		}
		out = append(out, historyItem{Type: "message", Role: m.Role, Content: []historyPart{{Type: part, Text: m.Text}}})
	}
	return out
}

// branchCommitLocked makes the canonical thread the run's conversation and
// sends the waiting input as its first turn.
func (s *session) branchCommitLocked(raw json.RawMessage) cliruntime.Step {
	b := s.branch
	c := BranchCommit{Canonical: b.canonical, Fork: b.fork, Model: b.model, ModelProvider: b.provider}
	if err := s.opt.Branch.Commit(c); err != nil {
		return s.branchFailLocked("commit of the branch: "+err.Error(), raw)
	}
	s.branch = nil
	s.thread = b.canonical
	s.forkToArchive = b.fork
	out := step(cliruntime.Event{Kind: cliruntime.EventConversation, ConversationID: s.thread, Raw: raw})
	return merge(out, s.flushLocked())
}

// branchFailLocked ends an attempt: the input that started it is dropped
// (its turn never ran), the threads made for it are archived, and the
// branch stays pending for the next input (R-CX-FT-7).
func (s *session) branchFailLocked(reason string, raw json.RawMessage) cliruntime.Step {
	b := s.branch
	var out cliruntime.Step
	if b.canonLease {
		out = merge(out, s.archiveLocked(b.canonical))
	}
	if b.forkLeased {
		out = merge(out, s.archiveLocked(b.fork))
	}
	*b = branchState{}
	if len(s.queue) > 0 {
		s.queue = s.queue[1:]
	}
	s.interrupt = false
	if s.opt.Branch.Failed != nil {
		s.opt.Branch.Failed(reason)
	}
	out.Events = append(out.Events, cliruntime.Event{Kind: cliruntime.EventError, Error: "codex branch: " + reason + "; the branch stays pending, send the input again", Raw: raw})
	return merge(out, s.flushLocked())
}

// archiveForkLocked archives the temporary fork, once.
func (s *session) archiveForkLocked() cliruntime.Step {
	f := s.forkToArchive
	if f == "" {
		return cliruntime.Step{}
	}
	s.forkToArchive = ""
	return s.archiveLocked(f)
}

// archiveLocked archives a thread this run holds the lease of.
func (s *session) archiveLocked(thread string) cliruntime.Step {
	if err := s.fenceCheckLocked(thread); err != nil {
		return step(cliruntime.Event{Kind: cliruntime.EventError, ConversationID: s.thread, Error: "archive: " + err.Error()})
	}
	line := s.taggedLocked(tagArchive, "thread/archive", archiveParams{ThreadID: thread})
	s.archiving[s.nextID] = thread
	return cliruntime.Step{Write: [][]byte{line}}
}

func (s *session) archivedLocked(id int64, m jsonrpc.Message, raw json.RawMessage) cliruntime.Step {
	thread := s.archiving[id]
	delete(s.archiving, id)
	if m.HasError {
		return step(cliruntime.Event{Kind: cliruntime.EventError, ConversationID: s.thread, Error: "thread/archive " + thread + ": " + m.ErrorMessage, Raw: raw})
	}
	if s.opt.Fence != nil {
		s.opt.Fence.Release(thread)
	}
	if s.opt.Archived != nil {
		s.opt.Archived(thread)
	}
	return cliruntime.Step{}
}
