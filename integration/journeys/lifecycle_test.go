package journeys

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/auditchain"
)

const profilesPath = "/v1/m/sessions/profiles"

// auditEvents lists the tenant's whole ledger as the admin reads it.
func (f *fixture) audit() []apitypes.AuditEntry {
	f.t.Helper()
	var all []apitypes.AuditEntry
	cursor := ""
	for {
		var page apitypes.AuditList
		path := "/v1/audit?limit=500"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		f.admin.Must(http.StatusOK, http.MethodGet, path, nil, &page)
		all = append(all, page.Items...)
		if page.Next == "" {
			return all
		}
		cursor = page.Next
	}
}

func eventsOf(es []apitypes.AuditEntry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Event)
	}
	return out
}

// A profile's environment and home are corrected over the API, values
// staying on the node (R-LIFE-2); a profile or workspace a live run uses
// is not deleted (409 in_use), and once it is free it goes from the node
// and the index together; with the node unreachable nothing is deleted
// on either side (R-LIFE-3).
func TestLifecycleProfileAndWorkspace(t *testing.T) {
	t.Parallel()
	f := setup(t, "yamux", integration.ProcOptions{})
	p := f.profile("codex")
	pp := profilesPath + "/" + p.Ref

	// Environment and home (R-LIFE-2).
	f.admin.Must(http.StatusOK, http.MethodPatch, pp, apitypes.ProfileUpdate{Env: map[string]string{"FOO": "s3cret-foo", "BAZ": "1"}}, &p)
	if !slices.Equal(p.EnvKeys, []string{"BAZ", "FOO"}) {
		t.Fatalf("env keys after set: got %v, want [BAZ FOO]", p.EnvKeys)
	}
	home2 := filepath.Join(t.TempDir(), "home2")
	f.admin.Must(http.StatusOK, http.MethodPatch, pp, apitypes.ProfileUpdate{UnsetEnv: []string{"BAZ"}, Home: &home2}, &p)
	if !slices.Equal(p.EnvKeys, []string{"FOO"}) || p.Home != home2 {
		t.Fatalf("after unset and home: got env %v home %s, want [FOO] %s", p.EnvKeys, p.Home, home2)
	}
	if st, err := os.Stat(home2); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("new home: %v %v, want a 0700 directory", st, err)
	}
	for _, bad := range []apitypes.ProfileUpdate{
		{Env: map[string]string{"NOT VALID": "x"}},
		{Env: map[string]string{"A": "1"}, UnsetEnv: []string{"A"}},
		{Home: ptr("relative/home")},
	} {
		if got := f.admin.Call(http.MethodPatch, pp, bad); got.Status != http.StatusBadRequest {
			t.Errorf("PATCH %+v: got %d %s, want 400", bad, got.Status, got.Body)
		}
	}
	var again apitypes.Profile
	f.viewer.Must(http.StatusOK, http.MethodGet, pp, nil, &again)
	if !slices.Equal(again.EnvKeys, []string{"FOO"}) || again.Home != home2 {
		t.Fatalf("GET after a refused PATCH: %+v", again)
	}

	// A live run holds its profile and workspace (R-LIFE-3).
	r := f.launch(p)
	wp := "/v1/m/sessions/workspaces/" + f.ws.Ref
	for _, path := range []string{pp, wp} {
		got := f.admin.Call(http.MethodDelete, path, nil)
		if got.Status != http.StatusConflict || got.ErrorCode() != "in_use" || !strings.Contains(string(got.Body), r.RunRef) {
			t.Fatalf("DELETE %s with a live run: got %d %s, want 409 in_use naming %s", path, got.Status, got.Body, r.RunRef)
		}
		if got := f.operator.Call(http.MethodDelete, path, nil); got.Status != http.StatusForbidden {
			t.Fatalf("operator DELETE %s: got %d, want 403", path, got.Status)
		}
	}
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)

	// With the node unreachable, nothing is deleted anywhere.
	f.agent.Kill()
	f.agent.AwaitDisconnectedFrom(f.env, wait)
	if got := f.admin.Call(http.MethodDelete, pp, nil); got.Status != http.StatusServiceUnavailable || got.ErrorCode() != "node_unreachable" {
		t.Fatalf("DELETE with the node down: got %d %s, want 503 node_unreachable", got.Status, got.Body)
	}
	f.agent.Start()
	f.agent.AwaitConnected(wait)
	f.viewer.Must(http.StatusOK, http.MethodGet, pp, nil, nil)
	// The node kept it too: a run of it starts.
	r2 := f.launch(p)
	f.post(f.operator, http.StatusOK, r2.RunRef, "stop", nil, nil)

	f.admin.Must(http.StatusNoContent, http.MethodDelete, pp, nil, nil)
	if got := f.viewer.Call(http.MethodGet, pp, nil); got.Status != http.StatusNotFound {
		t.Fatalf("GET a deleted profile: %d", got.Status)
	}
	// The node agrees: the stopped run cannot resume on a profile it no
	// longer has.
	if got := f.operator.Call(http.MethodPost, runURL(r.RunRef, "resume"), nil); got.Status != http.StatusConflict || !strings.Contains(string(got.Body), "gone") {
		t.Fatalf("resume on a deleted profile: got %d %s, want 409 (profile gone)", got.Status, got.Body)
	}
	f.admin.Must(http.StatusNoContent, http.MethodDelete, wp, nil, nil)
	if got := f.admin.Call(http.MethodDelete, wp, nil); got.Status != http.StatusNotFound {
		t.Fatalf("second DELETE: %d, want 404", got.Status)
	}
	// Both names are free again.
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/workspaces",
		apitypes.WorkspaceCreate{NodeID: f.agent.ID, Path: f.wsDir, Name: f.ws.Name}, nil)
	f.admin.Must(http.StatusCreated, http.MethodPost, profilesPath,
		apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "codex", Name: p.Name, Home: home2}, nil)

	// The ledger has each change, names of variables but never a value
	// (R-AUD-3, R-AUD-6).
	es := f.audit()
	for _, want := range []string{apitypes.AuditProfileCreated, apitypes.AuditProfileUpdated, apitypes.AuditProfileDeleted,
		apitypes.AuditWorkspaceCreated, apitypes.AuditWorkspaceDeleted, apitypes.AuditRunStarted, apitypes.AuditRunStopped} {
		if !slices.Contains(eventsOf(es), want) {
			t.Errorf("audit lacks %s: %v", want, eventsOf(es))
		}
	}
	raw, _ := json.Marshal(es)
	if strings.Contains(string(raw), "s3cret-foo") {
		t.Fatal("an env value reached the audit ledger")
	}
	if !strings.Contains(string(raw), `"env_set":["BAZ","FOO"]`) {
		t.Errorf("the update's entry does not name the variables set: %s", raw)
	}
}

