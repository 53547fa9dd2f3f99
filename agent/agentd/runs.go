package agentd

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/claude"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
	"github.com/olivares-dev/olivares/agent/drivers/gemini"
	"github.com/olivares-dev/olivares/agent/drivers/grok"
	"github.com/olivares-dev/olivares/agent/drivers/opencode"
	"github.com/olivares-dev/olivares/agent/handoff"
	"github.com/olivares-dev/olivares/agent/link"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/runread"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/wire"
)

// drivers is the composition root's driver table (R-DRV-1).
func drivers() map[string]cliruntime.Driver {
	return map[string]cliruntime.Driver{
		string(cliruntime.KindClaude): claude.New(),
		string(cliruntime.KindCodex):  codex.New(),
		string(cliruntime.KindGrok):   grok.New(),
		// the optional ACP drivers.
		string(cliruntime.KindGemini):   gemini.New(),
		string(cliruntime.KindOpenCode): opencode.New(),
	}
}

// runners wires ProcRunner for the stdio forms (R-TR-2) and, on Linux, the
// PTY runner for a form that needs a terminal (R-TR-5, R-TR-8).
func runners() map[cliruntime.LaunchTransport]sessions.Runner {
	m := map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: sessions.NewProcRunner()}
	if pty, err := sessions.NewPTYRunner(); err == nil {
		m[cliruntime.TransportPTY] = pty
	}
	return m
}

func (a *Agent) runHandlers() map[string]link.Handler {
	return map[string]link.Handler{
		proto.OpProfileCreate:   a.profileCreateOp,
		proto.OpProfileUpdate:   a.profileUpdateOp,
		proto.OpWorkspaceCreate: a.workspaceCreateOp,
		proto.OpProfileDelete:   a.recordDeleteOp(a.reg.DeleteProfile),
		proto.OpWorkspaceDelete: a.recordDeleteOp(a.reg.DeleteWorkspace),
		proto.OpRunLaunch:       a.launchOp,
		proto.OpRunGet:          a.getOp,
		proto.OpRunEvents:       a.eventsOp,
		proto.OpRunAttach:       a.attachOp,
		proto.OpRunInput:        a.inputOp,
		proto.OpRunInterrupt:    a.interruptOp,
		proto.OpRunStop:         a.stopOp,
		proto.OpRunResume:       a.resumeOp,
		proto.OpRunRelease:      a.releaseOp,
		proto.OpRunApprove:      a.approveOp,
		proto.OpRunMove:         a.moveOp,
		proto.OpProjectConfig:   a.projectConfigOp,
		proto.OpRunDiff:         a.diffOp,
		proto.OpHandoffPreview:  a.handoffPreviewOp,
		proto.OpRunActivity:     a.activityOp,
		proto.OpRunSubAgent:     a.subAgentOp,
		proto.OpRunMessages:     a.messagesOp,
		proto.OpHandoff:         a.handoffOp,
		proto.OpRunDiffFile:     a.diffFileOp,
		proto.OpRunUncommitted:  a.uncommittedOp,
		proto.OpRunDelete:       a.deleteOp,
		proto.OpRunRequests:     a.requestsOp,
		proto.OpRunAnswer:       a.answerOp,
	}
}

func (a *Agent) requestsOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	items, err := a.sup.Requests.List(h.RunRef)
	if err != nil {
		respond(s, nil, err)
		return
	}
	respond(s, apitypes.RequestList{Items: items}, nil)
}

// answerOp settles a request (R-REQ-2). The answer is written to the tool
// and committed before the reply.
func (a *Agent) answerOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunAnswer
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	p.RequestAnswer.ByName = p.Name
	v, err := a.sup.Requests.Answer(h.RunRef, p.ID, p.By, p.RequestAnswer)
	if err != nil {
		respond(s, nil, err)
		return
	}
	respond(s, v, nil)
}

// respond answers the call, the error mapped to its wire status.
func respond(s tunnel.Stream, v any, err error) error {
	return wire.Respond(s, v, wireErr(err))
}

