package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/auditchain"
)

// The browser's hash chain (auditchain.js, WebCrypto) and the Go one
// (shared/auditchain) agree on the same rows (R-CON-4, R-AUD-4), as the API sends them: every
// hash, and the first broken link of a tampered chain with its reason.
// The rows hold what Go escapes in its own way (<, >, &, U+2028, control
// characters), non-ASCII text, nanosecond times, details with nesting,
// numbers and whitespace, and the optional fields left out.
func TestAuditChainJSAgreesWithGo(t *testing.T) {
	env := integration.NewEnv(t)
	tab := browser.New(t)
	tab.Navigate(env.APIURL() + "/signin")
	t0 := time.Date(2026, 5, 6, 7, 8, 9, 123400000, time.UTC)
	raw := []apitypes.AuditEntry{
		{At: t0, Tenant: "t1", Actor: apitypes.AuditActor{CredentialID: "cred_1", PrincipalID: "prn_1", Kind: apitypes.ActorHuman},
			Event: apitypes.AuditRunRenamed, Target: apitypes.AuditTarget{RunRef: "run_a"}},
		{At: t0.Add(time.Nanosecond), Tenant: "t1", Actor: apitypes.AuditActor{CredentialID: "cred_<2>&", Kind: apitypes.ActorToken},
			Event: apitypes.AuditWorkspaceApproveSetup, Target: apitypes.AuditTarget{WorkspaceRef: "ws_é😀"},
			Detail: json.RawMessage(`{ "sha256": "ab<cd>&ef", "n": 1.50, "big": 12345678901234567890, "e": 1e21, "nested": {"z": [1, "\u2028", null, true]}, "ctl": "a\u0001b\tc\\d\"e\/f" }`)},
		{At: t0.Add(time.Second), Tenant: "t1", Actor: apitypes.AuditActor{CredentialID: "cred_3", Kind: apitypes.ActorAgent},
			Event: apitypes.AuditRunDeleted, Target: apitypes.AuditTarget{RunRef: "run_\u2029b"}, Detail: json.RawMessage(`null`)},
		{At: t0.Add(90 * time.Minute), Tenant: "t1", Actor: apitypes.AuditActor{CredentialID: "cred_4\b\f", Kind: apitypes.ActorHuman},
			Event: "sessions.run.messages", Target: apitypes.AuditTarget{RunRef: "run_c", WorkspaceRef: "ws_d"}, Detail: json.RawMessage(`{"window":"15m","reads":[]}`)},
		// Every target field of the security actions (R-AUD-6).
		{At: t0.Add(91 * time.Minute), Tenant: "t1", Actor: apitypes.AuditActor{CredentialID: "admin-socket", Kind: apitypes.ActorOperator},
			Event: apitypes.AuditProfileDeleted, Target: apitypes.AuditTarget{RunRef: "run_e", WorkspaceRef: "ws_f", ProfileRef: "prof_g", NodeID: "node-h",
				PrincipalID: "prn_i", CredentialID: "cred_j", SecretRef: "sec_k", Tenant: "t1"}, Detail: json.RawMessage(`{"tool":"codex"}`)},
		{At: t0.Add(92 * time.Minute), Tenant: "t1", Actor: apitypes.AuditActor{CredentialID: "node-h", Kind: apitypes.ActorNode},
			Event: apitypes.AuditNodeEnrolled, Target: apitypes.AuditTarget{NodeID: "node-h", Tenant: "t1"}},
	}
	// And one whose target has every field of apitypes.AuditTarget set, so
	// that a field added there and not in auditchain.js fails here.
	var every apitypes.AuditTarget
	tv := reflect.ValueOf(&every).Elem()
	for i := range tv.NumField() {
		tv.Field(i).SetString(fmt.Sprintf("%s_<%d>", tv.Type().Field(i).Name, i))
	}
	raw = append(raw, apitypes.AuditEntry{At: t0.Add(5 * time.Hour), Tenant: "t1", Actor: apitypes.AuditActor{CredentialID: "cred_1", Kind: apitypes.ActorToken},
		Event: apitypes.AuditCredentialRevoked, Target: every})
	var chain []apitypes.AuditEntry
	prev := apitypes.AuditEntry{}
	for _, e := range raw {
		s, err := auditchain.Seal(prev, e)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, s)
		prev = s
	}
	// As the API writes them: echo's encoder (HTML-safe) over AuditList.
	body := func(items []apitypes.AuditEntry) string {
		var b bytes.Buffer
		if err := json.NewEncoder(&b).Encode(apitypes.AuditList{Items: items}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	jsHashes := browser.Eval[[]string](tab, fmt.Sprintf(`import('/assets/auditchain.js').then(async m => {
  const out = [];
  for (const e of m.parseRaw(%s).items) out.push(await m.hashOf(e));
  return out;
})`, js(body(chain))))
	for i, e := range chain {
		if i >= len(jsHashes) || jsHashes[i] != e.Hash {
			c, _ := auditchain.Canonical(e)
			js := browser.Eval[string](tab, fmt.Sprintf(`import('/assets/auditchain.js').then(m => m.canonical(m.parseRaw(%s).items[%d]))`, js(body(chain)), i))
			t.Fatalf("entry %d: JS hash %v, want Go's %s\nGo canonical: %s\nJS canonical: %s", e.Seq, jsHashes, e.Hash, c, js)
		}
	}

	type brk struct {
		Seq    uint64 `json:"seq"`
		Reason string `json:"reason"`
		Count  int    `json:"count"`
	}
	verifyJS := func(items []apitypes.AuditEntry) brk {
		return browser.Eval[brk](tab, fmt.Sprintf(`import('/assets/auditchain.js').then(async m => {
  const v = new m.Verifier();
  let b = null;
  for (const e of m.parseRaw(%s).items) { b = await v.add(e); if (b) break; }
  return { seq: b ? b.seq : 0, reason: b ? b.reason : '', count: v.count };
})`, js(body(items))))
	}
	verifyGo := func(items []apitypes.AuditEntry) brk {
		var v auditchain.Verifier
		for _, e := range items {
			if b := v.Add(e); b != nil {
				return brk{Seq: b.Seq, Reason: b.Reason, Count: v.Count()}
			}
		}
		return brk{Count: v.Count()}
	}
	for _, tc := range []struct {
		name   string
		tamper func([]apitypes.AuditEntry) []apitypes.AuditEntry
	}{
		{"whole", func(es []apitypes.AuditEntry) []apitypes.AuditEntry { return es }},
		{"a target changed", func(es []apitypes.AuditEntry) []apitypes.AuditEntry { es[2].Target.RunRef = "run_forged"; return es }},
		{"a node target changed", func(es []apitypes.AuditEntry) []apitypes.AuditEntry { es[4].Target.NodeID = "node-forged"; return es }},
		{"a detail changed", func(es []apitypes.AuditEntry) []apitypes.AuditEntry {
			es[1].Detail = json.RawMessage(`{"sha256":"forged"}`)
			return es
		}},
		{"an entry removed", func(es []apitypes.AuditEntry) []apitypes.AuditEntry { return slices.Delete(es, 1, 2) }},
		{"a time moved", func(es []apitypes.AuditEntry) []apitypes.AuditEntry {
			es[3].At = es[3].At.Add(time.Millisecond)
			return es
		}},
		{"resealed after a change", func(es []apitypes.AuditEntry) []apitypes.AuditEntry {
			es[0].Event = "sessions.run.archived"
			es[0].Hash, _ = auditchain.Hash(es[0])
			return es
		}},
	} {
		items := tc.tamper(slices.Clone(chain))
		got, want := verifyJS(items), verifyGo(items)
		if got != want {
			t.Errorf("%s: JS verifier %+v, Go verifier %+v", tc.name, got, want)
		}
	}
}

// The fleet from the browser: both nodes with their state, round trip,
// labels and CLIs; a node's page lists its own runs only (GET
// /runs?node_id=); an admin revokes the second node behind a
// confirmation. Then the audit ledger: filters, and "verify the chain",
// whole and then after an entry was changed in the coordinator's store.
func TestFleetRevokeAndAuditVerify(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	b := f.env.StartAgentProcess(integration.ProcOptions{})
	b.AwaitConnected(wait)
	codex := f.profile("codex", nil)
	ra := f.launch(f.admin, codex, "on node A")
	var wsB apitypes.Workspace
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/workspaces", apitypes.WorkspaceCreate{NodeID: b.ID, Path: t.TempDir(), Name: "on-b"}, &wsB)
	var pb apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: b.ID, Tool: "codex", Name: "codex-b", Home: filepath.Join(t.TempDir(), "home")}, &pb)
	var rb apitypes.Run
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/runs", apitypes.LaunchRequest{ProviderProfileRef: pb.Ref, WorkspaceRef: wsB.Ref, Name: "on node B"}, &rb)
	for _, name := range []string{"one", "two", "three"} {
		f.admin.Must(http.StatusOK, http.MethodPut, "/v1/m/sessions/runs/"+ra.RunRef+"/name", map[string]string{"name": name}, nil)
	}
	f.admin.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+ra.RunRef+"/archive", nil, nil)

	tab := f.signIn()
	f.open(tab, "/nodes")
	card := func(id string) string { return fmt.Sprintf(`#nodes [data-node=%s]`, js(id)) }
	tab.Await("both nodes connected, with their round trip", fmt.Sprintf(`[%s, %s].every(s => document.querySelector(s + ' [data-state=connected]') && document.querySelector(s + ' .rtt'))`, js(card(f.agent.ID)), js(card(b.ID))), wait)
	awaitText(tab, "the labels", card(b.ID), "test=true")
	tab.Click(card(f.agent.ID) + " a.title")
	tab.Await("node A's runs", fmt.Sprintf(`!!document.querySelector('#node-run-list [data-ref=%s]')`, js(ra.RunRef)), wait)
	if exists(tab, fmt.Sprintf(`#node-run-list [data-ref=%s]`, js(rb.RunRef))) {
		t.Fatal("node A's page lists a run of node B")
	}
	awaitText(tab, "the CLIs with their versions", "#node-clis", "codex")
	f.open(tab, "/nodes")
	tab.Click(card(b.ID) + " .act-revoke")
	awaitText(tab, "the confirmation names the node", "#revoke-dialog", b.ID)
	tab.Click("#revoke-confirm")
	tab.Await("node B revoked", fmt.Sprintf(`!!document.querySelector(%s + ' [data-state=revoked]')`, js(card(b.ID))), wait)
	var nb apitypes.Node
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/nodes/"+b.ID, nil, &nb)
	if nb.RevokedAt == nil {
		t.Fatalf("node B after the revoke: %+v", nb)
	}
	if exists(tab, card(f.agent.ID)+" [data-state=revoked]") {
		t.Fatal("node A was revoked too")
	}

	// The audit ledger: the page lists every entry the API does (the
	// security events of R-AUD-6 among them: the nodes' enrolment, the
	// sign-in, the revoke), and the filter finds the one archive this test
	// made, by the seq the API gives it.
	var all apitypes.AuditList
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/audit?limit=500", nil, &all)
	if all.Next != "" {
		t.Fatalf("the ledger holds more than a page: %d entries and a next cursor", len(all.Items))
	}
	var renamed, archived []apitypes.AuditEntry
	for _, e := range all.Items {
		switch {
		case e.Event == apitypes.AuditRunRenamed && e.Target.RunRef == ra.RunRef:
			renamed = append(renamed, e)
		case e.Event == apitypes.AuditRunArchived:
			archived = append(archived, e)
		}
	}
	if len(renamed) != 3 || len(archived) != 1 || archived[0].Target.RunRef != ra.RunRef {
		t.Fatalf("the ledger has %d renames of %s and %d archives, want 3 and its archive: %+v", len(renamed), ra.RunRef, len(archived), all.Items)
	}
	f.open(tab, "/audit")
	tab.Await("the entries", fmt.Sprintf(`document.querySelectorAll('#audit-rows tr[data-seq]').length === %d`, len(all.Items)), wait)
	// R-AUD-7: newest first, as the API's order=newest pages them, and
	// each detail as named fields, not raw JSON.
	var newest apitypes.AuditList
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/audit?limit=2&order=newest", nil, &newest)
	if len(newest.Items) != 2 || newest.Items[0].Seq != all.Items[len(all.Items)-1].Seq || newest.Items[1].Seq >= newest.Items[0].Seq || newest.Next == "" {
		t.Fatalf("order=newest: %+v", newest)
	}
	if got := browser.Eval[string](tab, `[...document.querySelectorAll('#audit-rows tr[data-seq]')].map(e => e.dataset.seq).join(',')`); !strings.HasPrefix(got, fmt.Sprintf("%d,%d,", newest.Items[0].Seq, newest.Items[1].Seq)) {
		t.Fatalf("the audit view's order %s, want newest first from %d", got, newest.Items[0].Seq)
	}
	withDetail := slices.IndexFunc(all.Items, func(e apitypes.AuditEntry) bool { return len(e.Detail) > 2 && e.Detail[0] == '{' })
	if withDetail < 0 {
		t.Fatal("no audit entry with a detail")
	}
	tab.Await("a detail as named fields", fmt.Sprintf(`!!document.querySelector('#audit-rows tr[data-seq="%d"] dl.detail dt')`, all.Items[withDetail].Seq), wait)
	if exists(tab, "#audit-rows code.detail") {
		t.Fatalf("a detail shown as raw JSON: %s", text(tab, "#audit-rows code.detail"))
	}
	selectValue(tab, "#audit-event", apitypes.AuditRunArchived)
	tab.Click("#audit-filter")
	tab.Await("the filtered entries", fmt.Sprintf(`document.querySelectorAll('#audit-rows tr[data-seq]').length === 1 && document.querySelector('#audit-rows tr[data-seq]').dataset.seq === '%d'`, archived[0].Seq), wait)
	// A security action (R-AUD-6) is offered too: the revoke this test did.
	var revoked []apitypes.AuditEntry
	for _, e := range all.Items {
		if e.Event == apitypes.AuditNodeRevoked {
			revoked = append(revoked, e)
		}
	}
	if len(revoked) != 1 || revoked[0].Target.NodeID != b.ID {
		t.Fatalf("the ledger's revokes: %+v, want node B's", revoked)
	}
	selectValue(tab, "#audit-event", apitypes.AuditNodeRevoked)
	tab.Click("#audit-filter")
	tab.Await("the revoke", fmt.Sprintf(`document.querySelectorAll('#audit-rows tr[data-seq]').length === 1 && document.querySelector('#audit-rows tr[data-seq]').dataset.seq === '%d'`, revoked[0].Seq), wait)
	tab.Click("#audit-verify")
	tab.Await("the chain verified in the browser", `!!document.querySelector('#audit-ok')`, wait)
	if got := text(tab, "#audit-head"); got != all.Items[len(all.Items)-1].Hash {
		t.Fatalf("head %q, want the last entry's hash", got)
	}

	// Change the second rename in the coordinator's bbolt file while it is
	// down: its target names another run.
	forged := renamed[1].Seq
	f.env.RestartCoordinatorWith(func(stateDir string) {
		db, err := bbolt.Open(filepath.Join(stateDir, coordd.StoreFile), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		err = db.Update(func(tx *bbolt.Tx) error {
			bk := tx.Bucket([]byte("audit"))
			c := bk.Cursor()
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
				return bk.Put(slices.Clone(k), nv)
			}
			return fmt.Errorf("no audit entry %d", forged)
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	f.agent.AwaitConnected(wait)
	f.open(tab, "/audit")
	tab.Await("the ledger", `!!document.querySelector('#audit-rows tr[data-seq]')`, wait)
	tab.Click("#audit-verify")
	tab.Await("the first broken link named", fmt.Sprintf(`document.querySelector('#audit-broken')?.dataset.seq === '%d'`, forged), wait)
	awaitText(tab, "why", "#audit-verdict", "was changed")
	tab.Await("the broken row marked", fmt.Sprintf(`document.querySelector('#audit-rows tr.broken')?.dataset.seq === '%d'`, forged), wait)
}
