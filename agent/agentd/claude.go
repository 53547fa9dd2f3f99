package agentd

import (
	"context"

	"github.com/olivares-dev/olivares/agent/claudesup"
	"github.com/olivares-dev/olivares/agent/link"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/wire"
)

// openClaude opens the node's Claude Code supervision on the run runtime;
// it refuses every call unless this node's config enabled it (R-CL-PERM-1).
func (a *Agent) openClaude() error {
	svc, err := claudesup.Open(claudesup.Options{Config: a.cfg.ClaudeSupervision, DB: a.db, Registry: a.reg,
		Runs: a.sup, Reads: a.reads, Tenant: a.id.Tenant, Log: a.log})
	if err != nil {
		return err
	}
	a.claude = svc
	return nil
}

func (a *Agent) claudeHandlers() map[string]link.Handler {
	return map[string]link.Handler{
		proto.OpClaudeSessions: a.claudeSessionsOp,
		proto.OpClaudeMessages: a.claudeMessagesOp,
		proto.OpClaudeContinue: a.claudeContinueOp,
	}
}

func (a *Agent) claudeSessionsOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.ClaudeSessionsList
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	host, err := a.claude.Sessions(p)
	host.Host = a.id.NodeID
	respond(s, host, err)
}

func (a *Agent) claudeMessagesOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.ClaudeSessionRef
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	out, err := a.claude.Messages(p)
	respond(s, out, err)
}

func (a *Agent) claudeContinueOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.ClaudeSessionRef
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	ctx, cancel := opContext(ctx, s)
	defer cancel()
	r, title, err := a.claude.Continue(ctx, p)
	if err != nil {
		respond(s, nil, err)
		return
	}
	out := proto.ClaudeContinued{Run: a.row(r), Title: title}
	a.published(ctx, out.Run)
	respond(s, out, nil)
}