func ptr[T any](v T) *T { return &v }

// A leaked token is revoked in one call and stops working at once; people
// are listed, created (names unique in a tenant) and revoked over the API
// by an admin of the tenant only (R-LIFE-1, R-LIFE-4).
func TestLifecyclePrincipalsAndCredentials(t *testing.T) {
	t.Parallel()
	env := integration.NewEnv(t)
	admin := env.Client(env.AdminToken)
	var created apitypes.PrincipalCreated
	admin.Must(http.StatusCreated, http.MethodPost, "/v1/principals", apitypes.PrincipalCreate{Name: "ana", Role: store.RoleOperator}, &created)
	if created.Token == "" || created.Principal.Role != store.RoleOperator || created.Principal.Kind != store.KindHuman {
		t.Fatalf("created: %+v", created)
	}
	if got := admin.Call(http.MethodPost, "/v1/principals", apitypes.PrincipalCreate{Name: "ana", Role: store.RoleViewer}); got.Status != http.StatusConflict || got.ErrorCode() != "name_taken" {
		t.Fatalf("a second ana: got %d %s, want 409 name_taken", got.Status, got.Body)
	}
	ana := env.Client(created.Token)
	ana.Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, nil)
	// An operator manages nobody; another tenant sees nothing of ours.
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/principals"}, {http.MethodGet, "/v1/credentials"},
		{http.MethodPost, "/v1/credentials/" + created.CredentialID + "/revoke"},
	} {
		if got := ana.Call(c.method, c.path, nil); got.Status != http.StatusForbidden {
			t.Errorf("operator %s %s: got %d, want 403", c.method, c.path, got.Status)
		}
	}
	other := env.Client(env.Principal("other", store.RoleAdmin, store.KindHuman))
	other.Tenant = "other"
	if got := other.Call(http.MethodPost, "/v1/credentials/"+created.CredentialID+"/revoke", nil); got.Status != http.StatusNotFound {
		t.Fatalf("another tenant's admin revokes: got %d, want 404", got.Status)
	}
	var list apitypes.PrincipalList
	admin.Must(http.StatusOK, http.MethodGet, "/v1/principals", nil, &list)
	if !slices.ContainsFunc(list.Items, func(p apitypes.Principal) bool { return p.ID == created.Principal.ID && p.Name == "ana" }) {
		t.Fatalf("principal list: %+v", list)
	}
	// A second token for ana (an API token), then the leaked first one is
	// revoked: it fails at once, the second still works.
	var second apitypes.CredentialCreated
	admin.Must(http.StatusCreated, http.MethodPost, "/v1/principals/"+created.Principal.ID+"/credentials", apitypes.CredentialCreate{Kind: "api_token", Label: "ci"}, &second)
	var creds apitypes.CredentialList
	admin.Must(http.StatusOK, http.MethodGet, "/v1/credentials?principal="+created.Principal.ID, nil, &creds)
	if len(creds.Items) != 2 || creds.Items[0].ID != created.CredentialID || creds.Items[1].Kind != "api_token" {
		t.Fatalf("ana's credentials: %+v", creds)
	}
	raw, _ := json.Marshal(creds)
	if strings.Contains(string(raw), created.Token) || strings.Contains(string(raw), "hash") {
		t.Fatal("the credential list shows a token or its hash")
	}
	admin.Must(http.StatusOK, http.MethodPost, "/v1/credentials/"+created.CredentialID+"/revoke", nil, nil)
	if got := ana.Call(http.MethodGet, "/v1/whoami", nil); got.Status != http.StatusUnauthorized {
		t.Fatalf("revoked token: got %d, want 401", got.Status)
	}
	env.Client(second.Token).Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, nil)
	if got := admin.Call(http.MethodPost, "/v1/credentials/"+created.CredentialID+"/revoke", nil); got.Status != http.StatusNotFound {
		t.Fatalf("second revoke: got %d, want 404", got.Status)
	}

	// Revoking ana (her only tenant) ends every token she has; one cannot
	// revoke oneself.
	var who apitypes.Whoami
	admin.Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, &who)
	if got := admin.Call(http.MethodPost, "/v1/principals/"+who.PrincipalID+"/revoke", nil); got.Status != http.StatusConflict || got.ErrorCode() != "self_revoke_refused" {
		t.Fatalf("self revoke: got %d %s", got.Status, got.Body)
	}
	var rv apitypes.PrincipalRevoked
	admin.Must(http.StatusOK, http.MethodPost, "/v1/principals/"+created.Principal.ID+"/revoke", nil, &rv)
	if rv.CredentialsRevoked != 1 {
		t.Fatalf("revoke ana: %+v, want 1 credential revoked", rv)
	}
	if got := env.Client(second.Token).Call(http.MethodGet, "/v1/whoami", nil); got.Status != http.StatusUnauthorized {
		t.Fatalf("token of a revoked principal: got %d, want 401", got.Status)
	}
	if got := admin.Call(http.MethodGet, "/v1/principals/"+created.Principal.ID, nil); got.Status != http.StatusNotFound {
		t.Fatalf("a revoked principal is still in the tenant: %d", got.Status)
	}

	// The CLI's own login: a credential of its own, which logout revokes,
	// leaving the token it was given alive (R-LIFE-5).
	var login apitypes.CredentialCreated
	admin.Must(http.StatusCreated, http.MethodPost, "/v1/login", apitypes.LoginRequest{Label: "olivares login on test"}, &login)
	cli := env.Client(login.Token)
	cli.Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, nil)
	cli.Must(http.StatusNoContent, http.MethodPost, "/v1/logout", nil, nil)
	if got := cli.Call(http.MethodGet, "/v1/whoami", nil); got.Status != http.StatusUnauthorized {
		t.Fatalf("after logout: got %d, want 401", got.Status)
	}
	admin.Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, nil)

	// Every step is in the ledger, which still verifies (R-AUD-6).
	var page apitypes.AuditList
	admin.Must(http.StatusOK, http.MethodGet, "/v1/audit?limit=500", nil, &page)
	got := eventsOf(page.Items)
	for _, want := range []string{apitypes.AuditPrincipalCreated, apitypes.AuditCredentialCreated, apitypes.AuditCredentialRevoked,
		apitypes.AuditPrincipalRevoked, apitypes.AuditSignedIn, apitypes.AuditSignedOut} {
		if !slices.Contains(got, want) {
			t.Errorf("audit lacks %s: %v", want, got)
		}
	}
	var v auditchain.Verifier
	for _, e := range page.Items {
		if b := v.Add(e); b != nil {
			t.Fatalf("audit chain: %+v", b)
		}
	}
}