func badParams(op string, err error) error {
	return &wire.Error{Status: http.StatusBadRequest, Code: "bad_request", Message: op + ": bad params: " + err.Error()}
}

func params(h wire.Header, v any) error {
	if len(h.Params) == 0 {
		return nil
	}
	if err := json.Unmarshal(h.Params, v); err != nil {
		return badParams(h.Op, err)
	}
	return nil
}

func (a *Agent) profileCreateOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.ProfileCreate
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	prof, err := a.reg.CreateProfile(registryProfile(p))
	if err == nil {
		prof.NodeID = a.id.NodeID
	}
	respond(s, prof, err)
}

func (a *Agent) profileUpdateOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.ProfileUpdate
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	prof, err := a.reg.UpdateProfile(p.Ref, p.Tenant, registry.ProfileUpdate{Active: p.Active,
		LaunchRequiresApproval: p.LaunchRequiresApproval, AllowedWorkspaces: p.AllowedWorkspaces, EngineHooks: p.EngineHooks,
		DeniedTools: p.DeniedTools, Env: p.Env, UnsetEnv: p.UnsetEnv, Home: p.Home,
		Approvals: p.Approvals, ApprovalRules: p.ApprovalRules, AskTimeout: p.AskTimeout, StallAfter: p.StallAfter, ResumeAfterLoss: p.ResumeAfterLoss, Isolation: p.Isolation, Network: p.Network})
	if err == nil {
		prof.NodeID = a.id.NodeID
	}
	respond(s, prof, err)
}

// recordDeleteOp deletes a profile or workspace no run needs (R-LIFE-3).
func (a *Agent) recordDeleteOp(del func(ref, tenant string) error) link.Handler {
	return func(ctx context.Context, h wire.Header, s tunnel.Stream) {
		var p proto.RecordDelete
		if err := params(h, &p); err != nil {
			respond(s, nil, err)
			return
		}
		respond(s, struct{}{}, del(p.Ref, p.Tenant))
	}
}

func (a *Agent) workspaceCreateOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.WorkspaceCreate
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	w, err := a.reg.CreateWorkspace(registry.WorkspaceParams{Ref: p.Ref, Tenant: p.Tenant, Name: p.Name, Path: p.Path,
		ReadOnly: p.ReadOnly, AllowedSubpaths: p.AllowedSubpaths, MaxReadBytes: p.MaxReadBytes, DLP: p.DLP})
	if err == nil {
		w.NodeID = a.id.NodeID
	}
	respond(s, w, err)
}

func (a *Agent) row(r apitypes.Run) apitypes.Run {
	r.NodeID = a.id.NodeID
	r.CodexBinding = a.codex.Binding(r.RunRef)
	return r
}

// rowOf is a run row for an answer, with the node's fields.
func (a *Agent) rowOf(r apitypes.Run, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return a.row(r), nil
}

// longOp runs op on the agent's own context, not the tunnel session's: a
// stop that waits for its grace, a handoff, a move, a start that waits for
// a handshake. The handler answers when op is done, or returns at once
// when the session ends, so that the link redials without waiting for op;
// op goes on, and what it changes reaches the coordinator through the row
// push of the next session (issue 18).
func (a *Agent) longOp(ctx context.Context, s tunnel.Stream, op func(context.Context) (any, error)) {
	// The stream's deadline would cut an op that waits for its grace.
	s.SetDeadline(time.Time{})
	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	a.ops.Add(1)
	go func() {
		defer a.ops.Done()
		v, err := op(a.opsCtx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			a.published(ctx, r.v)
		}
		respond(s, r.v, r.err)
	case <-ctx.Done():
	}
}

func (a *Agent) respondRun(s tunnel.Stream, r apitypes.Run, err error) {
	if err != nil {
		respond(s, nil, err)
		return
	}
	row := a.row(r)
	a.pusher.flush(context.Background(), row)
	respond(s, row, nil)
}

