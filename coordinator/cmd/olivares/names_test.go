package main

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Finding 9 of issue 21, R-CLI-5: every command that takes a profile,
// workspace or secret takes its name; an unknown name exits 4 like an
// unknown ref; --allow-workspace= allows any workspace again; --deny-tool
// adds, --allow-tool and --clear-denied-tools remove.
func TestNamesEverywhere(t *testing.T) {
	var patches []map[string]any
	var launches []apitypes.LaunchRequest
	var creates []apitypes.ProfileCreate
	denied := []string{"Bash"}
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/m/sessions/profiles":
			writeJSON(w, 200, apitypes.ProfileList{Items: []apitypes.Profile{{Ref: "prof_1", Name: "work", NodeID: "n1", Tool: "claude"}}})
		case "GET /v1/m/sessions/workspaces":
			writeJSON(w, 200, apitypes.WorkspaceList{Items: []apitypes.Workspace{{Ref: "ws_1", Name: "repo", NodeID: "n1"}, {Ref: "ws_2", Name: "docs", NodeID: "n1"}}})
		case "GET /v1/m/sessions/vault/secrets":
			writeJSON(w, 200, apitypes.SecretList{Items: []apitypes.Secret{{Ref: "sec_1", Name: "npm"}}})
		case "GET /v1/nodes":
			writeJSON(w, 200, apitypes.NodeList{Items: []apitypes.Node{{ID: "n1", Hostname: "box"}}})
		case "GET /v1/m/sessions/profiles/prof_1":
			writeJSON(w, 200, apitypes.Profile{Ref: "prof_1", Name: "work", Tool: "claude", DeniedTools: denied})
		case "GET /v1/m/sessions/profiles/prof_1/account":
			no := false
			writeJSON(w, 200, apitypes.ProfileAccount{ProfileRef: "prof_1", Tool: "claude", SignedIn: &no, RateLimits: []apitypes.RateWindow{},
				Message: "not signed in: no token, no key and no sign-in in the profile home"})
		case "PATCH /v1/m/sessions/profiles/prof_1":
			var m map[string]any
			json.Unmarshal(raw, &m)
			patches = append(patches, m)
			writeJSON(w, 200, apitypes.Profile{Ref: "prof_1", Name: "work", Tool: "claude"})
		case "POST /v1/m/sessions/profiles":
			var c apitypes.ProfileCreate
			json.Unmarshal(raw, &c)
			creates = append(creates, c)
			writeJSON(w, 201, apitypes.Profile{Ref: "prof_2", Name: c.Name, Tool: c.Tool})
		case "POST /v1/m/sessions/runs":
			var l apitypes.LaunchRequest
			json.Unmarshal(raw, &l)
			launches = append(launches, l)
			writeJSON(w, 201, apitypes.Run{RunRef: "run_1", State: "starting"})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			writeErr(w, 404, "not_found", "no such thing")
		}
	})
	// R-ACCT-9: show says whether the account is signed in, once, in the
	// column of the profile's other lines, and the command that signs it in.
	if out, stderr, code := cli(t, "profile", "show", "work"); code != 0 || !strings.Contains(out, "prof_1") ||
		!strings.Contains(out, "\naccount             not signed in: no token, no key and no sign-in in the profile home; run olivares profile login work\n") {
		t.Errorf("profile show NAME: exit %d %s %s", code, out, stderr)
	}
	for _, args := range [][]string{
		{"profile", "show", "nope"},
		{"profile", "update", "nope", "--active=false"},
		{"profile", "update", "work", "--allow-workspace", "nope"},
		{"session", "start", "--profile", "work", "--workspace", "nope"},
		{"session", "start", "--profile", "work", "--grant", "vault_secret:nope:TOKEN"},
		{"session", "list", "--profile", "nope"},
		{"vault", "delete", "nope"},
		{"profile", "add", "--tool", "claude", "--name", "x", "--node", "nope"},
	} {
		if _, stderr, code := cli(t, args...); code != 4 || !strings.Contains(stderr, `"nope"`) {
			t.Errorf("%q: exit %d, stderr %q, want 4 and the name", args, code, stderr)
		}
	}

	for _, args := range [][]string{
		{"--allow-workspace", "repo", "--allow-workspace", "ws_2"},
		{"--allow-workspace="},
		{"--deny-tool", "Write", "--deny-tool", "Bash"},
		{"--allow-tool", "Bash"},
		{"--clear-denied-tools", "--deny-tool", "Edit"},
	} {
		if _, stderr, code := cli(t, append([]string{"profile", "update", "work"}, args...)...); code != 0 {
			t.Fatalf("profile update %q: exit %d %s", args, code, stderr)
		}
	}
	want := []map[string]any{
		{"allowed_workspaces": []any{"ws_1", "ws_2"}},
		{"allowed_workspaces": []any{}},
		{"denied_tools": []any{"Bash", "Write"}},
		{"denied_tools": []any{}},
		{"denied_tools": []any{"Edit"}},
	}
	if !reflect.DeepEqual(patches, want) {
		t.Errorf("PATCH bodies %v, want %v", patches, want)
	}
	if _, _, code := cli(t, "profile", "update", "work"); code != 2 {
		t.Errorf("profile update with nothing to change: exit %d, want 2", code)
	}
	if _, _, code := cli(t, "profile", "update", "work", "--deny-tool", "X", "--allow-tool", "X"); code != 2 {
		t.Errorf("the same tool denied and allowed: exit %d, want 2", code)
	}

	if _, stderr, code := cli(t, "session", "start", "--profile", "work", "--workspace", "repo", "--grant", "vault_secret:npm:NPM_TOKEN:file"); code != 0 {
		t.Fatalf("start with names: exit %d %s", code, stderr)
	}
	wantL := apitypes.LaunchRequest{ProviderProfileRef: "prof_1", WorkspaceRef: "ws_1",
		Grants: []apitypes.Grant{{Kind: "vault_secret", SecretRef: "sec_1", Env: "NPM_TOKEN", AsFile: true}}}
	if len(launches) != 1 || !reflect.DeepEqual(launches[0], wantL) {
		t.Errorf("launch %+v, want %+v", launches, wantL)
	}
	if _, stderr, code := cli(t, "profile", "add", "--tool", "codex", "--name", "cx", "--node", "box", "--allow-workspace", "docs"); code != 0 {
		t.Fatalf("profile add by host name: exit %d %s", code, stderr)
	}
	if len(creates) != 1 || creates[0].NodeID != "n1" || !reflect.DeepEqual(creates[0].AllowedWorkspaces, []string{"ws_2"}) {
		t.Errorf("profile add %+v", creates)
	}
}
