package agentd

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/claude"
	"github.com/olivares-dev/olivares/agent/drivers/codex"
	"github.com/olivares-dev/olivares/agent/drivers/gemini"
	"github.com/olivares-dev/olivares/agent/drivers/grok"
	"github.com/olivares-dev/olivares/agent/drivers/opencode"
	"github.com/olivares-dev/olivares/agent/link"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
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

func containerRuntime() string {
	for _, name := range []string{"podman", "docker"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func (a *Agent) runHandlers() map[string]link.Handler {
	return map[string]link.Handler{
		proto.OpProfileCreate:   a.profileCreateOp,
		proto.OpProfileUpdate:   a.profileUpdateOp,
		proto.OpWorkspaceCreate: a.workspaceCreateOp,
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
		proto.OpRunDelete:       a.deleteOp,
	}
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
		wire.Respond(s, nil, err)
		return
	}
	prof, err := a.sup.CreateProfile(supervisorProfile(p))
	if err == nil {
		prof.NodeID = a.id.NodeID
	}
	wire.Respond(s, prof, err)
}

func (a *Agent) profileUpdateOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.ProfileUpdate
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	prof, err := a.sup.UpdateProfile(p.Ref, p.Tenant, supervisor.ProfileUpdate{Active: p.Active,
		LaunchRequiresApproval: p.LaunchRequiresApproval, AllowedWorkspaces: p.AllowedWorkspaces, EngineHooks: p.EngineHooks,
		DeniedTools: p.DeniedTools})
	if err == nil {
		prof.NodeID = a.id.NodeID
	}
	wire.Respond(s, prof, err)
}

func (a *Agent) workspaceCreateOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.WorkspaceCreate
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	w, err := a.sup.CreateWorkspace(supervisor.WorkspaceParams{Ref: p.Ref, Tenant: p.Tenant, Name: p.Name, Path: p.Path,
		ReadOnly: p.ReadOnly, AllowedSubpaths: p.AllowedSubpaths, MaxReadBytes: p.MaxReadBytes, DLP: p.DLP})
	if err == nil {
		w.NodeID = a.id.NodeID
	}
	wire.Respond(s, w, err)
}

func (a *Agent) row(r apitypes.Run) apitypes.Run {
	r.NodeID = a.id.NodeID
	r.CodexBinding = a.codex.Binding(r.RunRef)
	return r
}

func (a *Agent) respondRun(s tunnel.Stream, r apitypes.Run, err error) {
	if err != nil {
		wire.Respond(s, nil, err)
		return
	}
	wire.Respond(s, a.row(r), nil)
}

func (a *Agent) launchOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunLaunch
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	r, err := a.sup.Launch(context.WithoutCancel(ctx), supervisorLaunch(p))
	a.respondRun(s, r, err)
}

func (a *Agent) getOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	r, err := a.sup.Get(h.RunRef)
	a.respondRun(s, r, err)
}

func (a *Agent) eventsOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunEvents
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	items, next, err := a.sup.Events(h.RunRef, p.After, p.Limit)
	if err != nil {
		wire.Respond(s, nil, err)
		return
	}
	out := apitypes.EventList{Items: items}
	if out.Items == nil {
		out.Items = []apitypes.Event{}
	}
	if next != 0 {
		out.Next = strconv.FormatUint(next, 10)
	}
	wire.Respond(s, out, nil)
}

func (a *Agent) inputOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var in apitypes.InputRequest
	if err := params(h, &in); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	ci := cliruntime.Input{Line: in.Line, Message: in.Message}
	if in.Text != nil {
		ci.Text = *in.Text
		if ci.Text == "" {
			wire.Respond(s, nil, &wire.Error{Status: http.StatusBadRequest, Code: "invalid_input", Message: `"text" is empty`})
			return
		}
	}
	err := a.sup.Input(h.RunRef, ci)
	if err != nil {
		wire.Respond(s, nil, err)
		return
	}
	wire.Respond(s, apitypes.Accepted{Accepted: true}, nil)
}

