package journeys

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// J07's handoff (R-HOF-1..20) through the stack with the fakecli peers: the
// preview of a Codex session, a handoff to Claude Code while the source
// runs (stopped first), the refusals in R-HOF-18's order, a target held
// for approval and a first turn that does not get through.
func TestJ07Handoff(t *testing.T) {
	f := setup(t, "quic", integration.ProcOptions{})
	codex := f.profile("codex")
	src := f.launch(codex)
	s := f.viewer.Attach(src.RunRef, "")
	f.post(f.operator, http.StatusAccepted, src.RunRef, "input", integration.Text("write the parser for the config"), nil)
	s.UntilOutput("pong: write the parser", wait)
	f.operator.AwaitRun(src.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ConversationID != "" })

	// Preview (R-HOP-1, R-HOP-2, R-HOF-7): read as it is, audited each time.
	var pv apitypes.HandoffPreview
	for range 2 {
		f.viewer.Must(http.StatusOK, http.MethodGet, runURL(src.RunRef, "handoff"), nil, &pv)
	}
	if pv.SourceDriver != "codex" || pv.Turns < 2 || pv.TranscriptBytes == 0 || !strings.Contains(pv.Summary, "write the parser for the config") {
		t.Fatalf("preview: %+v", pv)
	}
	if n := len(audit(t, f.admin, "event="+apitypes.AuditRunHandoffPreview+"&run_ref="+src.RunRef)); n != 2 {
		t.Fatalf("handoff_preview audit entries: %d, want 2", n)
	}
	if now := f.viewer.Run(src.RunRef); !apitypes.Live(now.State) {
		t.Fatalf("the preview stopped the session: %s", now.State)
	}

	// Target refusals come before anything else (R-HOF-18).
	if got := f.operator.Call(http.MethodPost, runURL(src.RunRef, "handoff"), apitypes.HandoffRequest{ProviderProfileRef: "prof_0000000000000000"}); got.Status != http.StatusNotFound {
		t.Fatalf("unknown target: %d", got.Status)
	}
	if got := f.viewer.Call(http.MethodPost, runURL(src.RunRef, "handoff"), apitypes.HandoffRequest{ProviderProfileRef: codex.Ref}); got.Status != http.StatusForbidden {
		t.Fatalf("viewer POST: %d", got.Status)
	}

	// The handoff to Claude Code while the source runs: stopped first, the
	// transcript written under the target's config home, the first turn
	// delivered (R-HOF-4, R-HOF-8..13).
	claude := f.profile("claude")
	var res apitypes.HandoffResponse
	got := f.operator.Call(http.MethodPost, runURL(src.RunRef, "handoff"), apitypes.HandoffRequest{ProviderProfileRef: claude.Ref, Name: "continued in claude"})
	if got.Status != http.StatusCreated {
		t.Fatalf("handoff: %d %s", got.Status, got.Body)
	}
	got.JSON(t, &res)
	if res.SummaryState != "delivered" || res.FirstTurn != "" || res.HandoffOf != src.RunRef || res.ProviderProfileRef != claude.Ref || res.Name != "continued in claude" || res.WorkspaceRef != f.ws.Ref {
		t.Fatalf("handoff response: %+v", res)
	}
	if now := f.viewer.Run(src.RunRef); now.State != apitypes.StateStopped {
		t.Fatalf("the source is %s after the handoff, want stopped", now.State)
	}
	if kinds := integration.Kinds(f.viewer.Events(src.RunRef)); kinds[len(kinds)-1] != "handed_off" {
		t.Fatalf("source events: %v", kinds)
	}
	transcript := filepath.Join(claude.Home, ".claude", "olivares-handoffs", res.RunRef+".md")
	body, err := os.ReadFile(transcript)
	if err != nil || !strings.Contains(string(body), "write the parser for the config") {
		t.Fatalf("transcript %s: %v %q", transcript, err, body)
	}
	ns := f.viewer.Attach(res.RunRef, "from=0")
	ns.UntilOutput(transcript, wait) // the peer echoes the first turn, which names the transcript
	f.post(f.operator, http.StatusOK, res.RunRef, "stop", nil, nil)

	// A Grok source is 422 (R-HOF-1); a tainted source is 409 while it
	// still runs, refused before any stop (R-HOF-5, R-HOF-14). Refusals
	// write nothing in the target home.
	claudeBefore := homeTree(t, claude.Home)
	grok := f.launch(f.profile("grok"))
	f.post(f.operator, http.StatusAccepted, grok.RunRef, "input", integration.Text("hi"), nil)
	f.operator.AwaitRun(grok.RunRef, wait, "a conversation", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ConversationID != "" })
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if got := f.operator.Call(m, runURL(grok.RunRef, "handoff"), apitypes.HandoffRequest{ProviderProfileRef: claude.Ref}); got.Status != http.StatusUnprocessableEntity {
			t.Fatalf("%s handoff of a grok run: %d %s", m, got.Status, got.Body)
		}
	}
	v := "tok"
	var sec apitypes.Secret
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/vault/secrets", apitypes.SecretCreate{Name: "k", Value: &v}, &sec)
	var tainted apitypes.Run
	f.operator.Must(http.StatusCreated, http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: codex.Ref, WorkspaceRef: f.ws.Ref,
		Grants: []apitypes.Grant{{Kind: apitypes.GrantVaultSecret, SecretRef: sec.Ref, Env: "TOKEN"}}}, &tainted)
	f.post(f.operator, http.StatusAccepted, tainted.RunRef, "input", integration.Text("hi"), nil)
	f.operator.AwaitRun(tainted.RunRef, wait, "a conversation", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ConversationID != "" })
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if got := f.operator.Call(m, runURL(tainted.RunRef, "handoff"), apitypes.HandoffRequest{ProviderProfileRef: claude.Ref}); got.Status != http.StatusConflict || got.ErrorCode() != "tainted" {
			t.Fatalf("%s handoff of a tainted run: %d %s", m, got.Status, got.Body)
		}
	}
	if now := f.viewer.Run(tainted.RunRef); !apitypes.Live(now.State) {
		t.Fatalf("a refused handoff stopped the tainted source: %s", now.State)
	}
	if after := homeTree(t, claude.Home); len(after) != len(claudeBefore) {
		t.Fatalf("refused handoffs wrote into the target home: %d files, was %d", len(after), len(claudeBefore))
	} else {
		for k, v := range claudeBefore {
			if after[k] != v {
				t.Fatalf("refused handoffs changed %s in the target home", k)
			}
		}
	}
	// A run that never started a conversation is 409 (R-HOF-2).
	fresh := f.launch(codex)
	if got := f.viewer.Call(http.MethodGet, runURL(fresh.RunRef, "handoff"), nil); got.Status != http.StatusConflict {
		t.Fatalf("preview of a run without a conversation: %d", got.Status)
	}

	// A target held for approval: 202, no first turn sent (R-HOF-12).
	var held apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "claude", Name: "held",
		Home: filepath.Join(t.TempDir(), "home"), LaunchRequiresApproval: true}, &held)
	f.post(f.operator, http.StatusOK, src.RunRef, "resume", nil, nil)
	got = f.operator.Call(http.MethodPost, runURL(src.RunRef, "handoff"), apitypes.HandoffRequest{ProviderProfileRef: held.Ref})
	res = apitypes.HandoffResponse{}
	got.JSON(t, &res)
	if got.Status != http.StatusAccepted || res.SummaryState != "waits_for_approval" || res.State != apitypes.StatePendingApproval || !strings.Contains(res.FirstTurn, "olivares-handoffs") {
		t.Fatalf("handoff to a held profile: %d %s", got.Status, got.Body)
	}

	// A tool that ends before starting the first turn: not_delivered, with
	// the first turn to send (R-HOF-12, R-HOF-13).
	bin := t.TempDir()
	os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	var dropper apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{NodeID: f.agent.ID, Tool: "claude", Name: "dropper",
		Home: filepath.Join(t.TempDir(), "home"), Env: map[string]string{"PATH": bin + ":/usr/bin:/bin"}}, &dropper)
	got = f.operator.Call(http.MethodPost, runURL(src.RunRef, "handoff"), apitypes.HandoffRequest{ProviderProfileRef: dropper.Ref})
	res = apitypes.HandoffResponse{}
	got.JSON(t, &res)
	if got.Status != http.StatusCreated || res.SummaryState != "not_delivered" || !strings.Contains(res.FirstTurn, filepath.Join(dropper.Home, ".claude", "olivares-handoffs")) {
		t.Fatalf("handoff to a tool that drops the first turn: %d %s", got.Status, got.Body)
	}
	for _, r := range []string{tainted.RunRef, grok.RunRef, fresh.RunRef} {
		f.post(f.operator, http.StatusOK, r, "stop", nil, nil)
	}
}