func (a *Agent) launchOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunLaunch
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	a.longOp(ctx, s, func(ctx context.Context) (any, error) {
		r, err := a.sup.Launch(ctx, supervisorLaunch(p))
		return a.rowOf(r, err)
	})
}

func (a *Agent) getOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	r, err := a.sup.Get(h.RunRef)
	a.respondRun(s, r, err)
}

func (a *Agent) eventsOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunEvents
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	items, next, err := a.sup.Events(h.RunRef, p.After, p.Limit)
	if err != nil {
		respond(s, nil, err)
		return
	}
	out := apitypes.EventList{Items: items}
	if out.Items == nil {
		out.Items = []apitypes.Event{}
	}
	if next != 0 {
		out.Next = strconv.FormatUint(next, 10)
	}
	respond(s, out, nil)
}

func (a *Agent) inputOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var in proto.RunInput
	if err := params(h, &in); err != nil {
		respond(s, nil, err)
		return
	}
	ci := cliruntime.Input{Line: in.Line, Message: in.Message, By: in.By, Name: in.Name}
	if in.Text != nil {
		ci.Text = *in.Text
		if ci.Text == "" {
			respond(s, nil, &wire.Error{Status: http.StatusBadRequest, Code: "invalid_input", Message: `"text" is empty`})
			return
		}
	}
	err := a.sup.Input(ctx, h.RunRef, ci)
	if err != nil {
		respond(s, nil, err)
		return
	}
	respond(s, apitypes.Accepted{Accepted: true}, nil)
}

func (a *Agent) interruptOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	noop, err := a.sup.Interrupt(ctx, h.RunRef)
	if err != nil {
		respond(s, nil, err)
		return
	}
	respond(s, apitypes.Accepted{Accepted: true, Noop: noop}, nil)
}

func (a *Agent) stopOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	// A stop waits for its grace: on the agent's context, so that a tunnel
	// drop meanwhile redials at once (the exit reaches the index through
	// the row push).
	a.longOp(ctx, s, func(ctx context.Context) (any, error) {
		r, err := a.sup.Stop(ctx, h.RunRef, 0)
		return a.rowOf(r, err)
	})
}

func (a *Agent) resumeOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunResume
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	if err := a.codex.Guard(h.RunRef); err != nil {
		respond(s, nil, err) // R-CX-FT-8: never an ordinary run instead
		return
	}
	a.longOp(ctx, s, func(ctx context.Context) (any, error) {
		r, err := a.sup.Resume(ctx, h.RunRef, grants(p.Grants), p.ProjectConfigApproved)
		return a.rowOf(r, err)
	})
}

// grants turns the wire grants into the supervisor's (R-GRANT-1).
func grants(gs []proto.Grant) []supervisor.Grant {
	out := make([]supervisor.Grant, len(gs))
	for i, g := range gs {
		out[i] = supervisor.Grant{Kind: g.Kind, Env: g.Env, AsFile: g.AsFile, Value: g.Value}
	}
	return out
}

func (a *Agent) releaseOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunRelease
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	a.longOp(ctx, s, func(ctx context.Context) (any, error) {
		r, err := a.sup.Release(ctx, h.RunRef, p.DiscardWorktree)
		return a.rowOf(r, err)
	})
}

func (a *Agent) approveOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunResume
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	a.longOp(ctx, s, func(ctx context.Context) (any, error) {
		r, err := a.sup.Approve(ctx, h.RunRef, grants(p.Grants), p.ProjectConfigApproved)
		return a.rowOf(r, err)
	})
}

func (a *Agent) moveOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunMove
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	// A large conversation takes its time to copy.
	a.longOp(ctx, s, func(ctx context.Context) (any, error) {
		r, err := a.sup.Move(ctx, h.RunRef, p.ProfileRef)
		return a.rowOf(r, err)
	})
}

