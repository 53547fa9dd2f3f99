package transfer

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/bolt"
	"github.com/olivares-dev/olivares/coordinator/store/postgres"
	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fill writes at least one record of every kind through the store API, as
// a coordinator's life would: enrollment, runs, marks, names, a release, a
// delete, approvals, secrets, windowed reads.
func fill(t *testing.T, s store.Store) {
	t.Helper()
	ctx := t.Context()
	must(t, s.PutTenant(ctx, store.Tenant{ID: "default", CreatedAt: t0}))
	must(t, s.PutTenant(ctx, store.Tenant{ID: "acme", CreatedAt: t0}))
	p := store.Principal{ID: "prn_a", Name: "Ana", Kind: store.KindHuman, Roles: map[string]string{"default": store.RoleAdmin, "acme": store.RoleViewer}, CreatedAt: t0}
	must(t, s.CreatePrincipal(ctx, p, store.Credential{Hash: "h-a1", ID: "cred_1", Kind: store.CredSession, PrincipalID: "prn_a", CreatedAt: t0}))
	must(t, s.AddCredential(ctx, store.Credential{Hash: "h-a2", ID: "cred_2", Kind: store.CredAPIToken, PrincipalID: "prn_a", Label: "ci", CreatedAt: t0}))
	for _, l := range []store.SigninLink{
		{Hash: "l-used", PrincipalID: "prn_a", CreatedAt: t0, ExpiresAt: t0.Add(15 * time.Minute)},
		{Hash: "l-open", PrincipalID: "prn_a", CreatedAt: t0, ExpiresAt: t0.Add(15 * time.Minute)},
	} {
		must(t, s.CreateSigninLink(ctx, l))
	}
	_, _, err := s.RedeemSigninLink(ctx, "l-used", t0, store.Credential{Hash: "h-a3", ID: "cred_3", Kind: store.CredSession, CreatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)})
	must(t, err)
	for _, jt := range []store.JoinToken{
		{Hash: "j-used", NodeID: "node-1", Tenant: "default", Labels: map[string]string{"zone": "a"}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)},
		{Hash: "j-open", NodeID: "node-2", Tenant: "default", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)},
	} {
		must(t, s.CreateJoinToken(ctx, jt))
	}
	_, err = s.Enroll(ctx, "j-used", t0, func(jt store.JoinToken) (store.Node, error) {
		return store.Node{ID: jt.NodeID, Tenant: jt.Tenant, Labels: jt.Labels, Hostname: "h1", EnrolledAt: t0, CertSerial: "0a",
			CertNotAfter: t0.Add(24 * time.Hour), Capabilities: []byte(`{"pty":true}`)}, nil
	})
	must(t, err)
	must(t, s.CreateProfile(ctx, apitypes.Profile{Ref: "prof_1", Tenant: "default", NodeID: "node-1", Tool: "codex", Name: "codex", Home: "/h", EnvKeys: []string{"K"}, CreatedAt: t0}))
	must(t, s.CreateWorkspace(ctx, apitypes.Workspace{Ref: "ws_1", Tenant: "default", NodeID: "node-1", Name: "w", Path: "/w", CreatedAt: t0}))
	_, err = s.UpdateWorkspaceSettings(ctx, "ws_1", func(w *store.WorkspaceSettings) (*apitypes.AuditEntry, error) {
		w.SetupCommand = "npm ci"
		w.SetupApproval = &store.Approval{SHA256: "ab", Actor: "cred_1", At: t0}
		e := entry("default", apitypes.AuditWorkspaceApproveSetup, "")
		e.Target.WorkspaceRef = "ws_1"
		return &e, nil
	})
	must(t, err)
	must(t, s.CreateSecret(ctx, store.Secret{Ref: "sec_1", Tenant: "default", Name: "npm", Sealed: []byte{0, 1, 2, 255}, CreatedAt: t0}))
	for i, ref := range []string{"run_1", "run_2", "run_3"} {
		r := apitypes.Run{RunRef: ref, Tenant: "default", NodeID: "node-1", State: apitypes.StateIdle, Driver: "codex", Generation: 1,
			Isolation: apitypes.IsolationNative, ProviderProfileRef: "prof_1", LiveRef: ref + ".1", CreatedAt: t0.Add(time.Duration(i) * time.Second), Rev: 3}
		if _, err := s.PutRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, owner := range []string{"prn:prn_a", "tok:cred_2"} {
		_, err := s.UpdateMarks(ctx, store.MarkKey{Tenant: "default", Owner: owner, RunRef: "run_1"}, func(m *store.Marks) {
			at := t0
			m.PinnedAt, m.Done = &at, true
		})
		must(t, err)
	}
	_, err = s.UpdateRunMeta(ctx, "run_1", func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		m.Name = "first"
		m.Grants = []store.GrantRef{{Kind: "package_registry_token", SecretRef: "sec_1", Env: "NPM_TOKEN"}}
		e := entry("default", apitypes.AuditRunRenamed, "run_1")
		e.Detail = json.RawMessage(`{"b": 1, "a": [2, 1]}`) // order and spacing are part of what was hashed
		return &e, nil
	})
	must(t, err)
	_, err = s.ReleaseRun(ctx, "run_2", t0)
	must(t, err)
	must(t, s.DeleteRun(ctx, "run_3", entry("default", apitypes.AuditRunDeleted, "run_3")))
	if err := s.PutUsage(ctx, []apitypes.UsageTurn{{RunRef: "run_1", Seq: 1, Turn: 1, Tenant: "default", NodeID: "node-1", Tool: "claude",
		ProfileRef: "prof_1", At: t0, InputTokens: 11, OutputTokens: 5}}); err != nil {
		t.Fatalf("PutUsage: %v", err)
	}
	ok, err := s.AppendAuditWindowed(ctx, entry("default", apitypes.AuditRunMessages, "run_1"), 15*time.Minute)
	if err != nil || !ok {
		t.Fatalf("AppendAuditWindowed: %v, %v", ok, err)
	}
	_, err = s.AppendAudit(ctx, entry("acme", apitypes.AuditRunArchived, "run_x"))
	must(t, err)
}

