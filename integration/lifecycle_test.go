package integration

import (
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// A revoked agent process says so, in its log and in olivares-agent
// status, and stops dialing instead of retrying with "bad certificate"
// (R-LIFE-8). A revoked node can then be forgotten, with the profiles and
// workspaces registered on it; a node that is not revoked cannot
// (R-LIFE-7). Enrollment, revocation and forgetting are in the audit
// ledger (R-AUD-6).
func TestRevokedAgentAndForget(t *testing.T) {
	t.Parallel()
	env := NewEnv(t)
	a := env.StartAgentProcess(ProcOptions{Transport: "yamux"})
	b := env.StartAgentProcess(ProcOptions{Transport: "yamux"})
	a.AwaitConnected(30 * time.Second)
	b.AwaitConnected(30 * time.Second)
	admin := env.Client(env.AdminToken)
	var p apitypes.Profile
	admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles",
		apitypes.ProfileCreate{NodeID: a.ID, Tool: "codex", Name: "on-a", Home: filepath.Join(t.TempDir(), "h")}, &p)
	admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/workspaces",
		apitypes.WorkspaceCreate{NodeID: a.ID, Path: t.TempDir(), Name: "ws-a"}, nil)

	if got := admin.Call(http.MethodDelete, "/v1/nodes/"+a.ID, nil); got.Status != http.StatusConflict || got.ErrorCode() != "node_not_revoked" {
		t.Fatalf("forget a live node: got %d %s, want 409 node_not_revoked", got.Status, got.Body)
	}
	admin.Must(http.StatusOK, http.MethodPost, "/v1/nodes/"+a.ID+"/revoke", nil, nil)
	agentBin := filepath.Join(Binaries(t), "olivares-agent")
	var st struct {
		Link struct {
			State     string `json:"state"`
			LastError string `json:"last_error"`
		} `json:"link"`
	}
	Await(t, 30*time.Second, "olivares-agent status to say revoked", func() bool {
		out, code := runCmd(t, nil, agentBin, "status", "--state-dir", a.Dir, "--json")
		return code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.Link.State == "revoked"
	})
	if !strings.Contains(st.Link.LastError, "revoked") {
		t.Fatalf("status last_error: %q", st.Link.LastError)
	}
	if out, _ := runCmd(t, nil, agentBin, "status", "--state-dir", a.Dir); !strings.Contains(out, "revoked") {
		t.Fatalf("status text: %s", out)
	}
	if !strings.Contains(a.Output(), "will not connect again") {
		t.Fatalf("the agent's log does not say it was revoked:\n%s", a.Output())
	}

	var fg apitypes.NodeForgotten
	viewer := env.Client(env.Principal(Tenant, store.RoleViewer, store.KindHuman))
	if got := viewer.Call(http.MethodDelete, "/v1/nodes/"+a.ID, nil); got.Status != http.StatusForbidden {
		t.Fatalf("viewer forgets: %d, want 403", got.Status)
	}
	admin.Must(http.StatusOK, http.MethodDelete, "/v1/nodes/"+a.ID, nil, &fg)
	if fg.ProfilesRemoved != 1 || fg.WorkspacesRemoved != 1 {
		t.Fatalf("forget: %+v, want 1 profile and 1 workspace removed", fg)
	}
	var nodes apitypes.NodeList
	admin.Must(http.StatusOK, http.MethodGet, "/v1/nodes", nil, &nodes)
	if len(nodes.Items) != 1 || nodes.Items[0].ID != b.ID {
		t.Fatalf("node list after forget: %+v, want only %s", nodes.Items, b.ID)
	}
	if got := admin.Call(http.MethodGet, "/v1/m/sessions/profiles/"+p.Ref, nil); got.Status != http.StatusNotFound {
		t.Fatalf("profile of a forgotten node: %d", got.Status)
	}
	if got := admin.Call(http.MethodDelete, "/v1/nodes/"+a.ID, nil); got.Status != http.StatusNotFound {
		t.Fatalf("forget twice: %d, want 404", got.Status)
	}
	// A forgotten node stays refused: its certificate names a node the
	// registry no longer has. Started again, the agent is told so and ends,
	// non-zero, with the sentence (issue 32 finding 13).
	a.Kill()
	a.Start()
	var exitErr error
	Await(t, 30*time.Second, "the restarted agent to be refused and end", func() bool {
		var exited bool
		exited, exitErr = a.Exited()
		return exited
	})
	var ee *exec.ExitError
	if !errors.As(exitErr, &ee) || ee.ExitCode() != 1 || !strings.Contains(a.Output(), "olivares-agent: link: this node was revoked") {
		t.Fatalf("the restarted revoked agent: %v, want exit status 1 and the sentence\n%s", exitErr, a.Output())
	}
	if env.Fleet().Link(a.ID).Connected {
		t.Fatal("a forgotten node connected")
	}

	var page apitypes.AuditList
	admin.Must(http.StatusOK, http.MethodGet, "/v1/audit?limit=500", nil, &page)
	var evs []string
	for _, e := range page.Items {
		if e.Target.NodeID == a.ID {
			evs = append(evs, e.Event)
		}
	}
	for _, want := range []string{apitypes.AuditNodeTokenCreated, apitypes.AuditNodeEnrolled, apitypes.AuditNodeRevoked, apitypes.AuditNodeForgotten} {
		if !slices.Contains(evs, want) {
			t.Errorf("audit of node %s lacks %s: %v", a.ID, want, evs)
		}
	}
}