// The same lifecycle through the olivares CLI, as a person runs it: a
// leaked token is revoked in one command; principals, credentials and
// tenants are listed; a profile's environment and home are corrected; a
// profile, a workspace and a revoked node are removed; logout revokes the
// CLI's own credential and leaves the token it was given alive (R-LIFE-*).
func TestLifecycleCLI(t *testing.T) {
	t.Parallel()
	f := setup(t, "yamux", integration.ProcOptions{})
	must := func(want int, args ...string) string {
		t.Helper()
		out, code := f.cli(args...)
		if code != want {
			t.Fatalf("olivares %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, out)
		}
		return out
	}
	var created apitypes.PrincipalCreated
	if err := json.Unmarshal([]byte(must(0, "principal", "create", "--name", "bob", "--role", "viewer", "--json")), &created); err != nil || created.Token == "" {
		t.Fatalf("principal create --json: %v %+v", err, created)
	}
	if out := must(0, "principal", "list"); !strings.Contains(out, "bob") || !strings.Contains(out, created.Principal.ID) {
		t.Fatalf("principal list:\n%s", out)
	}
	if out := must(0, "credential", "list"); !strings.Contains(out, created.CredentialID) || !strings.Contains(out, "(this login)") {
		t.Fatalf("credential list:\n%s", out)
	}
	bob := f.env.Client(created.Token)
	bob.Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, nil)
	if out := must(0, "credential", "revoke", created.CredentialID); !strings.Contains(out, "no longer works") {
		t.Fatalf("credential revoke:\n%s", out)
	}
	if got := bob.Call(http.MethodGet, "/v1/whoami", nil); got.Status != http.StatusUnauthorized {
		t.Fatalf("the revoked token: %d, want 401", got.Status)
	}
	must(4, "credential", "revoke", created.CredentialID)
	if out := must(0, "tenant", "list"); !strings.Contains(out, integration.Tenant) || !strings.Contains(out, "admin") {
		t.Fatalf("tenant list:\n%s", out)
	}

	p := f.profile("codex")
	home := filepath.Join(t.TempDir(), "moved")
	var up apitypes.Profile
	if err := json.Unmarshal([]byte(must(0, "profile", "update", p.Name, "--env", "A=1", "--env", "B=2", "--home", home, "--json")), &up); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(up.EnvKeys, []string{"A", "B"}) || up.Home != home {
		t.Fatalf("profile update: %+v", up)
	}
	must(0, "profile", "update", p.Ref, "--unset-env", "A")
	f.viewer.Must(http.StatusOK, http.MethodGet, profilesPath+"/"+p.Ref, nil, &up)
	if !slices.Equal(up.EnvKeys, []string{"B"}) {
		t.Fatalf("after --unset-env A: %v", up.EnvKeys)
	}
	must(0, "profile", "delete", p.Name)
	must(4, "profile", "show", p.Ref)
	must(0, "workspace", "delete", f.ws.Name)

	if out := must(5, "node", "forget", f.agent.ID); !strings.Contains(out, "node_not_revoked") {
		t.Fatalf("forget a live node:\n%s", out)
	}
	must(0, "node", "revoke", f.agent.ID)
	if out := must(0, "node", "forget", f.agent.ID); !strings.Contains(out, "forgotten") {
		t.Fatalf("node forget:\n%s", out)
	}
	if out := must(0, "node", "list"); strings.Contains(out, f.agent.ID) {
		t.Fatalf("node list still shows the forgotten node:\n%s", out)
	}

	// Logout revokes the CLI's own credential; the admin token it logged
	// in with stays valid.
	if out := must(0, "logout"); !strings.Contains(out, "logged out") {
		t.Fatalf("logout:\n%s", out)
	}
	if out, code := f.cli("whoami"); code == 0 || !strings.Contains(out, "not logged in") {
		t.Fatalf("whoami after logout: %d %s", code, out)
	}
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/whoami", nil, nil)
	var page apitypes.AuditList
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/audit?event="+apitypes.AuditSignedOut, nil, &page)
	if len(page.Items) != 1 {
		t.Fatalf("sign-outs in the ledger: %d, want 1", len(page.Items))
	}
}
