package agentd

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"time"

	"github.com/olivares-dev/olivares/agent/codexsup"
	"github.com/olivares-dev/olivares/agent/link"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/wire"
)

// codexOpTimeout bounds one Codex supervision op on the node (a cold
// app-server start included).
const codexOpTimeout = 60 * time.Second

// openCodex opens the node's Codex supervision; it runs nothing until the
// first call, and refuses every call unless this node's config enabled it
// (R-CX-PERM-1).
func (a *Agent) openCodex() error {
	svc, err := codexsup.Open(codexsup.Options{
		Config: a.cfg.CodexSupervision, DB: a.db, NodeID: a.id.NodeID, Tenant: a.id.Tenant,
		Path: a.childPath(), ProfilesDir: filepath.Join(a.cfg.StateDir, "profiles"),
		OnChange: a.pusher.changed, Log: a.log,
	})
	if err != nil {
		return err
	}
	a.codex = svc
	return nil
}

func (a *Agent) codexHandlers() map[string]link.Handler {
	return map[string]link.Handler{
		proto.OpCodexThreads:  a.codexThreadsOp,
		proto.OpCodexTurns:    a.codexTurnsOp,
		proto.OpCodexContinue: a.codexContinueOp,
		proto.OpCodexArchive:  a.codexArchiveOp,
		proto.OpCodexBranch:   a.codexBranchOp,
	}
}

// opContext ends when the coordinator closes the stream (it gave up) or
// after codexOpTimeout.
func opContext(ctx context.Context, s tunnel.Stream) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, codexOpTimeout)
	go func() {
		io.Copy(io.Discard, s)
		cancel()
	}()
	return ctx, cancel
}

// respondLarge answers with the payload's size, then the payload as chunk
// frames: it may be larger than one wire message.
func respondLarge(s tunnel.Stream, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		respond(s, nil, err)
		return
	}
	respondBytes(s, b)
}

// respondBytes answers with b's size, then b as chunk frames.
func respondBytes(s tunnel.Stream, b []byte) {
	if respond(s, proto.CodexPayload{Bytes: len(b)}, nil) == nil {
		proto.WriteChunks(s, b)
	}
}

func (a *Agent) codexThreadsOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.CodexThreadsList
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	ctx, cancel := opContext(ctx, s)
	defer cancel()
	host, err := a.codex.Threads(ctx, p)
	if err != nil {
		respond(s, nil, err)
		return
	}
	host.Host = a.id.NodeID
	respondLarge(s, host)
}

func (a *Agent) codexTurnsOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.CodexTurnsList
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	ctx, cancel := opContext(ctx, s)
	defer cancel()
	page, big, err := a.codex.Turns(ctx, p)
	switch {
	case err != nil:
		respond(s, nil, err)
	case big != nil:
		// R-CX-TRN-5: the page never crosses the tunnel.
		respond(s, proto.CodexPayload{TooLarge: big}, nil)
	default:
		respondBytes(s, page)
	}
}

func (a *Agent) codexContinueOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.CodexThreadRef
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	ctx, cancel := opContext(ctx, s)
	defer cancel()
	r, created, err := a.codex.Continue(ctx, p)
	if err != nil {
		respond(s, nil, err)
		return
	}
	out := proto.CodexContinued{Created: created, Run: a.row(r)}
	a.published(ctx, out)
	respond(s, out, nil)
}

func (a *Agent) codexArchiveOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.CodexThreadRef
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	ctx, cancel := opContext(ctx, s)
	defer cancel()
	out, err := a.codex.Archive(ctx, p)
	if err == nil {
		out.Host = a.id.NodeID
	}
	respond(s, out, err)
}

func (a *Agent) codexBranchOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	b, err := a.codex.Branch(h.RunRef)
	respond(s, b, err)
}
