// Package localapi is the agent's local control socket (0600, in the state
// dir) with a small map of handlers, after Tailscale's LocalAPI. It backs
// `olivares-agent status`.
//
// Its only writer is the engine's Claude Code hook (R-ED-4), which records a
// tool use in the run's ledger; status stays read-only (R-ARCH-5).
package localapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/olivares-dev/olivares/agent/link"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/claudehook"
	"github.com/olivares-dev/olivares/shared/localsock"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// SocketFile is the socket's name in the state dir.
const SocketFile = "agent.sock"

// SocketPath returns the socket path for a state dir.
func SocketPath(stateDir string) string { return filepath.Join(stateDir, SocketFile) }

// Status is what `olivares-agent status` prints (R-ARCH-5).
type Status struct {
	NodeID       string             `json:"node_id"`
	Tenant       string             `json:"tenant"`
	Version      string             `json:"agent_version"`
	StateDir     string             `json:"state_dir"`
	StartedAt    time.Time          `json:"started_at"`
	Link         link.Status        `json:"link"`
	Capabilities proto.Capabilities `json:"capabilities"`
	// Runs lists the live runs: ref, driver, generation, pid, state and
	// the ring's seq range (issue 3).
	Runs []supervisor.LiveRun `json:"runs"`
}

// Handlers are the routes of the socket.
type Handlers struct {
	Status func(ctx context.Context) Status
	// ClaudeHook answers the engine's PreToolUse hook of a run (R-ED-4).
	ClaudeHook func(ctx context.Context, run string, input []byte) (claudehook.Decision, error)
	// Metrics serves GET /metrics: the agent's Prometheus metrics
	// (R-OBS-8). When nil, the route is absent.
	Metrics http.Handler
}

// Handler returns the socket's http.Handler.
func (h Handlers) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		localsock.WriteJSON(w, http.StatusOK, h.Status(r.Context()))
	})
	if h.Metrics != nil {
		mux.Handle("GET /metrics", h.Metrics)
	}
	if h.ClaudeHook != nil {
		mux.HandleFunc("POST "+claudehook.Path, func(w http.ResponseWriter, r *http.Request) {
			var req claudehook.Request
			if err := json.NewDecoder(io.LimitReader(r.Body, 2<<20)).Decode(&req); err != nil {
				localsock.WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
				return
			}
			d, err := h.ClaudeHook(r.Context(), req.RunRef, req.Input)
			if err != nil {
				var we *wire.Error
				if errors.As(err, &we) {
					localsock.WriteError(w, we.Status, we.Code, we.Message)
					return
				}
				localsock.WriteError(w, http.StatusInternalServerError, "internal", err.Error())
				return
			}
			localsock.WriteJSON(w, http.StatusOK, d)
		})
	}
	return mux
}

// GetStatus asks the agent behind the socket for its status.
func GetStatus(ctx context.Context, sock string) (Status, error) {
	var st Status
	err := localsock.Do(ctx, sock, http.MethodGet, "/status", nil, &st)
	return st, err
}
