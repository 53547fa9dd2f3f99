package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/shared/localsock"
)

// The hook fails closed (exit 2) without its environment or its agent, and
// turns the agent's allow or deny into Claude Code's hook output; a pass
// prints nothing, so Claude Code's own permission rules decide.
func TestHookCommand(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a.sock")
	ln, err := localsock.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	var got Request
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Path, func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&got)
		if got.RunRef == "run_deny" {
			localsock.WriteJSON(w, 200, Decision{Decision: "deny", Reason: "not Bash"})
			return
		}
		if got.RunRef == "run_allow" {
			localsock.WriteJSON(w, 200, Decision{Decision: Allow, Reason: "rule 1"})
			return
		}
		localsock.WriteJSON(w, 200, Decision{Decision: Pass})
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go localsock.Serve(ctx, ln, mux)

	env := func(run, s string) func(string) string {
		return func(k string) string { return map[string]string{EnvRun: run, EnvSocket: s}[k] }
	}
	input := `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}`
	cases := []struct {
		name      string
		getenv    func(string) string
		in        string
		code      int
		stdout    string
		stderrSub string
	}{
		{"no environment", env("", ""), input, 2, "", "is not set"},
		{"no agent", env("run_x", filepath.Join(t.TempDir(), "none.sock")), input, 2, "", "did not answer"},
		{"not JSON", env("run_x", sock), "tool", 2, "", "not one JSON object"},
		{"allow", env("run_allow", sock), input, 0, `"permissionDecision":"allow"`, ""},
		{"pass", env("run_pass", sock), input, 0, "", ""},
		{"deny", env("run_deny", sock), input, 0, `"permissionDecision":"deny"`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Main(strings.NewReader(tc.in), &out, &errOut, tc.getenv)
			if code != tc.code || !strings.Contains(out.String(), tc.stdout) || (tc.stdout == "" && out.Len() != 0) || !strings.Contains(errOut.String(), tc.stderrSub) {
				t.Fatalf("got exit %d stdout %q stderr %q; want %d, %q, %q", code, out.String(), errOut.String(), tc.code, tc.stdout, tc.stderrSub)
			}
		})
	}
	if got.RunRef != "run_deny" || !bytes.Contains(got.Input, []byte(`"tool_name":"Bash"`)) {
		t.Fatalf("the agent was asked %+v", got)
	}
}