func (a *Agent) projectConfigOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.ProjectConfigScan
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	pc, err := a.reg.ProjectConfig(p.WorkspaceRef, p.Tenant)
	respond(s, pc, err)
}

func (a *Agent) activityOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	act, err := a.reads.Activity(ctx, h.RunRef)
	respond(s, act, err)
}

func (a *Agent) subAgentOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunSubAgent
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	t, err := a.reads.SubAgent(ctx, h.RunRef, p.Agent)
	respond(s, t, err)
}

func (a *Agent) messagesOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunMessages
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	q, err := url.ParseQuery(p.Query)
	if err != nil {
		respond(s, nil, &wire.Error{Status: http.StatusBadRequest, Code: "invalid_parameter", Message: "the query string does not parse: " + err.Error()})
		return
	}
	out, err := a.reads.Messages(ctx, h.RunRef, q)
	respond(s, out, err)
}

func (a *Agent) handoffPreviewOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	s.SetDeadline(time.Time{}) // opencode export takes its time
	pv, err := a.reads.HandoffPreview(ctx, h.RunRef)
	respond(s, pv, err)
}

func (a *Agent) handoffOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunHandoff
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	// A stop waits for its grace, and the first turn for its answer: on the
	// agent's context.
	a.longOp(ctx, s, func(ctx context.Context) (any, error) {
		res, err := a.sup.Handoff(ctx, supervisor.HandoffParams{Source: h.RunRef, Summary: p.Summary, Read: handoffReads{a.reads},
			Target: supervisor.LaunchParams{RunRef: p.NewRunRef, Tenant: p.Tenant, ProfileRef: p.ProfileRef, Grants: grants(p.Grants),
				SetupRefusal: p.SetupRefusal, ProjectConfigApproved: p.ProjectConfigApproved}})
		if err != nil {
			return nil, err
		}
		return apitypes.HandoffResponse{Run: a.row(res.Run), SummaryState: res.SummaryState, FirstTurn: res.FirstTurn}, nil
	})
}

func (a *Agent) diffOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	d, err := a.reads.Diff(ctx, h.RunRef)
	respond(s, d, err)
}

func (a *Agent) diffFileOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunDiffFile
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	fd, err := a.reads.DiffFile(ctx, h.RunRef, p.Path)
	respond(s, fd, err)
}

func (a *Agent) uncommittedOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	d, err := a.reads.Uncommitted(ctx, h.RunRef)
	respond(s, d, err)
}

func (a *Agent) deleteOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	respond(s, nil, a.sup.Delete(ctx, h.RunRef))
}

// attachOp streams the ring from p.From: the reply, then output and lag
// frames, then end (the generation exited, R-RC-9) or notice (the run was
// not live, R-ATT-6). A viewer that falls behind is dropped with an end
// whose reason is slow_viewer; it never blocks the child (R-TR-10).
func (a *Agent) attachOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunAttach
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	v, live, err := a.sup.Attach(h.RunRef, p.From, a.cfg.Runs.ViewerQueue)
	if err != nil {
		respond(s, nil, err)
		return
	}
	defer v.Close()
	if err := respond(s, proto.RunAttachReply{Live: live}, nil); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// The coordinator closes the stream when its client goes away. A
		// read that times out on the write deadline is not that.
		defer cancel()
		for {
			_, err := io.Copy(io.Discard, s)
			if !isTimeout(err) || ctx.Err() != nil {
				return
			}
		}
	}()
	buf := make([]byte, 0, 64<<10+64)
	var armed time.Time // when the write deadline was last pushed out
	write := func(b []byte) error {
		// Every write has a deadline: a coordinator that stops reading
		// ends this attach, never the child's output (the ring drops the
		// viewer, R-TR-10). It is pushed out before a write once a
		// quarter of it went by, not at every frame.
		if now := time.Now(); now.Sub(armed) > attachWriteTimeout/4 {
			s.SetDeadline(now.Add(attachWriteTimeout))
			armed = now
		}
		return wire.WriteFrame(s, b)
	}
	for {
		ev, err := v.Next(ctx)
		if err != nil {
			return
		}
		buf = buf[:0]
		switch ev.Kind {
		case ring.EventFrame:
			f := ev.Frame
			buf = proto.AppendOutput(buf, f.Seq, f.Generation, byte(f.Stream), f.At, f.Data)
		case ring.EventLag:
			buf = proto.AppendJSONFrame(buf, proto.AttachLag, apitypes.Lag{RequestedFrom: ev.Lag.RequestedFrom, ResumedFrom: ev.Lag.ResumedFrom})
		case ring.EventEnd:
			switch {
			case ev.End.Reason == ring.ReasonSlowViewer:
				buf = proto.AppendJSONFrame(buf, proto.AttachEnd, apitypes.End{Reason: ring.ReasonSlowViewer})
			case !live:
				row, _ := a.sup.Get(h.RunRef)
				buf = proto.AppendJSONFrame(buf, proto.AttachNotice, apitypes.Notice{Kind: "not_live", State: row.State})
			default:
				buf = proto.AppendJSONFrame(buf, proto.AttachEnd, a.sup.EndOf(h.RunRef))
			}
			write(buf)
			return
		}
		if err := write(buf); err != nil {
			return
		}
	}
}