func entry(tenant, event, ref string) apitypes.AuditEntry {
	return apitypes.AuditEntry{At: t0, Tenant: tenant, Event: event,
		Actor:  apitypes.AuditActor{CredentialID: "cred_1", PrincipalID: "prn_a", Kind: apitypes.ActorHuman},
		Target: apitypes.AuditTarget{RunRef: ref}}
}

func boltFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "coordinator.db")
	s, err := bolt.Open(path)
	must(t, err)
	fill(t, s)
	must(t, s.Close())
	return path
}

func openPG(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), postgres.Options{DSN: dsn})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// R-CFG-6: every kind of record reaches PostgreSQL, the copy is verified, a second
// copy writes nothing, and the copied store behaves as the file did.
func TestCopyEveryKind(t *testing.T) {
	ctx := t.Context()
	src, err := bolt.OpenReadOnly(boltFile(t))
	must(t, err)
	defer src.Close()
	dst := openPG(t, pgtest.NewDatabase(t))

	var out bytes.Buffer
	rep, err := Copy(ctx, src, dst, &out)
	if err != nil {
		t.Fatalf("Copy: %v\n%s", err, out.String())
	}
	for _, k := range rep.Kinds {
		if k.Source == 0 || k.Written != k.Source || k.Target != k.Source {
			t.Errorf("kind %s: source %d, written %d, target %d; want every record of a filled store copied", k.Kind, k.Source, k.Written, k.Target)
		}
	}
	if len(rep.Kinds) != len(store.RecordKinds) || len(rep.Chains) != 2 {
		t.Fatalf("report: %d kinds, %d chains", len(rep.Kinds), len(rep.Chains))
	}
	for _, want := range []string{"runs: 2 of 2 copied (2 written)", `audit chain of tenant "default", 4 entries`, "verified"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("progress output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	again, err := Copy(ctx, src, dst, &out)
	if err != nil {
		t.Fatalf("second Copy: %v", err)
	}
	if n := again.Written(); n != 0 {
		t.Fatalf("second Copy wrote %d records, want 0:\n%s", n, out.String())
	}

	// The copy behaves as the file did.
	p, c, err := dst.PrincipalByCredential(ctx, "h-a2")
	if err != nil || p.Roles["acme"] != store.RoleViewer || c.Kind != store.CredAPIToken {
		t.Errorf("PrincipalByCredential: %+v %+v %v", p, c, err)
	}
	if _, err := dst.Enroll(ctx, "j-used", t0, nil); !errors.Is(err, store.ErrTokenUsed) {
		t.Errorf("Enroll with the used token: got %v, want ErrTokenUsed", err)
	}
	if n, err := dst.Enroll(ctx, "j-open", t0, func(jt store.JoinToken) (store.Node, error) {
		return store.Node{ID: jt.NodeID, Tenant: jt.Tenant, EnrolledAt: t0}, nil
	}); err != nil || n.ID != "node-2" {
		t.Errorf("Enroll with the open token: %+v, %v", n, err)
	}
	if _, _, err := dst.RedeemSigninLink(ctx, "l-used", t0, store.Credential{Hash: "h-x"}); !errors.Is(err, store.ErrTokenUsed) {
		t.Errorf("RedeemSigninLink of the used link: got %v, want ErrTokenUsed", err)
	}
	if _, c, err := dst.PrincipalByCredential(ctx, "h-a3"); err != nil || !c.ExpiresAt.Equal(t0.Add(24*time.Hour)) {
		t.Errorf("the credential the link made: %+v, %v", c, err)
	}
	if _, _, err := dst.RedeemSigninLink(ctx, "l-open", t0, store.Credential{Hash: "h-a4"}); err != nil {
		t.Errorf("RedeemSigninLink of the open link: %v", err)
	}
	n, err := dst.GetNode(ctx, "node-1")
	if err != nil || string(n.Capabilities) != `{"pty":true}` || n.Labels["zone"] != "a" {
		t.Errorf("GetNode: %+v, %v", n, err)
	}
	runs, _, err := dst.ListRuns(ctx, store.RunQuery{Tenant: "default"})
	if err != nil || len(runs) != 2 || runs[0].RunRef != "run_2" || !runs[1].CreatedAt.Equal(t0) {
		t.Errorf("ListRuns: %+v, %v", runs, err)
	}
	if wrote, err := dst.PutRun(ctx, apitypes.Run{RunRef: "run_3", Tenant: "default", NodeID: "node-1", Rev: 9, CreatedAt: t0}); wrote || err != nil {
		t.Errorf("PutRun of the deleted run: %v, %v; want its tombstone to hold", wrote, err)
	}
	if _, err := dst.UpdateMarks(ctx, store.MarkKey{Tenant: "default", Owner: "prn:prn_a", RunRef: "run_2"}, func(*store.Marks) {}); !errors.Is(err, store.ErrReleased) {
		t.Errorf("marks on the released run: got %v, want ErrReleased", err)
	}
	marks, err := dst.PinnedMarks(ctx, "default", "tok:cred_2")
	if err != nil || len(marks) != 1 || !marks[0].Done || !marks[0].PinnedAt.Equal(t0) {
		t.Errorf("PinnedMarks: %+v, %v", marks, err)
	}
	metas, err := dst.GetRunMeta(ctx, []string{"run_1"})
	if err != nil || metas["run_1"].Name != "first" || len(metas["run_1"].Grants) != 1 {
		t.Errorf("GetRunMeta: %+v, %v", metas, err)
	}
	ws, err := dst.GetWorkspaceSettings(ctx, "ws_1")
	if err != nil || ws.SetupCommand != "npm ci" || ws.SetupApproval == nil || !ws.SetupApproval.At.Equal(t0) {
		t.Errorf("GetWorkspaceSettings: %+v, %v", ws, err)
	}
	sec, err := dst.GetSecret(ctx, "sec_1")
	if err != nil || !bytes.Equal(sec.Sealed, []byte{0, 1, 2, 255}) {
		t.Errorf("GetSecret: %+v, %v", sec, err)
	}
	if ok, err := dst.AppendAuditWindowed(ctx, entry("default", apitypes.AuditRunMessages, "run_1"), 15*time.Minute); ok || err != nil {
		t.Errorf("a read inside the copied window: appended %v, %v; want not", ok, err)
	}
	// The chain goes on from the copied head.
	e, err := dst.AppendAudit(ctx, entry("default", apitypes.AuditRunArchived, "run_1"))
	if err != nil || e.Seq != 5 || e.Prev != rep.Chains[1].Head {
		t.Errorf("AppendAudit after the copy: seq %d prev %s, %v; want seq 5 after %s", e.Seq, e.Prev, err, rep.Chains[1].Head)
	}
}

// R-CFG-6: a database a coordinator already wrote its own audit entries to is not
// merged into: the copy stops with ErrDiverged and leaves that chain as it
// was.
func TestCopyRefusesDivergedChain(t *testing.T) {
	ctx := t.Context()
	src, err := bolt.OpenReadOnly(boltFile(t))
	must(t, err)
	defer src.Close()
	dst := openPG(t, pgtest.NewDatabase(t))
	own, err := dst.AppendAudit(ctx, entry("default", apitypes.AuditRunArchived, "elsewhere"))
	must(t, err)
	_, err = Copy(ctx, src, dst, &bytes.Buffer{})
	if !errors.Is(err, store.ErrDiverged) {
		t.Fatalf("Copy into a target with its own chain: got %v, want ErrDiverged", err)
	}
	es, _, err := dst.ListAudit(ctx, store.AuditQuery{Tenant: "default"})
	if err != nil || len(es) != 1 || es[0].Hash != own.Hash {
		t.Fatalf("the target's chain after the refused copy: %+v, %v", es, err)
	}
}

// The source must not be in use: a running coordinator holds its file.
func TestSourceInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "coordinator.db")
	s, err := bolt.Open(path)
	must(t, err)
	defer s.Close()
	if _, err := bolt.OpenReadOnly(path); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("OpenReadOnly of a file in use: got %v, want an error that says to stop the coordinator", err)
	}
}