func (a *Agent) interruptOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	if err := a.sup.Interrupt(h.RunRef); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	wire.Respond(s, apitypes.Accepted{Accepted: true}, nil)
}

func (a *Agent) stopOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	// The stream's deadline would cut a stop that waits for its grace.
	s.SetDeadline(time.Time{})
	r, err := a.sup.Stop(h.RunRef, 0)
	a.respondRun(s, r, err)
}

func (a *Agent) resumeOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunResume
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	if err := a.codex.Guard(h.RunRef); err != nil {
		wire.Respond(s, nil, err) // R-CX-FT-8: never an ordinary run instead
		return
	}
	r, err := a.sup.Resume(context.WithoutCancel(ctx), h.RunRef, grants(p.Grants), p.ProjectConfigApproved)
	a.respondRun(s, r, err)
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
		wire.Respond(s, nil, err)
		return
	}
	s.SetDeadline(time.Time{})
	r, err := a.sup.Release(context.WithoutCancel(ctx), h.RunRef, p.DiscardWorktree)
	a.respondRun(s, r, err)
}

func (a *Agent) approveOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunResume
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	r, err := a.sup.Approve(context.WithoutCancel(ctx), h.RunRef, grants(p.Grants), p.ProjectConfigApproved)
	a.respondRun(s, r, err)
}

func (a *Agent) moveOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunMove
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	s.SetDeadline(time.Time{}) // a large conversation takes its time to copy
	r, err := a.sup.Move(h.RunRef, p.ProfileRef)
	a.respondRun(s, r, err)
}

func (a *Agent) projectConfigOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.ProjectConfigScan
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	pc, err := a.sup.ProjectConfig(p.WorkspaceRef, p.Tenant)
	wire.Respond(s, pc, err)
}

func (a *Agent) activityOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	act, err := a.sup.Activity(h.RunRef)
	wire.Respond(s, act, err)
}

func (a *Agent) subAgentOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunSubAgent
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	t, err := a.sup.SubAgent(h.RunRef, p.Agent)
	wire.Respond(s, t, err)
}

func (a *Agent) messagesOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunMessages
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	q, err := url.ParseQuery(p.Query)
	if err != nil {
		wire.Respond(s, nil, &wire.Error{Status: http.StatusBadRequest, Code: "invalid_parameter", Message: "the query string does not parse: " + err.Error()})
		return
	}
	out, err := a.sup.Messages(h.RunRef, q)
	wire.Respond(s, out, err)
}

func (a *Agent) handoffPreviewOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	s.SetDeadline(time.Time{}) // opencode export takes its time
	pv, err := a.sup.HandoffPreview(ctx, h.RunRef)
	wire.Respond(s, pv, err)
}

func (a *Agent) handoffOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunHandoff
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	// A stop waits for its grace, and the first turn for its answer.
	s.SetDeadline(time.Time{})
	res, err := a.sup.Handoff(context.WithoutCancel(ctx), supervisor.HandoffParams{Source: h.RunRef, Summary: p.Summary,
		Target: supervisor.LaunchParams{RunRef: p.NewRunRef, Tenant: p.Tenant, ProfileRef: p.ProfileRef,
			SetupRefusal: p.SetupRefusal, ProjectConfigApproved: p.ProjectConfigApproved}})
	if err != nil {
		wire.Respond(s, nil, err)
		return
	}
	wire.Respond(s, apitypes.HandoffResponse{Run: a.row(res.Run), SummaryState: res.SummaryState, FirstTurn: res.FirstTurn}, nil)
}

func (a *Agent) diffOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	d, err := a.sup.Diff(ctx, h.RunRef)
	wire.Respond(s, d, err)
}

func (a *Agent) diffFileOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunDiffFile
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	fd, err := a.sup.DiffFile(ctx, h.RunRef, p.Path)
	wire.Respond(s, fd, err)
}

func (a *Agent) deleteOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	wire.Respond(s, nil, a.sup.Delete(h.RunRef))
}

