package codexsup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
)

type threadRead struct {
	Thread thread `json:"thread"`
}

type readParams struct {
	ThreadID string `json:"threadId"`
	// IncludeTurns stays false: never an unbounded read (R-CX-TRN-4).
	IncludeTurns bool `json:"includeTurns"`
}

// read re-reads a thread's metadata (R-CX-ARC-2) and refuses an archived
// one: the catalog is the non-archived collection (R-CX-SCOPE-1).
func (s *Service) read(ctx context.Context, threadID string) (thread, error) {
	if !cliruntime.IsUUID(threadID) {
		return thread{}, refusal.New(ErrBadThreadId, "thread id %q is not a Codex thread id", threadID)
	}
	var r threadRead
	if err := s.conn.Call(ctx, "thread/read", readParams{ThreadID: threadID}, &r); err != nil {
		return thread{}, s.codexErr("thread/read", err)
	}
	if r.Thread.archived() {
		return thread{}, refusal.New(ErrThreadArchived, "thread %s is archived; only non-archived threads can be continued or archived", threadID)
	}
	return r.Thread, nil
}

// Continue is R-CX-CONT-1..4 on this node: the run already bound to the
// thread (as the source of a branch, or as a branch's own canonical thread)
// is returned as it is (created false), also for an active row
// (R-CX-SCOPE-5); otherwise, for a stored or idle thread, a new supervised
// run is created with the bounded visible history and a Codex-only model
// lock. No thread is written here: the first input does that (R-CX-FT-1).
func (s *Service) Continue(ctx context.Context, p proto.CodexThreadRef) (apitypes.Run, bool, error) {
	runs, err := s.runtime()
	if err != nil {
		return apitypes.Run{}, false, err
	}
	s.contMu.Lock()
	defer s.contMu.Unlock()
	bs, err := s.store.bindings()
	if err != nil {
		return apitypes.Run{}, false, err
	}
	for _, b := range bs {
		if b.Source == p.ThreadID || b.Canonical == p.ThreadID {
			r, err := runs.Get(b.RunRef)
			return r, false, err
		}
	}
	if err := s.available(); err != nil {
		return apitypes.Run{}, false, err
	}
	t, err := s.read(ctx, p.ThreadID)
	if err != nil {
		return apitypes.Run{}, false, err
	}
	switch t.state() {
	case apitypes.CodexStateActive:
		return apitypes.Run{}, false, refusal.New(ErrThreadActive, "thread %s is active; an active source cannot be branched", p.ThreadID) // R-CX-SCOPE-5
	case apitypes.CodexStateError:
		return apitypes.Run{}, false, refusal.New(ErrThreadError, "thread %s is in an error state; it cannot be branched", p.ThreadID)
	}
	hist, err := s.history(ctx, p.ThreadID)
	if err != nil {
		return apitypes.Run{}, false, err
	}
	if err := s.ensureProfile(runs); err != nil {
		return apitypes.Run{}, false, err
	}
	b := binding{RunRef: p.RunRef, Tenant: p.Tenant, Source: p.ThreadID, State: apitypes.CodexBranchPending,
		History: hist, CreatedAt: time.Now().UTC()}
	if _, created, err := s.store.create(b); err != nil || !created {
		if err == nil {
			err = refusal.New(ErrBranchRace, "thread %s got a branch meanwhile; continue again", p.ThreadID)
		}
		return apitypes.Run{}, false, err
	}
	// The branch works in the source's cwd when that is a directory here.
	workdir := ""
	if fi, err := os.Stat(t.Cwd); err == nil && fi.IsDir() && filepath.IsAbs(t.Cwd) {
		workdir = t.Cwd
	}
	r, err := runs.Launch(context.WithoutCancel(ctx), supervisor.LaunchParams{RunRef: p.RunRef, Tenant: p.Tenant,
		ProfileRef: ProfileRef, Workdir: workdir})
	if err != nil {
		s.store.remove(p.RunRef)
		return apitypes.Run{}, false, err
	}
	return r, true, nil
}

