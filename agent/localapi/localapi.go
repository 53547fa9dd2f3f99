// Package localapi is the agent's local control socket (0600, in the state
// dir) with a small map of handlers, after Tailscale's LocalAPI. It backs
// `olivares-agent status`.
//
// localapi is read-only for now (R-ARCH-5): no handler changes state.
package localapi

import (
	"context"
	"net/http"
	"path/filepath"
	"time"

	"github.com/olivares-dev/olivares/agent/link"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/localsock"
	"github.com/olivares-dev/olivares/shared/proto"
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
}

// Handler returns the socket's http.Handler.
func (h Handlers) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		localsock.WriteJSON(w, http.StatusOK, h.Status(r.Context()))
	})
	return mux
}

// GetStatus asks the agent behind the socket for its status.
func GetStatus(ctx context.Context, sock string) (Status, error) {
	var st Status
	err := localsock.Do(ctx, sock, http.MethodGet, "/status", nil, &st)
	return st, err
}
