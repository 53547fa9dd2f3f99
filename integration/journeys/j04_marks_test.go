package journeys

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

const runsPath = "/v1/m/sessions/runs"

func runURL(ref string, rest ...string) string {
	p := runsPath + "/" + ref
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// list returns GET /runs?q for c.
func list(t *testing.T, c *integration.Client, q string) apitypes.RunList {
	t.Helper()
	var l apitypes.RunList
	c.Must(http.StatusOK, http.MethodGet, runsPath+"?"+q, nil, &l)
	return l
}

func rowOf(l apitypes.RunList, ref string) (apitypes.Run, bool) {
	for _, r := range l.Items {
		if r.RunRef == ref {
			return r, true
		}
	}
	return apitypes.Run{}, false
}

func audit(t *testing.T, c *integration.Client, q string) []apitypes.AuditEntry {
	t.Helper()
	var l apitypes.AuditList
	c.Must(http.StatusOK, http.MethodGet, "/v1/audit?"+q, nil, &l)
	return l.Items
}

// J04 — per-caller curation and shared session marks (R-PIN-1..8,
// R-SNZ-1..7, R-DONE-1..5, R-NAME-1..7, R-ARC-1..6, R-LIST-2..4, R-CLN-7,
// R-DEL-1..5, R-AUD-*), with a person's two session credentials, the
// person's API token, and a viewer.
func TestJ04MarksAndCuration(t *testing.T) {
	byTransport(t, func(t *testing.T, transport string) {
		clock := integration.NewClock(time.Now().UTC())
		f := setupEnv(t, transport, integration.Options{Now: clock.Now}, integration.ProcOptions{})
		aliceID, aliceTok := f.env.PrincipalNamed(integration.Tenant, "alice", store.RoleAdmin, store.KindHuman)
		alice := f.env.Client(aliceTok)                                           // the console
		aliceLogin := f.env.Client(f.env.Credential(aliceID, store.CredSession))  // olivares login
		aliceToken := f.env.Client(f.env.Credential(aliceID, store.CredAPIToken)) // her API token
		_, bobTok := f.env.PrincipalNamed(integration.Tenant, "bob", store.RoleViewer, store.KindHuman)
		bob := f.env.Client(bobTok)

		p := f.profile("codex")
		var refs []string // oldest first
		for range store.MaxPins + 2 {
			refs = append(refs, f.launch(p).RunRef)
		}
		ref := refs[0]

		// Bob (a viewer) pins for himself (R-AUTH-2, R-PIN-1); Alice's
		// view does not change.
		var ps apitypes.PinState
		bob.Must(http.StatusOK, http.MethodPost, runURL(ref, "pin"), nil, &ps)
		if !ps.Pinned || ps.PinnedAt == nil || ps.RunRef != ref {
			t.Fatalf("bob's pin: %+v", ps)
		}
		if r := alice.Run(ref); r.Pinned || r.PinnedAt != nil {
			t.Fatalf("alice sees bob's pin: %+v", r)
		}
		// R-PIN-2: a repeated pin keeps pinned_at.
		var ps2 apitypes.PinState
		clock.Advance(time.Minute)
		bob.Must(http.StatusOK, http.MethodPost, runURL(ref, "pin"), nil, &ps2)
		if !ps2.PinnedAt.Equal(*ps.PinnedAt) {
			t.Fatalf("second pin moved pinned_at %v → %v", ps.PinnedAt, ps2.PinnedAt)
		}

		// R-PIN-6: Alice's console and login share her pins; her API
		// token has its own.
		alice.Must(http.StatusOK, http.MethodPost, runURL(ref, "pin"), nil, nil)
		if r := aliceLogin.Run(ref); !r.Pinned {
			t.Fatalf("alice's login does not see her console's pin: %+v", r)
		}
		if r := aliceToken.Run(ref); r.Pinned {
			t.Fatalf("alice's API token sees her console's pin: %+v", r)
		}
		aliceToken.Must(http.StatusOK, http.MethodPost, runURL(refs[1], "done"), nil, nil)
		if r := alice.Run(refs[1]); r.Done {
			t.Fatalf("alice's console sees her token's done mark")
		}

		// R-PIN-3: pinning 21 runs drops the oldest pin.
		for _, r := range refs[1 : store.MaxPins+1] {
			clock.Advance(time.Second)
			aliceLogin.Must(http.StatusOK, http.MethodPost, runURL(r, "pin"), nil, nil)
		}
		if r := alice.Run(ref); r.Pinned {
			t.Fatalf("the oldest pin survived the 21st: %+v", r)
		}
		if r := alice.Run(refs[store.MaxPins]); !r.Pinned {
			t.Fatalf("the 21st pin is missing")
		}
		// R-PIN-8: DELETE answers pinned:false, pinned_at absent.
		var un apitypes.PinState
		r := alice.Must(http.StatusOK, http.MethodDelete, runURL(refs[store.MaxPins], "pin"), nil, &un)
		if un.Pinned || un.PinnedAt != nil || strings.Contains(string(r.Body), `"pinned_at":"`) {
			t.Fatalf("unpin: %s", r.Body)
		}
		alice.Must(http.StatusOK, http.MethodDelete, runURL(refs[store.MaxPins], "pin"), nil, nil) // idempotent
		alice.Must(http.StatusOK, http.MethodPost, runURL(refs[store.MaxPins], "pin"), nil, nil)

		// R-LIST-3: the caller's pins outside a page are added, at most 20
		// beyond limit; R-LIST-4: none with pagination=cursor.
		page := list(t, alice, "limit=5")
		pinnedExtra := 0
		for _, r := range page.Items[5:] {
			if !r.Pinned {
				t.Fatalf("an extra row is not pinned: %s", r.RunRef)
			}
			pinnedExtra++
		}
		if len(page.Items) < 5 || pinnedExtra == 0 || pinnedExtra > 20 {
			t.Fatalf("limit=5: %d rows, %d pinned extras", len(page.Items), pinnedExtra)
		}
		if pinnedExtra != store.MaxPins-countPinned(page.Items[:5]) {
			t.Fatalf("limit=5: %d extras, want every pin outside the page (%d)", pinnedExtra, store.MaxPins-countPinned(page.Items[:5]))
		}
		if l := list(t, alice, "limit=5&pagination=cursor"); len(l.Items) != 5 || l.Next == "" {
			t.Fatalf("cursor mode: %d rows, next %q; want 5 and a cursor", len(l.Items), l.Next)
		}
		if l := list(t, bob, "limit=5"); len(l.Items) != 5 && len(l.Items) != 6 {
			t.Fatalf("bob's page carries alice's pins: %d rows", len(l.Items))
		}

		// Snooze (R-SNZ-1..5): a past or missing until is 400; a future one
		// shows to the snoozer only and is gone once it passes.
		for _, body := range []any{
			map[string]string{"until": clock.Now().Add(-time.Minute).Format(time.RFC3339)},
			map[string]string{"until": "tomorrow"},
			map[string]any{},
			map[string]any{"until": clock.Now().Add(time.Hour).Format(time.RFC3339), "x": 1},
		} {
			if got := alice.Call(http.MethodPost, runURL(refs[2], "snooze"), body); got.Status != http.StatusBadRequest {
				t.Fatalf("snooze %v: %d %s, want 400", body, got.Status, got.Body)
			}
		}
		until := clock.Now().Add(time.Hour).Truncate(time.Second)
		var ms apitypes.MarkState
		alice.Must(http.StatusOK, http.MethodPost, runURL(refs[2], "snooze"), map[string]string{"until": until.Format(time.RFC3339)}, &ms)
		if ms.SnoozedUntil == nil || !ms.SnoozedUntil.Equal(until) || ms.Done {
			t.Fatalf("snooze: %+v", ms)
		}
		if r := aliceLogin.Run(refs[2]); r.SnoozedUntil == nil {
			t.Fatal("alice's login does not see her snooze")
		}
		if r := bob.Run(refs[2]); r.SnoozedUntil != nil {
			t.Fatal("bob sees alice's snooze")
		}
		// R-SNZ-3: a second POST moves it.
		later := until.Add(time.Hour)
		alice.Must(http.StatusOK, http.MethodPost, runURL(refs[2], "snooze"), map[string]string{"until": later.Format(time.RFC3339)}, &ms)
		if !ms.SnoozedUntil.Equal(later) {
			t.Fatalf("moved snooze: %+v", ms)
		}
		clock.Advance(3 * time.Hour)
		if r := alice.Run(refs[2]); r.SnoozedUntil != nil {
			t.Fatalf("snooze still shown after until passed: %v", r.SnoozedUntil)
		}
		alice.Must(http.StatusOK, http.MethodDelete, runURL(refs[2], "snooze"), nil, &ms) // R-SNZ-7
		alice.Must(http.StatusOK, http.MethodDelete, runURL(refs[2], "snooze"), nil, &ms)

		// Done (R-DONE-1..5): idempotent, independent of a snooze.
		alice.Must(http.StatusOK, http.MethodPost, runURL(refs[3], "snooze"), map[string]string{"until": clock.Now().Add(time.Hour).Format(time.RFC3339)}, nil)
		for range 2 {
			alice.Must(http.StatusOK, http.MethodPost, runURL(refs[3], "done"), nil, &ms)
			if !ms.Done || ms.SnoozedUntil == nil {
				t.Fatalf("done: %+v, want done with the snooze kept", ms)
			}
		}
		if r := bob.Run(refs[3]); r.Done {
			t.Fatal("bob sees alice's done mark")
		}
		alice.Must(http.StatusOK, http.MethodDelete, runURL(refs[3], "done"), nil, &ms)
		if ms.Done {
			t.Fatalf("undone: %+v", ms)
		}

		// Name (R-NAME-1..7).
		for _, body := range []any{
			map[string]string{"name": "zero\u200bwidth"},
			map[string]string{"name": "bidi\u202eoverride"},
			map[string]string{"name": "line\u2028sep"},
			map[string]string{"name": "tab\there"},
			map[string]string{"name": strings.Repeat("é", 201)},
			map[string]any{},
		} {
			if got := f.operator.Call(http.MethodPut, runURL(ref, "name"), body); got.Status != http.StatusBadRequest {
				t.Fatalf("rename %v: %d %s, want 400", body, got.Status, got.Body)
			}
		}
		if got := bob.Call(http.MethodPut, runURL(ref, "name"), map[string]string{"name": "x"}); got.Status != http.StatusForbidden {
			t.Fatalf("viewer rename: %d, want 403", got.Status)
		}
		var named apitypes.Run
		f.operator.Must(http.StatusOK, http.MethodPut, runURL(ref, "name"), map[string]string{"name": "  " + strings.Repeat("é", 200) + "\n"}, &named)
		if named.Name != strings.Repeat("é", 200) {
			t.Fatalf("name not trimmed: %q", named.Name)
		}
		f.operator.Must(http.StatusOK, http.MethodPut, runURL(ref, "name"), map[string]string{"name": "fix the flaky test"}, &named)
		f.operator.Must(http.StatusOK, http.MethodPut, runURL(ref, "name"), map[string]string{"name": "fix the flaky test "}, nil)
		if r := bob.Run(ref); r.Name != "fix the flaky test" { // R-NAME-4
			t.Fatalf("bob sees name %q", r.Name)
		}
		renamed := audit(t, alice, "event=sessions.run.renamed&run_ref="+ref)
		if len(renamed) != 2 {
			t.Fatalf("renamed entries: %d, want 2 (the same name logs nothing, R-NAME-6)", len(renamed))
		}
		for _, e := range renamed {
			if strings.Contains(string(e.Detail), "flaky") || e.Target.RunRef != ref {
				t.Fatalf("a renamed entry holds the name or misses the ref: %+v (R-NAME-5)", e)
			}
		}
		f.operator.Must(http.StatusOK, http.MethodPut, runURL(refs[4], "name"), map[string]string{"name": "temporary"}, nil)
		var cleared apitypes.Run
		f.operator.Must(http.StatusOK, http.MethodPut, runURL(refs[4], "name"), map[string]string{"name": " "}, &cleared)
		if cleared.Name != "" || f.viewer.Run(refs[4]).Name != "" { // R-NAME-2
			t.Fatalf("empty name did not clear: %q", cleared.Name)
		}

		// Archive (R-ARC-1..6): for everybody, idempotent, audited once, not
		// stopping the run and still listed.
		var a1, a2 apitypes.Run
		f.operator.Must(http.StatusOK, http.MethodPost, runURL(refs[5], "archive"), nil, &a1)
		clock.Advance(time.Minute)
		f.operator.Must(http.StatusOK, http.MethodPost, runURL(refs[5], "archive"), nil, &a2)
		if a1.ArchivedAt == nil || !a1.ArchivedAt.Equal(*a2.ArchivedAt) {
			t.Fatalf("archived_at %v then %v", a1.ArchivedAt, a2.ArchivedAt)
		}
		if !apitypes.Live(a2.State) {
			t.Fatalf("archive stopped the run: %s", a2.State)
		}
		if r := bob.Run(refs[5]); r.ArchivedAt == nil {
			t.Fatal("bob does not see the archive mark (R-ARC-3)")
		}
		if r, ok := rowOf(list(t, bob, "limit=200"), refs[5]); !ok || r.ArchivedAt == nil {
			t.Fatal("GET /runs hides or unmarks the archived run (R-ARC-4)")
		}
		if n := len(audit(t, alice, "event=sessions.run.archived")); n != 1 {
			t.Fatalf("archived entries: %d, want 1", n)
		}
		var a3 apitypes.Run
		f.operator.Must(http.StatusOK, http.MethodDelete, runURL(refs[5], "archive"), nil, nil)
		f.operator.Must(http.StatusOK, http.MethodDelete, runURL(refs[5], "archive"), nil, &a3)
		if a3.ArchivedAt != nil || len(audit(t, alice, "event=sessions.run.unarchived")) != 1 {
			t.Fatalf("unarchive: %+v", a3.ArchivedAt)
		}

		// Marks survive a coordinator restart.
		f.env.RestartCoordinator()
		f.agent.AwaitConnected(wait)
		if r := aliceLogin.Run(refs[1]); !r.Pinned || r.Name != "" {
			t.Fatalf("after restart: %+v", r)
		}
		if r := aliceToken.Run(refs[1]); !r.Done {
			t.Fatal("after restart: the token's done mark is gone")
		}
		if r := bob.Run(ref); !r.Pinned || r.Name != "fix the flaky test" {
			t.Fatalf("after restart: bob's pin or the name is gone: %+v", r)
		}

		// 404 for an unknown run and for another tenant's (R-TEN-3), 403
		// for what the role lacks.
		otherTok := f.env.Principal("other", store.RoleAdmin, store.KindHuman)
		other := f.env.Client(otherTok)
		other.Tenant = "other"
		for _, c := range []struct {
			method, action string
			body           any
		}{
			{"POST", "pin", nil}, {"DELETE", "pin", nil}, {"POST", "snooze", map[string]string{"until": clock.Now().Add(time.Hour).Format(time.RFC3339)}},
			{"DELETE", "snooze", nil}, {"POST", "done", nil}, {"DELETE", "done", nil}, {"PUT", "name", map[string]string{"name": "x"}},
			{"POST", "archive", nil}, {"DELETE", "archive", nil}, {"POST", "cleanup", nil}, {"DELETE", "", nil},
		} {
			path := runURL(ref, c.action)
			if c.action == "" {
				path = runURL(ref)
			}
			if got := other.Call(c.method, path, c.body); got.Status != http.StatusNotFound {
				t.Fatalf("another tenant %s %s: %d, want 404", c.method, path, got.Status)
			}
			missing := strings.Replace(path, ref, "run_0000000000000000", 1)
			if got := alice.Call(c.method, missing, c.body); got.Status != http.StatusNotFound {
				t.Fatalf("unknown run %s %s: %d, want 404", c.method, missing, got.Status)
			}
		}
		for _, c := range []struct {
			cl             *integration.Client
			method, action string
		}{
			{bob, "POST", "cleanup"}, {f.operator, "POST", "cleanup"}, {f.operator, "DELETE", ""}, {bob, "POST", "archive"},
		} {
			path := runURL(ref, c.action)
			if c.action == "" {
				path = runURL(ref)
			}
			if got := c.cl.Call(c.method, path, nil); got.Status != http.StatusForbidden {
				t.Fatalf("%s %s without the permission: %d, want 403", c.method, path, got.Status)
			}
		}
		if got := f.operator.Call(http.MethodGet, "/v1/audit", nil); got.Status != http.StatusForbidden {
			t.Fatalf("audit as operator: %d, want 403", got.Status)
		}
		if got := alice.Call(http.MethodPost, runURL(ref, "pin"), map[string]int{"x": 1}); got.Status != http.StatusBadRequest {
			t.Fatalf("pin with a body field: %d, want 400 (R-API-7)", got.Status)
		}

		// Release and delete (R-CLN-7, R-CLN-8, R-DEL-1..5). A live run
		// cannot be cleaned; delete needs a released run.
		if got := alice.Call(http.MethodPost, runURL(ref, "cleanup"), nil); got.Status != http.StatusConflict {
			t.Fatalf("cleanup of a live run: %d %s, want 409", got.Status, got.Body)
		}
		if got := alice.Call(http.MethodDelete, runURL(ref), nil); got.Status != http.StatusConflict ||
			!strings.Contains(string(got.Body), "session must be cleaned before delete (state=") {
			t.Fatalf("delete of a live run: %d %s", got.Status, got.Body)
		}
		f.post(f.operator, http.StatusOK, ref, "stop", nil, nil)
		got := alice.Call(http.MethodDelete, runURL(ref), nil)
		if got.Status != http.StatusConflict || !strings.Contains(string(got.Body), "session must be cleaned before delete (state=stopped)") {
			t.Fatalf("delete of a stopped run: %d %s (R-DEL-2)", got.Status, got.Body)
		}
		bob.Must(http.StatusOK, http.MethodPost, runURL(ref, "done"), nil, nil)
		bob.Must(http.StatusOK, http.MethodPost, runURL(ref, "snooze"), map[string]string{"until": clock.Now().Add(time.Hour).Format(time.RFC3339)}, nil)
		alice.Must(http.StatusOK, http.MethodPost, runURL(ref, "pin"), nil, nil)
		var rel apitypes.Run
		alice.Must(http.StatusOK, http.MethodPost, runURL(ref, "cleanup"), []byte(`{"discard_worktree":"true"}`), &rel)
		if rel.State != apitypes.StateReleased || rel.Pinned {
			t.Fatalf("cleanup: %+v", rel)
		}
		alice.Must(http.StatusOK, http.MethodPost, runURL(ref, "cleanup"), []byte(`not json`), &rel) // R-CLN-8, R-CLN-2
		if n := countKind(f.viewer.Events(ref), "cleaned"); n != 1 {
			t.Fatalf("cleaned events: %d, want 1", n)
		}
		for _, c := range []*integration.Client{alice, aliceLogin, bob} {
			if r := c.Run(ref); r.Pinned || r.Done || r.SnoozedUntil != nil {
				t.Fatalf("marks survive the release: %+v", r)
			}
			for _, m := range []struct{ method, action string }{{"POST", "pin"}, {"DELETE", "pin"}, {"POST", "done"}, {"DELETE", "done"}, {"DELETE", "snooze"}} {
				if got := c.Call(m.method, runURL(ref, m.action), nil); got.Status != http.StatusConflict {
					t.Fatalf("%s %s on a released run: %d, want 409", m.method, m.action, got.Status)
				}
			}
			if got := c.Call(http.MethodPost, runURL(ref, "snooze"), map[string]string{"until": clock.Now().Add(time.Hour).Format(time.RFC3339)}); got.Status != http.StatusConflict {
				t.Fatalf("snooze on a released run: %d, want 409", got.Status)
			}
		}
		if got := f.operator.Call(http.MethodPost, runURL(ref, "resume"), nil); got.Status != http.StatusConflict {
			t.Fatalf("resume of a released run: %d, want 409 (R-RES-6)", got.Status)
		}
		alice.Must(http.StatusNoContent, http.MethodDelete, runURL(ref), nil, nil)
		if got := alice.Call(http.MethodDelete, runURL(ref), nil); got.Status != http.StatusNotFound {
			t.Fatalf("second delete: %d, want 404 (R-DEL-5)", got.Status)
		}
		if got := alice.Call(http.MethodGet, runURL(ref), nil); got.Status != http.StatusNotFound {
			t.Fatalf("GET after delete: %d, want 404", got.Status)
		}
		if _, ok := rowOf(list(t, alice, "limit=200"), ref); ok {
			t.Fatal("the deleted run is still listed")
		}
		deleted := audit(t, alice, "event=sessions.run.deleted")
		if len(deleted) != 1 || deleted[0].Target.RunRef != ref || deleted[0].Actor.PrincipalID != aliceID || deleted[0].Actor.Kind != apitypes.ActorHuman {
			t.Fatalf("deleted entry: %+v", deleted)
		}
		// The node forgot it too: a full push after a restart of the agent
		// does not bring it back.
		f.agent.Kill()
		f.agent.Start()
		f.agent.AwaitConnected(wait)
		if got := alice.Call(http.MethodGet, runURL(ref), nil); got.Status != http.StatusNotFound {
			t.Fatalf("GET after an agent restart: %d, want 404", got.Status)
		}
		if got := bob.Call(http.MethodGet, "/v1/audit", nil); got.Status != http.StatusForbidden {
			t.Fatalf("audit as viewer: %d", got.Status)
		}
		// The API token's audit rows say "token".
		aliceToken.Must(http.StatusOK, http.MethodPost, runURL(refs[6], "archive"), nil, nil)
		byToken := audit(t, alice, "event=sessions.run.archived&run_ref="+refs[6])
		if len(byToken) != 1 || byToken[0].Actor.Kind != apitypes.ActorToken {
			t.Fatalf("archive by an API token: %+v", byToken)
		}
	})
}

func countPinned(rs []apitypes.Run) int {
	n := 0
	for _, r := range rs {
		if r.Pinned {
			n++
		}
	}
	return n
}

func countKind(evs []apitypes.Event, kind string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// The audit ledger is tamper-evident (R-AUD-4): `olivares audit verify` walks the
// chain on the client and names the first entry that was changed in the
// coordinator's file.
func TestAuditVerifyDetectsTampering(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{})
	p := f.profile("codex")
	mine := map[string]bool{}
	for range 3 {
		r := f.launch(p)
		mine[r.RunRef] = true
		f.admin.Must(http.StatusOK, http.MethodPut, runURL(r.RunRef, "name"), map[string]string{"name": "n"}, nil)
		f.admin.Must(http.StatusOK, http.MethodPost, runURL(r.RunRef, "archive"), nil, nil)
	}
	bin := integration.Binaries(t)
	cfgDir := t.TempDir()
	cli := func(args ...string) (string, int) {
		cmd := exec.Command(filepath.Join(bin, "olivares"), args...)
		cmd.Env = append(os.Environ(), "OLIVARES_CONFIG_DIR="+cfgDir)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := cli("login", "--url", f.env.CheckedURL(), "--token", f.env.AdminToken, "--tenant", integration.Tenant); code != 0 {
		t.Fatalf("login: %d %s", code, out)
	}
	// The ledger as the API lists it: the renames and archives this test
	// made, among the security events of R-AUD-6 (the node's enrolment,
	// the profile, the launches, the login) that come with them.
	var all apitypes.AuditList
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/audit?limit=500", nil, &all)
	if all.Next != "" {
		t.Fatalf("the ledger holds more than a page: %d entries and a next cursor", len(all.Items))
	}
	var archives []apitypes.AuditEntry
	renamed := 0
	for _, e := range all.Items {
		switch {
		case e.Event == apitypes.AuditRunRenamed && mine[e.Target.RunRef]:
			renamed++
		case e.Event == apitypes.AuditRunArchived && mine[e.Target.RunRef]:
			archives = append(archives, e)
		}
	}
	if renamed != 3 || len(archives) != 3 {
		t.Fatalf("the ledger has %d renames and %d archives of the test's runs, want 3 and 3: %+v", renamed, len(archives), all.Items)
	}
	out, code := cli("audit", "verify", "--json")
	var res struct {
		OK      bool   `json:"ok"`
		Entries int    `json:"entries"`
		Head    string `json:"head"`
	}
	// verify reads the whole ledger: every entry the API lists, up to the
	// last one's hash.
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || !res.OK || res.Entries != len(all.Items) || res.Head != all.Items[len(all.Items)-1].Hash {
		t.Fatalf("verify of an intact ledger: exit %d %s, want ok, %d entries and head %s", code, out, len(all.Items), all.Items[len(all.Items)-1].Hash)
	}
	out, code = cli("audit", "list", "--event", apitypes.AuditRunArchived, "--json")
	var listed apitypes.AuditList
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed.Items) != len(archives) {
		t.Fatalf("audit list --event: exit %d %s, want the %d archives", code, out, len(archives))
	}
	for i, e := range listed.Items {
		if e.Event != apitypes.AuditRunArchived || e.Seq != archives[i].Seq {
			t.Errorf("audit list --event, entry %d: %s seq %d, want %s seq %d", i, e.Event, e.Seq, apitypes.AuditRunArchived, archives[i].Seq)
		}
	}

	// Edit the first archive in the coordinator's bbolt file while it is
	// down: its target now names another run.
	forged := archives[0].Seq
	f.env.RestartCoordinatorWith(func(stateDir string) {
		db, err := bbolt.Open(filepath.Join(stateDir, coordd.StoreFile), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		err = db.Update(func(tx *bbolt.Tx) error {
			b := tx.Bucket([]byte("audit"))
			c := b.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				var e map[string]any
				if err := json.Unmarshal(v, &e); err != nil {
					return err
				}
				if e["tenant"] != integration.Tenant || e["seq"] != float64(forged) {
					continue
				}
				e["target"] = map[string]string{"run_ref": "run_forged"}
				nv, _ := json.Marshal(e)
				return b.Put(slices.Clone(k), nv)
			}
			return fmt.Errorf("no audit entry %d", forged)
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	f.agent.AwaitConnected(wait)
	out, code = cli("audit", "verify")
	if code != 1 || !strings.Contains(out, fmt.Sprintf("BROKEN at seq %d", forged)) {
		t.Fatalf("verify of a tampered ledger: exit %d %s", code, out)
	}
}