// attachWriteTimeout bounds one write of an attach stream.
const attachWriteTimeout = 15 * time.Second

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// pusher keeps the coordinator's run index in step (ARCHITECTURE: agents
// push run row changes): every row once per session, then each change,
// coalesced per run.
type pusher struct {
	a     *Agent
	mu    sync.Mutex
	dirty map[string]bool
	wake  chan struct{}
	// open opens a stream on the current session (nil between sessions):
	// flush pushes through it.
	open func(context.Context) (tunnel.Stream, error)
	// ring is the ring bounds of each run as last pushed.
	ring map[string][2]uint64
	// sending is held (one token) from taking the changed rows to the
	// coordinator's answer for them: a flush waits for a push under way,
	// which may carry the row its answer must not beat into the index
	// (R-REP-5). A channel, so that a wait on it is one synctest sees.
	sending chan struct{}
}

// ringEvery is how often the bounds of live runs' rings are compared with
// the ones last pushed: the index's ring_first_seq and ring_last_seq lag
// the output by about this much (issue 24).
const ringEvery = 250 * time.Millisecond

func newPusher(a *Agent) *pusher {
	return &pusher{a: a, dirty: map[string]bool{}, wake: make(chan struct{}, 1), ring: map[string][2]uint64{}, sending: make(chan struct{}, 1)}
}

func (p *pusher) changed(ref string) {
	p.mu.Lock()
	p.dirty[ref] = true
	p.mu.Unlock()
	p.poke()
}

// poke wakes the pusher with no run changed: a sign-in attempt ended
// (R-ACCT-10).
func (p *pusher) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// signins is the ended sign-in attempts the coordinator has not taken
// (R-ACCT-10): every push carries them.
func (p *pusher) signins() []apitypes.SigninAttempt {
	if p.a.signin == nil {
		return nil
	}
	return p.a.signin.Ended()
}

func (p *pusher) send(ctx context.Context, open func(context.Context) (tunnel.Stream, error), msg proto.RunsPush) error {
	p.mu.Lock()
	for _, r := range msg.Runs {
		p.ring[r.RunRef] = [2]uint64{r.RingFirst, r.RingLast}
	}
	p.mu.Unlock()
	// R-USE-6: each run's unacknowledged usage rows ride with its row,
	// whichever push carries it; a repeat is stored once.
	msg.Usage = nil
	for _, r := range msg.Runs {
		msg.Usage = append(msg.Usage, p.a.sup.Usage.Pending(r.RunRef)...)
	}
	msg.Signins = p.signins()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	var reply proto.RunsPushReply
	if err := wire.Call(s, wire.Header{Op: proto.OpRunsPush}, msg, &reply); err != nil {
		return err
	}
	p.ack(msg.Usage)
	if len(reply.SigninsTaken) > 0 {
		p.a.signin.Reported(reply.SigninsTaken)
	}
	return nil
}

