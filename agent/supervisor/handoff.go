package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/handoff"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Summary states of a handoff (R-HOF-12).
const (
	SummaryDelivered        = "delivered"
	SummaryNotDelivered     = "not_delivered"
	SummaryUnknown          = "unknown"
	SummaryWaitsForApproval = "waits_for_approval"
)

// firstTurnAck bounds how long a handoff waits for the new session to
// acknowledge its first turn before it says unknown (R-HOF-19).
const firstTurnAck = 30 * time.Second

// HandoffSource is what a handoff needs of the read side (runread wired
// by agentd): the refusals of a source, and its conversation.
type HandoffSource interface {
	// Check refuses a source that cannot be handed off (taint, tool, not
	// started), in R-HOF-18's order.
	Check(ref string) error
	// Read reads the source's stored conversation and its generated
	// summary.
	Read(ctx context.Context, ref string) (handoff.Conversation, string, error)
}

// HandoffParams is POST /runs/{ref}/handoff on the node: the source, the
// new run to launch (its RunRef, the target profile, the gate, the setup
// verdict of a worktree source), and how to read the source.
type HandoffParams struct {
	Source  string
	Target  LaunchParams
	Summary *string
	Read    HandoffSource
}

// HandoffResult is what a handoff answers (R-HOF-12, R-HOF-13).
type HandoffResult struct {
	Run          apitypes.Run
	SummaryState string
	FirstTurn    string
}

// Handoff continues a session's work in another profile, of any tool
// (R-HOF-1..20): refusals that need no stop come first, then a live source
// is stopped as stop does and read once its tool has exited, the
// transcript is written under the target profile's config home, and a new
// run starts in the same workspace whose first turn is the summary and the
// transcript's path. The source's ledger gains handed_off. It can take a
// stop's grace and a first turn's answer: agentd runs it on the agent's
// context, not a tunnel session's.
func (s *Supervisor) Handoff(ctx context.Context, p HandoffParams) (HandoffResult, error) {
	r, err := s.Runs.get(p.Source)
	if err != nil {
		return HandoffResult{}, err
	}
	target, err := s.o.Registry.ProfileIn(p.Target.ProfileRef, p.Target.Tenant)
	if err != nil {
		return HandoffResult{}, err
	}
	srcRec, _ := r.current()
	if err := target.Accepts(srcRec.WorkspaceRef); err != nil {
		return HandoffResult{}, err
	}
	if err := p.Read.Check(p.Source); err != nil {
		return HandoffResult{}, err
	}
	stopped := false
	if st := r.snapshot(); apitypes.Live(st.State) {
		// R-HOF-4: stopped exactly as POST /stop does.
		if _, err := s.Stop(ctx, p.Source, 0); err != nil {
			return HandoffResult{}, err
		}
		stopped = true
	}
	after := func(err error) error {
		if !stopped {
			return err
		}
		// R-HOF-5's sentence after a refusal that came after the stop.
		return refusal.Wrap(err, "; the session was stopped and can be resumed")
	}
	if err := p.Read.Check(p.Source); err != nil {
		return HandoffResult{}, after(err)
	}
	c, summary, err := p.Read.Read(ctx, p.Source)
	if err != nil {
		return HandoffResult{}, after(err)
	}
	if p.Summary != nil {
		summary = *p.Summary
	}
	rec, _ := r.current()
	// R-HOF-9: under the target profile's config home, with a name unique
	// to it (the new run's ref).
	path := filepath.Join(target.Home, "."+target.Tool, "olivares-handoffs", p.Target.RunRef+".md")
	if _, err := handoff.WriteTranscript(path, c); err != nil {
		return HandoffResult{}, after(fmt.Errorf("handoff: write the transcript: %w", err))
	}
	first := handoff.FirstTurn(summary, path)

	lp := p.Target
	lp.WorkspaceRef, lp.TemplateRef, lp.HandoffOf = rec.WorkspaceRef, rec.TemplateRef, rec.RunRef
	if rec.WorktreeBranch != "" {
		// R-HOF-16: a new worktree, from the source's branch, under the
		// same setup approval (no skip: the coordinator's verdict).
		lp.Worktree, lp.WorktreeFrom = true, rec.WorktreeBranch
	} else if rec.WorkspaceRef == "" {
		lp.Workdir = rec.WorkspacePath
	}
	nr, err := s.Launch(ctx, lp)
	if err != nil {
		os.Remove(path)
		return HandoffResult{}, after(err)
	}
	detail, _ := json.Marshal(map[string]string{"to": nr.RunRef, "profile": target.Ref, "transcript": path})
	if _, err := s.o.Ledger.Append(rec.RunRef, ledger.Event{Kind: ledger.KindHandedOff, Generation: rec.Generation, Detail: detail}); err != nil {
		return HandoffResult{}, err
	}
	r.touch()
	res := HandoffResult{Run: nr, FirstTurn: first}
	if nr.State == apitypes.StatePendingApproval {
		// R-HOF-12: no first turn is sent to a launch held for a person.
		res.SummaryState = SummaryWaitsForApproval
		return res, nil
	}
	res.SummaryState = s.deliverFirstTurn(ctx, nr.RunRef, target.Tool, first)
	if res.SummaryState == SummaryDelivered {
		res.FirstTurn = "" // R-HOF-13
	}
	if got, err := s.Get(nr.RunRef); err == nil {
		res.Run = got
	}
	return res, nil
}

// deliverFirstTurn sends the first turn once the new session is ready and
// says whether the tool acknowledged it within firstTurnAck (R-HOF-12,
// R-HOF-19).
func (s *Supervisor) deliverFirstTurn(ctx context.Context, ref, tool, text string) string {
	r, err := s.Runs.get(ref)
	if err != nil {
		return SummaryNotDelivered
	}
	r.mu.Lock()
	g := r.gen
	r.mu.Unlock()
	if g == nil {
		return SummaryNotDelivered
	}
	g.awaitHandshake(ctx)
	g.mu.Lock()
	ok := g.handshaken
	g.mu.Unlock()
	if !ok {
		return SummaryNotDelivered
	}
	in := cliruntime.Input{Text: text}
	if tool == string(cliruntime.KindClaude) {
		b, _ := json.Marshal(text)
		in = cliruntime.Input{Message: b}
	}
	ack := g.turnSignal()
	if err := s.Input(ctx, ref, in); err != nil {
		return SummaryNotDelivered
	}
	ackTimer := time.NewTimer(firstTurnAck)
	defer ackTimer.Stop()
	select {
	case <-ack:
		return SummaryDelivered
	case <-g.ended:
		// The tool ended without starting the turn: it did not get
		// through (R-HOF-12).
		return SummaryNotDelivered
	case <-ackTimer.C:
		return SummaryUnknown
	case <-ctx.Done():
		return SummaryUnknown
	}
}
