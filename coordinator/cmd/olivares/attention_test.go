package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-ATTN-5: session list --attention sends the filter (any when alone, the
// reason given as a word or after =), a bad reason is a usage error before
// any request, and the table has an ATTENTION column with a limit's reset.
func TestSessionListAttention(t *testing.T) {
	var got []string
	reset := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/m/sessions/runs":
			got = append(got, r.URL.Query().Get("attention"))
			lim, in := apitypes.AttentionLimited, apitypes.AttentionNeedsInput
			writeJSON(w, 200, apitypes.RunList{Items: []apitypes.Run{
				{RunRef: "run_l", State: "failed", NodeID: "n1", Driver: "claude", Isolation: "native", ProviderProfileRef: "p",
					Limit: &apitypes.Limit{Kind: "usage", ResetsAt: &reset, AccountRef: "p"}, Attention: &lim},
				{RunRef: "run_i", State: "idle", NodeID: "n1", Driver: "claude", Isolation: "native", ProviderProfileRef: "p", Attention: &in},
				{RunRef: "run_r", State: "running", NodeID: "n1", Driver: "claude", Isolation: "native", ProviderProfileRef: "p"},
			}})
		case "/v1/m/sessions/profiles":
			writeJSON(w, 200, apitypes.ProfileList{Items: []apitypes.Profile{}})
		case "/v1/m/sessions/workspaces":
			writeJSON(w, 200, apitypes.WorkspaceList{Items: []apitypes.Workspace{}})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"session", "list"}, ""},
		{[]string{"session", "list", "--attention"}, "any"},
		{[]string{"session", "list", "--attention", "needs_input"}, "needs_input"},
		{[]string{"session", "list", "--attention=limited", "--limit", "3"}, "limited"},
		{[]string{"session", "list", "--limit", "3", "--attention"}, "any"},
	} {
		got = nil
		out, stderr, rc := cli(t, tc.args...)
		if rc != 0 || len(got) != 1 || got[0] != tc.want {
			t.Errorf("%v: exit %d, attention sent %q, want %q (%s)", tc.args, rc, got, tc.want, stderr)
			continue
		}
		lines := strings.Split(out, "\n")
		if !strings.Contains(lines[1], "ATTENTION") {
			t.Errorf("%v: header %q, want an ATTENTION column", tc.args, lines[1])
		}
		for _, want := range []string{"run_l", "limited until 2026-03-01", "run_i", "needs_input"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: the table lacks %q:\n%s", tc.args, want, out)
			}
		}
	}
	got = nil
	for _, args := range [][]string{
		{"session", "list", "--attention=bored"},
		{"session", "list", "--attention", "bored"}, // not a reason: an extra argument
	} {
		if _, stderr, rc := cli(t, args...); rc != 2 || stderr == "" {
			t.Errorf("%v: exit %d %q, want a usage error (2)", args, rc, stderr)
		}
	}
	if len(got) != 0 {
		t.Errorf("a usage error sent %d requests, want none", len(got))
	}
}