// session runs for one tunnel session (link.Options.OnSession).
func (p *pusher) session(ctx context.Context, open func(context.Context) (tunnel.Stream, error)) {
	// Everything changed since the last session, or never reached the
	// coordinator: send every row.
	p.sending <- struct{}{}
	p.mu.Lock()
	clear(p.dirty)
	p.open = open
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.open = nil
		p.mu.Unlock()
	}()
	rows := p.a.sup.List()
	for i := range rows {
		rows[i] = p.a.row(rows[i])
	}
	err := p.send(ctx, open, proto.RunsPush{Full: true, Runs: rows})
	<-p.sending
	if err != nil {
		p.a.log.Warn("run index push failed", logging.Err(err))
		return
	}
	tick := time.NewTicker(ringEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-tick.C:
			if err := p.pushRings(ctx, open); err != nil {
				p.a.log.Warn("run index push failed", logging.Err(err))
				return
			}
			continue
		}
		p.sending <- struct{}{}
		p.mu.Lock()
		refs := make([]string, 0, len(p.dirty))
		for ref := range p.dirty {
			refs = append(refs, ref)
		}
		clear(p.dirty)
		p.mu.Unlock()
		var msg proto.RunsPush
		for _, ref := range refs {
			if r, err := p.a.sup.Get(ref); err == nil {
				msg.Runs = append(msg.Runs, p.a.row(r))
			}
		}
		if len(msg.Runs) == 0 && len(p.signins()) == 0 {
			<-p.sending
			continue
		}
		err := p.send(ctx, open, msg)
		<-p.sending
		if err != nil {
			p.a.log.Warn("run index push failed", logging.Err(err))
			for _, ref := range refs {
				p.changed(ref)
			}
			return // the session is likely gone; the next one sends all
		}
	}
}

// ack drops the usage rows a push delivered from the runs' outboxes
// (R-USE-6).
func (p *pusher) ack(rows []apitypes.UsageTurn) {
	last := map[string]uint64{}
	for _, u := range rows {
		last[u.RunRef] = max(last[u.RunRef], u.Seq)
	}
	for ref, seq := range last {
		p.a.sup.Usage.Ack(ref, seq)
	}
}

// pushRings pushes the live runs whose ring bounds moved since their row
// was last pushed, under a new rev (the index keeps the highest).
func (p *pusher) pushRings(ctx context.Context, open func(context.Context) (tunnel.Stream, error)) error {
	rev := p.a.sup.Runs.NextRev()
	var msg proto.RunsPush
	for _, r := range p.a.sup.List() {
		if !apitypes.Live(r.State) {
			continue
		}
		p.mu.Lock()
		last, seen := p.ring[r.RunRef]
		p.mu.Unlock()
		if seen && last == [2]uint64{r.RingFirst, r.RingLast} {
			continue
		}
		r.Rev = max(r.Rev, rev)
		msg.Runs = append(msg.Runs, p.a.row(r))
	}
	if len(msg.Runs) == 0 {
		return nil
	}
	return p.send(ctx, open, msg)
}

