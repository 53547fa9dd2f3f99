package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/handoff"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/wire"
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

// handoffTools are the tools whose stored conversation a handoff reads
// (R-HOF-1, R-HOF-6).
var handoffTools = []string{handoff.ToolClaude, handoff.ToolCodex, handoff.ToolGemini, handoff.ToolOpenCode}

// handoffSource checks what a handoff or its preview needs of the source
// run before anything is read or stopped (R-HOF-14, R-HOF-1, R-HOF-2), in
// R-HOF-18's order after the target: taint 409, an unsupported tool 422,
// not started 409.
func (s *Supervisor) handoffSource(r *run) (record, profile, error) {
	r.mu.Lock()
	rec, live := r.rec, r.gen != nil
	r.mu.Unlock()
	if err := taintRefusal(rec, live, SurfaceHandoff); err != nil {
		return rec, profile{}, err
	}
	prof, ok, err := s.profile(rec.ProfileRef)
	if err != nil {
		return rec, profile{}, err
	}
	if !ok {
		return rec, profile{}, errf(http.StatusConflict, "conversation_unavailable", "the profile %s of run %s is gone", rec.ProfileRef, rec.RunRef)
	}
	if !slices.Contains(handoffTools, prof.Tool) {
		return rec, prof, errf(http.StatusUnprocessableEntity, "handoff_unsupported_tool", "a %s session cannot be handed off: handoff reads Claude Code, Codex, Gemini CLI and OpenCode conversations", prof.Tool) // R-HOF-1
	}
	// R-STATE-4: not started = no generation ever named a conversation.
	if rec.ConversationID == "" || rec.PendingApproval {
		return rec, prof, errf(http.StatusConflict, "not_started", "run %s has not started a conversation yet; there is nothing to hand off", rec.RunRef)
	}
	return rec, prof, nil
}

// handoffRead reads the source's stored conversation as it is (R-HOF-3,
// R-HOF-6): OpenCode's through its own `opencode export`, once, offline,
// under the session's profile environment.
func (s *Supervisor) handoffRead(ctx context.Context, rec record, prof profile) (handoff.Conversation, error) {
	src := handoff.Source{Tool: prof.Tool, Home: prof.Home, ConversationID: rec.ConversationID, Cwd: rec.WorkspacePath}
	if d := s.o.Drivers[prof.Tool]; d != nil && prof.Tool == handoff.ToolOpenCode {
		spec := s.spec(prof, rec.WorkspacePath, "", rec.RunRef)
		if cmd, err := d.Launch(spec); err == nil {
			src.Env = cmd.Env
			for _, kv := range cmd.Env {
				if path, ok := cutPrefix(kv, "PATH="); ok {
					if bin, err := lookPathIn("opencode", path); err == nil {
						src.OpenCodeBin = bin
					}
				}
			}
		}
	}
	c, err := handoff.Read(ctx, src)
	if err != nil {
		var he *handoff.Error
		if errors.As(err, &he) {
			return c, errf(he.Status, he.Code, "%s", he.Msg)
		}
		return c, err
	}
	return c, nil
}

func lookPathIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// HandoffPreview is GET /runs/{ref}/handoff (R-HOP-1, R-HOP-2, R-HOF-20):
// read-only, a running session is read as it is.
func (s *Supervisor) HandoffPreview(ctx context.Context, ref string) (apitypes.HandoffPreview, error) {
	r, err := s.get(ref)
	if err != nil {
		return apitypes.HandoffPreview{}, err
	}
	rec, prof, err := s.handoffSource(r)
	if err != nil {
		return apitypes.HandoffPreview{}, err
	}
	c, err := s.handoffRead(ctx, rec, prof)
	if err != nil {
		return apitypes.HandoffPreview{}, err
	}
	return apitypes.HandoffPreview{Summary: s.handoffSummary(c, rec), SourceDriver: prof.Tool, Turns: c.Turns,
		TranscriptBytes: handoff.TranscriptBytes(c)}, nil
}

// handoffSummary is the generated summary, with the worktree's branch and
// tip a recipient can pass as worktree_from (R-HOF-17).
func (s *Supervisor) handoffSummary(c handoff.Conversation, rec record) string {
	sum := handoff.Summary(c)
	if rec.WorktreeBranch != "" {
		if _, wt, _, err := s.worktreeOf(rec); err == nil {
			sum += fmt.Sprintf("\nThe work is on git branch %s (worktree %s).\n", wt.Branch, wt.Path)
		}
	}
	return sum
}

// HandoffParams is POST /runs/{ref}/handoff on the node: the source and the
// new run to launch (its RunRef, the target profile, the gate, the setup
// verdict of a worktree source).
type HandoffParams struct {
	Source  string
	Target  LaunchParams
	Summary *string
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
// transcript's path. The source's ledger gains handed_off.
func (s *Supervisor) Handoff(ctx context.Context, p HandoffParams) (HandoffResult, error) {
	r, err := s.get(p.Source)
	if err != nil {
		return HandoffResult{}, err
	}
	target, ok, err := s.profile(p.Target.ProfileRef)
	if err != nil {
		return HandoffResult{}, err
	}
	if !ok || target.Tenant != p.Target.Tenant {
		return HandoffResult{}, notFound("profile", p.Target.ProfileRef)
	}
	r.mu.Lock()
	srcRec := r.rec
	r.mu.Unlock()
	if err := target.accepts(srcRec.WorkspaceRef); err != nil {
		return HandoffResult{}, err
	}
	if _, _, err := s.handoffSource(r); err != nil {
		return HandoffResult{}, err
	}
	stopped := false
	if st := r.snapshot(); apitypes.Live(st.State) {
		// R-HOF-4: stopped exactly as POST /stop does.
		if _, err := s.Stop(p.Source, 0); err != nil {
			return HandoffResult{}, err
		}
		stopped = true
	}
	after := func(err error) error {
		if !stopped {
			return err
		}
		return stoppedErr(err)
	}
	rec, prof, err := s.handoffSource(r)
	if err != nil {
		return HandoffResult{}, after(err)
	}
	c, err := s.handoffRead(ctx, rec, prof)
	if err != nil {
		return HandoffResult{}, after(err)
	}
	summary := s.handoffSummary(c, rec)
	if p.Summary != nil {
		summary = *p.Summary
	}
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

// stoppedErr adds R-HOF-5's sentence to a refusal that came after the stop.
func stoppedErr(err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return errf(we.Status, we.Code, "%s; the session was stopped and can be resumed", we.Message)
	}
	return fmt.Errorf("%w; the session was stopped and can be resumed", err)
}

// deliverFirstTurn sends the first turn once the new session is ready and
// says whether the tool acknowledged it within firstTurnAck (R-HOF-12,
// R-HOF-19).
func (s *Supervisor) deliverFirstTurn(ctx context.Context, ref, tool, text string) string {
	r, err := s.get(ref)
	if err != nil {
		return SummaryNotDelivered
	}
	r.mu.Lock()
	g := r.gen
	r.mu.Unlock()
	if g == nil {
		return SummaryNotDelivered
	}
	timer := time.NewTimer(HandshakeTimeout)
	defer timer.Stop()
	select {
	case <-g.handshake:
	case <-g.ended:
		return SummaryNotDelivered
	case <-timer.C:
		return SummaryNotDelivered
	case <-ctx.Done():
		return SummaryNotDelivered
	}
	in := cliruntime.Input{Text: text}
	if tool == string(cliruntime.KindClaude) {
		b, _ := json.Marshal(text)
		in = cliruntime.Input{Message: b}
	}
	ack := g.turnSignal()
	if err := s.Input(ref, in); err != nil {
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