// ensureProfile creates the node's supervision profile once: its home is
// the run's private directory; the app-server's HOME and CODEX_HOME are the
// supervision ones, set by the driver (never a profile home, AT-CX-06).
func (s *Service) ensureProfile(runs Runs) error {
	_, err := runs.CreateProfile(registry.ProfileParams{Ref: ProfileRef, Tenant: s.o.Tenant, Tool: DriverName,
		Name: "codex-supervision", Home: filepath.Join(s.o.ProfilesDir, ProfileRef)})
	if err != nil && !errors.Is(err, registry.ErrExists) {
		return err
	}
	return nil
}

// Binding is the run's codex_binding for its row; nil for other runs.
func (s *Service) Binding(runRef string) *apitypes.CodexBinding {
	b, ok, err := s.store.binding(runRef)
	if err != nil || !ok {
		return nil
	}
	return b.view(s.o.NodeID)
}

// Branch is the supervised run's binding and its visible history
// (R-CX-FT-5).
func (s *Service) Branch(runRef string) (apitypes.CodexBranch, error) {
	b, ok, err := s.store.binding(runRef)
	if err != nil {
		return apitypes.CodexBranch{}, err
	}
	if !ok {
		return apitypes.CodexBranch{}, refusal.New(ErrNotFound, "run %s is not a Codex supervision run", runRef)
	}
	h := b.History
	if h == nil {
		h = []apitypes.CodexMessage{}
	}
	return apitypes.CodexBranch{RunRef: runRef, Binding: *b.view(s.o.NodeID), History: h}, nil
}

// Driver is the driver of supervised runs: Codex's own app-server driver
// (no second protocol implementation, R-CX-OWN-2) launched in the
// supervision home, with the run's branch and lease.
func (s *Service) Driver() cliruntime.Driver { return supDriver{s: s} }

type supDriver struct {
	codex.Driver
	s *Service
}

func (d supDriver) command() cliruntime.ProtocolCommand {
	return cliruntime.ProtocolCommand{Name: d.s.command, Args: d.s.args(),
		Vars: func(string) []cliruntime.EnvVar {
			return []cliruntime.EnvVar{{Key: "CODEX_HOME", Value: d.s.cfg.CodexHome}}
		},
		CheckID: cliruntime.CheckUUIDID}
}

// spec moves the child into the node user's home; the profile directory is
// the run's bookkeeping only.
func (d supDriver) spec(spec cliruntime.LaunchSpec) (cliruntime.LaunchSpec, error) {
	if err := d.s.available(); err != nil {
		// R-CX-FT-8: never an ordinary profile-home run instead.
		return spec, err
	}
	spec.Home = d.s.home
	spec.Env = d.s.extraEnv()
	return spec, nil
}

func (d supDriver) Launch(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	spec, err := d.spec(spec)
	if err != nil {
		return cliruntime.Command{}, err
	}
	return d.command().Launch(spec)
}

func (d supDriver) Resume(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	spec, err := d.spec(spec)
	if err != nil {
		return cliruntime.Command{}, err
	}
	return d.command().Resume(spec)
}

// Relaunchable: a supervised run whose row names no conversation starts
// again: a pending branch as a pending branch (R-CX-FT-7), and a branch
// committed just before the agent died on its canonical thread (never a
// new one). Only while supervision is available.
func (d supDriver) Relaunchable(runRef string) bool {
	_, ok, err := d.s.store.binding(runRef)
	return err == nil && ok && d.s.available() == nil
}

var _ supervisor.Relauncher = supDriver{}

