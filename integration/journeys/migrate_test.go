package journeys

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/auditchain"
)

// snapshot is what people see of a deployment through the API.
type snapshot struct {
	Runs      []apitypes.Run
	Audit     []apitypes.AuditEntry
	Secrets   apitypes.SecretList
	Workspace apitypes.Workspace
	Profiles  apitypes.ProfileList
	Nodes     []string
}

func takeSnapshot(t *testing.T, f *fixture, alice *integration.Client) snapshot {
	t.Helper()
	var s snapshot
	// Alice's view: her pins and done marks are per caller.
	for _, r := range list(t, alice, "limit=200").Items {
		// What the node reports live (reachability, ring) is not the
		// store's; the rest of the row is. A late output frame moves the
		// ring bounds, and the agent's ring push then stores the row under
		// a new rev at a new indexed_at: those go with the ring.
		r.NodeReachable, r.RingFirst, r.RingLast = nil, 0, 0
		r.Rev, r.IndexedAt = 0, nil
		s.Runs = append(s.Runs, r)
	}
	for q := "limit=200"; ; {
		var l apitypes.AuditList
		f.admin.Must(http.StatusOK, http.MethodGet, "/v1/audit?"+q, nil, &l)
		s.Audit = append(s.Audit, l.Items...)
		if l.Next == "" {
			break
		}
		q = "limit=200&cursor=" + l.Next
	}
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/vault/secrets", nil, &s.Secrets)
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/workspaces/"+f.ws.Ref, nil, &s.Workspace)
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/profiles", nil, &s.Profiles)
	var nodes apitypes.NodeList
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/nodes", nil, &nodes)
	for _, n := range nodes.Items {
		s.Nodes = append(s.Nodes, n.ID+" "+n.CertSerial)
	}
	return s
}

// R-CFG-6: a single-node deployment moves to PostgreSQL: runs launched through the
// real agent, a person's marks, names, archives, a vault secret, an
// approved setup command and the audit ledger written by all of it, in the
// coordinator's bbolt file; `olivares-coordinator migrate` (the real
// binary) copies and verifies it, a second run writes nothing; the
// coordinator restarted on PostgreSQL with the same state dir shows the
// same deployment, its agent reconnects, the chain verifies and goes on,
// and new runs are indexed.
func TestMigrateToPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t) // fails under scripts/test when PostgreSQL is missing
	f := setup(t, "yamux", integration.ProcOptions{})
	_, aliceTok := f.env.PrincipalNamed(integration.Tenant, "alice", store.RoleAdmin, store.KindHuman)
	alice := f.env.Client(aliceTok)

	p := f.profile("codex")
	var refs []string
	for range 3 {
		r := f.launch(p)
		refs = append(refs, r.RunRef)
		f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	}
	f.post(f.operator, http.StatusOK, refs[2], "stop", nil, nil)
	f.post(alice, http.StatusOK, refs[0], "pin", nil, nil)
	f.post(alice, http.StatusOK, refs[1], "done", nil, nil)
	name := "explain the repo"
	alice.Must(http.StatusOK, http.MethodPut, runURL(refs[0], "name"), apitypes.NameRequest{Name: &name}, nil)
	f.post(alice, http.StatusOK, refs[1], "archive", nil, nil)
	value := "npm-token-value"
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/vault/secrets", apitypes.SecretCreate{Name: "npm", Value: &value}, nil)
	cmd := "npm ci"
	f.admin.Must(http.StatusOK, http.MethodPut, "/v1/m/sessions/workspaces/"+f.ws.Ref+"/setup-command", apitypes.SetupCommandRequest{Command: &cmd}, nil)
	sum := sha256.Sum256([]byte(cmd))
	sha := hex.EncodeToString(sum[:])
	f.admin.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/workspaces/"+f.ws.Ref+"/setup-command/approve", apitypes.ApproveRequest{SHA256: &sha}, nil)
	before := takeSnapshot(t, f, alice)
	if len(before.Runs) != 3 || len(before.Audit) < 3 || len(before.Secrets.Items) != 1 || before.Workspace.SetupApproved == nil || !*before.Workspace.SetupApproved {
		t.Fatalf("the deployment before the move: %d runs, %d audit entries, %d secrets, setup approved %v",
			len(before.Runs), len(before.Audit), len(before.Secrets.Items), before.Workspace.SetupApproved != nil)
	}

	bin := filepath.Join(integration.Binaries(t), "olivares-coordinator")
	migrate := func(file string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "migrate", "--from-bbolt", file, "--to-postgres", dsn).CombinedOutput()
		if err != nil {
			t.Fatalf("migrate: %v\n%s", err, out)
		}
		return string(out)
	}
	f.env.RestartOnPostgres(dsn, func(file string) {
		out := migrate(file)
		for _, want := range []string{"runs: 3 of 3 copied (3 written)", `audit chain of tenant "default"`, "verified", "done:"} {
			if !strings.Contains(out, want) {
				t.Errorf("migrate output lacks %q:\n%s", want, out)
			}
		}
		if out := migrate(file); !strings.Contains(out, ", 0 written,") {
			t.Errorf("a second migrate wrote something:\n%s", out)
		}
	})
	f.agent.AwaitConnected(wait)

	after := takeSnapshot(t, f, alice)
	if !reflect.DeepEqual(after.Runs, before.Runs) {
		t.Errorf("runs after the move:\n%+v\nwant\n%+v", after.Runs, before.Runs)
	}
	if !reflect.DeepEqual(after.Audit, before.Audit) {
		t.Errorf("audit after the move:\n%+v\nwant\n%+v", after.Audit, before.Audit)
	}
	for what, pair := range map[string][2]any{
		"secrets": {after.Secrets, before.Secrets}, "workspace": {after.Workspace, before.Workspace},
		"profiles": {after.Profiles, before.Profiles}, "nodes": {after.Nodes, before.Nodes},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s after the move: got %+v, want %+v", what, pair[0], pair[1])
		}
	}

	// The ledger goes on from its head, and verifies whole.
	name = "renamed on postgres"
	alice.Must(http.StatusOK, http.MethodPut, runURL(refs[1], "name"), apitypes.NameRequest{Name: &name}, nil)
	var v auditchain.Verifier
	for _, e := range takeSnapshot(t, f, alice).Audit {
		if b := v.Add(e); b != nil {
			t.Fatalf("audit chain after the move: broken at seq %d: %s", b.Seq, b.Reason)
		}
	}
	if v.Count() != len(before.Audit)+1 {
		t.Errorf("audit entries after a rename on PostgreSQL: %d, want %d", v.Count(), len(before.Audit)+1)
	}
	// The agent's pushes reach the PostgreSQL index.
	r := f.launch(p)
	f.operator.AwaitRun(r.RunRef, wait, "idle on postgres", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	if l := list(t, alice, "limit=200"); len(l.Items) != 4 {
		t.Errorf("runs listed after a launch on PostgreSQL: %d, want 4", len(l.Items))
	}
}