// R-HOF-1, R-HOF-8..13 for the ACP tools: a Gemini CLI session and an
// OpenCode session (fakecli, writing their native records) preview and
// hand off to Claude Code, the conversation read from the source tool's
// own files (Gemini's chat log, OpenCode's export).
func TestHandoffFromGeminiAndOpenCode(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{})
	claude := f.profile("claude")
	for _, tool := range []string{"gemini", "opencode"} {
		src := f.launch(f.profile(tool))
		s := f.viewer.Attach(src.RunRef, "")
		f.post(f.operator, http.StatusAccepted, src.RunRef, "input", integration.Text("port the lexer to "+tool), nil)
		s.UntilOutput("pong: port the lexer", wait)
		s.Close()
		f.operator.AwaitRun(src.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ConversationID != "" })
		var pv apitypes.HandoffPreview
		f.viewer.Must(http.StatusOK, http.MethodGet, runURL(src.RunRef, "handoff"), nil, &pv)
		if pv.SourceDriver != tool || pv.Turns < 2 || !strings.Contains(pv.Summary, "port the lexer to "+tool) {
			t.Fatalf("%s preview: %+v", tool, pv)
		}
		var res apitypes.HandoffResponse
		got := f.operator.Call(http.MethodPost, runURL(src.RunRef, "handoff"), apitypes.HandoffRequest{ProviderProfileRef: claude.Ref})
		if got.Status != http.StatusCreated {
			t.Fatalf("%s handoff: %d %s", tool, got.Status, got.Body)
		}
		got.JSON(t, &res)
		if res.SummaryState != "delivered" || res.HandoffOf != src.RunRef {
			t.Fatalf("%s handoff: %+v", tool, res)
		}
		body, err := os.ReadFile(filepath.Join(claude.Home, ".claude", "olivares-handoffs", res.RunRef+".md"))
		if err != nil || !strings.Contains(string(body), "pong: port the lexer to "+tool) {
			t.Fatalf("%s transcript: %v %q", tool, err, body)
		}
		if now := f.viewer.Run(src.RunRef); now.State != apitypes.StateStopped {
			t.Fatalf("%s source is %s after the handoff", tool, now.State)
		}
		f.post(f.operator, http.StatusOK, res.RunRef, "stop", nil, nil)
	}
}