func (d supDriver) NewSession(spec cliruntime.LaunchSpec) cliruntime.Session {
	s := d.s
	b, ok, err := s.store.binding(spec.RunRef)
	if err != nil || !ok {
		// Not a supervised run: it may write nothing (fail closed).
		return codex.NewSessionWith(spec, codex.Options{Fence: deniedFence{}})
	}
	if b.State == apitypes.CodexBranchCommitted && spec.ConversationID == "" {
		// Committed, but the agent died before the row named the thread:
		// the canonical thread is resumed, never replaced.
		spec.ConversationID = b.Canonical
	}
	f := &runFence{st: s.store, run: b.RunRef, tokens: map[string]uint64{}}
	if b.Canonical != "" {
		f.tokens[b.Canonical] = b.CanonicalToken
	}
	if b.Fork != "" && !b.ForkArchived {
		f.tokens[b.Fork] = b.ForkToken
	}
	o := codex.Options{Fence: f, Archived: func(th string) { s.archivedByRun(b.RunRef, th) }}
	switch {
	case b.State == apitypes.CodexBranchPending && spec.ConversationID == "":
		hist := make([]codex.Message, len(b.History))
		for i, m := range b.History {
			hist[i] = codex.Message{Role: m.Role, Text: m.Text}
		}
		o.Branch = &codex.Branch{Source: b.Source, History: hist,
			Commit: func(c codex.BranchCommit) error { return s.commit(b.RunRef, f, c) },
			Failed: func(reason string) { s.failed(b.RunRef, reason) }}
	case b.State == apitypes.CodexBranchCommitted && !b.ForkArchived:
		o.ArchiveFork = b.Fork
	}
	return codex.NewSessionWith(spec, o)
}

// commit records the canonical thread (R-CX-FT-4). It fails closed when
// supervision went away or the binding changed meanwhile (R-CX-FT-8).
func (s *Service) commit(runRef string, f *runFence, c codex.BranchCommit) error {
	if err := s.available(); err != nil {
		return err
	}
	err := s.store.update(runRef, func(b *binding) error {
		if b.State != apitypes.CodexBranchPending {
			return fmt.Errorf("the branch was committed by another process")
		}
		b.State, b.Canonical, b.Fork, b.Model, b.ModelProvider = apitypes.CodexBranchCommitted, c.Canonical, c.Fork, c.Model, c.ModelProvider
		b.CanonicalToken, b.ForkToken, b.LastError = f.token(c.Canonical), f.token(c.Fork), ""
		return nil
	})
	if err == nil {
		s.o.OnChange(runRef)
	}
	return err
}

func (s *Service) failed(runRef, reason string) {
	s.o.Log.Warn("supervised run failed", logging.KeyRunRef, runRef, "reason", reason)
	if err := s.store.update(runRef, func(b *binding) error { b.LastError = reason; return nil }); err == nil {
		s.o.OnChange(runRef)
	}
}

func (s *Service) archivedByRun(runRef, thread string) {
	s.store.update(runRef, func(b *binding) error {
		if b.Fork == thread {
			b.ForkArchived, b.ForkToken = true, 0
		}
		return nil
	})
}

// runFence is a run's leases (codex.Fence). Threads the run creates are
// leased at once; the tokens of its canonical thread and fork are kept in
// its binding so that a later generation writes with them.
type runFence struct {
	st  *store
	run string

	mu     sync.Mutex
	tokens map[string]uint64
}

func (f *runFence) Acquire(thread string) error {
	tok, err := f.st.acquire(thread, f.run, nil)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.tokens[thread] = tok
	f.mu.Unlock()
	return nil
}

func (f *runFence) token(thread string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens[thread]
}

func (f *runFence) Check(thread string) error {
	return f.st.check(thread, f.run, f.token(thread))
}

func (f *runFence) Release(thread string) {
	f.st.release(thread, f.run, f.token(thread))
	f.mu.Lock()
	delete(f.tokens, thread)
	f.mu.Unlock()
}

// deniedFence refuses every write.
type deniedFence struct{}

func (deniedFence) Acquire(string) error { return ErrLeaseLost }
func (deniedFence) Check(string) error   { return ErrLeaseLost }
func (deniedFence) Release(string)       {}

// Guard refuses to start a supervised run's process while supervision
// cannot serve (R-CX-FT-8, AT-CX-08); other runs pass.
func (s *Service) Guard(runRef string) error {
	if _, ok, err := s.store.binding(runRef); err != nil || !ok {
		return err
	}
	return s.available()
}