// attachOp streams the ring from p.From: the reply, then output and lag
// frames, then end (the generation exited, R-RC-9) or notice (the run was
// not live, R-ATT-6). A viewer that falls behind is dropped with an end
// whose reason is slow_viewer; it never blocks the child (R-TR-10).
func (a *Agent) attachOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RunAttach
	if err := params(h, &p); err != nil {
		wire.Respond(s, nil, err)
		return
	}
	v, live, err := a.sup.Attach(h.RunRef, p.From, a.cfg.Runs.ViewerQueue)
	if err != nil {
		wire.Respond(s, nil, err)
		return
	}
	defer v.Close()
	if err := wire.Respond(s, proto.RunAttachReply{Live: live}, nil); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// The coordinator closes the stream when its client goes away.
		io.Copy(io.Discard, s)
		cancel()
	}()
	buf := make([]byte, 0, 64<<10+64)
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
				buf = proto.AppendJSONFrame(buf, proto.AttachNotice, apitypes.Notice{Kind: "not_live", State: a.sup.State(h.RunRef)})
			default:
				buf = proto.AppendJSONFrame(buf, proto.AttachEnd, a.sup.EndOf(h.RunRef))
			}
			wire.WriteFrame(s, buf)
			return
		}
		if err := wire.WriteFrame(s, buf); err != nil {
			return
		}
	}
}

// pusher keeps the coordinator's run index in step (ARCHITECTURE: agents
// push run row changes): every row once per session, then each change,
// coalesced per run.
type pusher struct {
	a     *Agent
	mu    sync.Mutex
	dirty map[string]bool
	wake  chan struct{}
}

func newPusher(a *Agent) *pusher {
	return &pusher{a: a, dirty: map[string]bool{}, wake: make(chan struct{}, 1)}
}

func (p *pusher) changed(ref string) {
	p.mu.Lock()
	p.dirty[ref] = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *pusher) send(ctx context.Context, open func(context.Context) (tunnel.Stream, error), msg proto.RunsPush) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	return wire.Call(s, wire.Header{Op: proto.OpRunsPush}, msg, nil)
}

// session runs for one tunnel session (link.Options.OnSession).
func (p *pusher) session(ctx context.Context, open func(context.Context) (tunnel.Stream, error)) {
	// Everything changed since the last session, or never reached the
	// coordinator: send every row.
	p.mu.Lock()
	clear(p.dirty)
	p.mu.Unlock()
	rows := p.a.sup.List()
	for i := range rows {
		rows[i] = p.a.row(rows[i])
	}
	if err := p.send(ctx, open, proto.RunsPush{Full: true, Runs: rows}); err != nil {
		p.a.logf("agent: run index push: %v", err)
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
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
		if len(msg.Runs) == 0 {
			continue
		}
		if err := p.send(ctx, open, msg); err != nil {
			p.a.logf("agent: run index push: %v", err)
			for _, ref := range refs {
				p.changed(ref)
			}
			return // the session is likely gone; the next one sends all
		}
	}
}

func supervisorProfile(p proto.ProfileCreate) supervisor.ProfileParams {
	return supervisor.ProfileParams{Ref: p.Ref, Tenant: p.Tenant, Tool: p.Tool, Name: p.Name, Home: p.Home, Env: p.Env,
		Policy: supervisor.ProfilePolicy{Inactive: p.Inactive, LaunchRequiresApproval: p.LaunchRequiresApproval,
			AllowedWorkspaces: p.AllowedWorkspaces, EngineHooks: p.EngineHooks, DeniedTools: p.DeniedTools}}
}

func supervisorLaunch(p proto.RunLaunch) supervisor.LaunchParams {
	return supervisor.LaunchParams{RunRef: p.RunRef, Tenant: p.Tenant, ProfileRef: p.ProfileRef,
		WorkspaceRef: p.WorkspaceRef, Isolation: p.Isolation, TemplateRef: p.TemplateRef, Grants: grants(p.Grants),
		ProjectConfigApproved: p.ProjectConfigApproved, Worktree: p.Worktree, WorktreeFrom: p.WorktreeFrom, SetupRefusal: p.SetupRefusal}
}