// flush pushes rows and every row changed since the last push, and
// returns once the coordinator stored them: a call that changed a run
// answers after its row is in the index, so that whoever the caller asks
// next, on any coordinator replica, reads it (issue 24: the push is the
// index's one writer). A failed flush leaves the rows to the next push.
func (p *pusher) flush(ctx context.Context, rows ...apitypes.Run) {
	p.sending <- struct{}{}
	defer func() { <-p.sending }()
	p.mu.Lock()
	open := p.open
	refs := make([]string, 0, len(p.dirty))
	for ref := range p.dirty {
		refs = append(refs, ref)
	}
	clear(p.dirty)
	p.mu.Unlock()
	if open == nil {
		for _, ref := range refs {
			p.changed(ref)
		}
		return
	}
	seen := map[string]bool{}
	msg := proto.RunsPush{Runs: make([]apitypes.Run, 0, len(rows)+len(refs))}
	for _, r := range rows {
		seen[r.RunRef] = true
		msg.Runs = append(msg.Runs, r)
	}
	for _, ref := range refs {
		if seen[ref] {
			continue
		}
		if r, err := p.a.sup.Get(ref); err == nil {
			msg.Runs = append(msg.Runs, p.a.row(r))
		}
	}
	if len(msg.Runs) == 0 {
		return
	}
	if err := p.send(ctx, open, msg); err != nil {
		p.a.log.Warn("run index push before an answer failed; the rows are pushed again later", logging.Err(err))
		for _, r := range msg.Runs {
			p.changed(r.RunRef)
		}
	}
}

// published flushes the runs an answer carries before it is sent.
func (a *Agent) published(ctx context.Context, v any) {
	switch v := v.(type) {
	case apitypes.Run:
		a.pusher.flush(ctx, v)
	case apitypes.HandoffResponse:
		a.pusher.flush(ctx, v.Run)
	case proto.CodexContinued:
		a.pusher.flush(ctx, v.Run)
	}
}

func registryProfile(p proto.ProfileCreate) registry.ProfileParams {
	return registry.ProfileParams{Ref: p.Ref, Tenant: p.Tenant, Tool: p.Tool, Name: p.Name, Home: p.Home, Env: p.Env,
		Policy: registry.ProfilePolicy{Inactive: p.Inactive, LaunchRequiresApproval: p.LaunchRequiresApproval,
			AllowedWorkspaces: p.AllowedWorkspaces, EngineHooks: p.EngineHooks, DeniedTools: p.DeniedTools,
			Approvals: p.Approvals, ApprovalRules: p.ApprovalRules, AskTimeout: p.AskTimeout, StallAfter: p.StallAfter, ResumeAfterLoss: p.ResumeAfterLoss,
			Isolation: p.Isolation, Network: p.Network}}
}

// supervisorLaunch is the last of a launch's three hops (see
// proto.RunLaunch): the supervisor's LaunchParams is not the wire body
// because it is the domain's input, built by two more callers than this op
// (a handoff's target, a Codex branch, which set Workdir and HandoffOf that
// no call carries), holding grants as supervisor.Grant, not JSON. Every
// field of the wire body is copied (TestLaunchCopyKeepsEveryField).
func supervisorLaunch(p proto.RunLaunch) supervisor.LaunchParams {
	return supervisor.LaunchParams{RunRef: p.RunRef, Tenant: p.Tenant, ProfileRef: p.ProfileRef,
		WorkspaceRef: p.WorkspaceRef, Isolation: p.Isolation, TemplateRef: p.TemplateRef, Grants: grants(p.Grants),
		ProjectConfigApproved: p.ProjectConfigApproved, Worktree: p.Worktree, WorktreeFrom: p.WorktreeFrom, SetupRefusal: p.SetupRefusal,
		SetupCommand: p.SetupCommand}
}

// handoffReads is the read side as a handoff's source (supervisor.HandoffSource).
type handoffReads struct{ r *runread.Reader }

func (h handoffReads) Check(ref string) error {
	_, _, err := h.r.HandoffSource(ref)
	return err
}

func (h handoffReads) Read(ctx context.Context, ref string) (handoff.Conversation, string, error) {
	r, prof, err := h.r.HandoffSource(ref)
	if err != nil {
		return handoff.Conversation{}, "", err
	}
	return h.r.HandoffRead(ctx, r, prof)
}

// codexRuns is the run runtime as Codex supervision needs it.
type codexRuns struct {
	reg *registry.Registry
	*supervisor.Supervisor
}

func (c codexRuns) CreateProfile(p registry.ProfileParams) (apitypes.Profile, error) {
	return c.reg.CreateProfile(p)
}
