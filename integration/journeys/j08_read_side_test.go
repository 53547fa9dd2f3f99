package journeys

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/transcript"
	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// J08 — boundaries, tenancy, taint and the read-side surfaces (Part 6):
// R-ED-2/3, R-AUTH-1..8, R-TEN-1..5, R-ACT-1..9, R-MSG-1..17,
// R-CRED-1..5, R-HW-1..6, through the coordinator, the tunnel and a real
// agent process whose tools are the fakecli peer.
func TestJ08BoundariesTenancyTaintReadSide(t *testing.T) {
	byTransport(t, func(t *testing.T, transport string) {
		clock := integration.NewClock(time.Now().UTC())
		f := setupEnv(t, transport, integration.Options{Now: clock.Now}, integration.ProcOptions{})
		claude := f.profile("claude")
		r := f.launch(claude)

		t.Run("boundaries", func(t *testing.T) { j08Boundaries(t, f, r.RunRef, claude.Ref) })
		t.Run("activity", func(t *testing.T) { j08ClaudeActivity(t, f, clock, r.RunRef) })
		t.Run("codex", func(t *testing.T) { j08CodexActivity(t, f) })
		t.Run("messages", func(t *testing.T) { j08Messages(t, f) })
		t.Run("taint", func(t *testing.T) { j08Taint(t, f) })
		t.Run("history_withheld", func(t *testing.T) { historyWithheld(t, f) })
	})
}

// requestIDMember is an error body's request_id member, the one part of two
// equal refusals that differs (R-OBS-4).
var requestIDMember = regexp.MustCompile(`,"request_id":"[A-Za-z0-9._:-]*"`)

// withoutRequestID is an error body without its request_id member.
func withoutRequestID(b []byte) string { return requestIDMember.ReplaceAllString(string(b), "") }

// pathParam is a route parameter in an echo path.
var pathParam = regexp.MustCompile(`:[a-z_]+`)

// j08Boundaries: the overlay prefix is the ordinary 404 (R-ED-2/3), every
// route refuses a credential without its permission (R-AUTH-8), and every
// run route hides another tenant's run (R-TEN-3).
func j08Boundaries(t *testing.T, f *fixture, ref, profileRef string) {
	unknown := f.operator.Call(http.MethodGet, "/v1/m/no-such-surface/x", nil)
	if unknown.Status != http.StatusNotFound || unknown.ErrorCode() != "not_found" {
		t.Fatalf("unknown path: %d %s", unknown.Status, unknown.Body)
	}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		got := f.operator.Call(m, "/v1/m/session-cockpit/x", nil)
		if got.Status != http.StatusNotFound || withoutRequestID(got.Body) != withoutRequestID(unknown.Body) {
			t.Errorf("%s /v1/m/session-cockpit/x: %d %s, want the unknown path's 404", m, got.Status, got.Body)
		}
	}

	// A credential of another tenant holds no permission in this one.
	nobody := f.env.Client(f.env.Principal("elsewhere", store.RoleAdmin, store.KindHuman))
	other := f.env.Client(f.env.Principal("other", store.RoleAdmin, store.KindHuman))
	other.Tenant = "other"
	runRoutes := 0
	for _, rt := range f.env.Coord.API.Routes() {
		path := strings.ReplaceAll(rt.Path, ":ref", ref)
		path = pathParam.ReplaceAllString(path, "x")
		if rt.Perm == "" {
			continue
		}
		// Every role grants sessions:run:read, so only a credential that is
		// no member of the tenant lacks it.
		c, code := nobody, "tenant_forbidden"
		if rt.Perm != auth.PermRunRead {
			c, code = f.viewer, "permission_denied"
		}
		if got := c.Call(rt.Method, path, nil); got.Status != http.StatusForbidden || got.ErrorCode() != code {
			t.Errorf("%s %s without %s: %d %s, want 403 %s", rt.Method, rt.Path, rt.Perm, got.Status, got.Body, code)
		}
		switch {
		case strings.Contains(rt.Path, "/runs/:ref"):
			runRoutes++
		case strings.Contains(rt.Path, "/workspaces/:ref"):
			path = strings.ReplaceAll(rt.Path, ":ref", f.ws.Ref)
		case strings.Contains(rt.Path, "/profiles/:ref"):
			path = strings.ReplaceAll(rt.Path, ":ref", profileRef)
		default:
			continue
		}
		if got := other.Call(rt.Method, path, nil); got.Status != http.StatusNotFound || got.ErrorCode() != "not_found" {
			t.Errorf("%s %s with another tenant's resource: %d %s, want 404 not_found", rt.Method, rt.Path, got.Status, got.Body)
		}
	}
	if runRoutes < 20 {
		t.Fatalf("only %d run routes swept", runRoutes)
	}
}

func activityOf(t *testing.T, c *integration.Client, ref string) apitypes.Activity {
	t.Helper()
	var a apitypes.Activity
	c.Must(http.StatusOK, http.MethodGet, runURL(ref, "activity"), nil, &a)
	return a
}

// follower waits for a claude run's turns on one attach stream, in order.
type follower struct {
	t   *testing.T
	f   *fixture
	ref string
	s   *integration.Stream
}

// follow attaches to ref from seq from.
func (f *fixture) follow(t *testing.T, ref string, from uint64) *follower {
	s := f.viewer.Attach(ref, fmt.Sprintf("from=%d", from))
	t.Cleanup(s.Close)
	return &follower{t: t, f: f, ref: ref, s: s}
}

// turn sends one message and waits for its result frame, then for the
// run to be idle.
func (fl *follower) turn(msg string) {
	fl.t.Helper()
	fl.f.post(fl.f.operator, http.StatusAccepted, fl.ref, "input", integration.Message(msg), nil)
	fl.s.UntilOutput(`"type":"result"`, wait)
	fl.f.operator.AwaitRun(fl.ref, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
}

// stop stops the run and returns the seq a follower of its next
// generation starts from.
func (f *fixture) stop(ref string) uint64 {
	f.t.Helper()
	var r apitypes.Run
	f.post(f.operator, http.StatusOK, ref, "stop", nil, &r)
	return r.RingLast + 1
}

// j08ClaudeActivity: every field from the fake Claude Code's transcript
// (R-ACT-1..3), context_percent = 100 × tokens / window (R-ACT-7, R-ACT-9)
// kept across a stop and cleared by a new launch, an ambiguous report
// nulls both, sub-agent turns (R-AGT-1..3), and the 15-minute audit window
// (R-ACT-8, R-AGT-2).
func j08ClaudeActivity(t *testing.T, f *fixture, clock *integration.Clock, ref string) {
	fl := f.follow(t, ref, 0)
	fl.turn("work")
	a := activityOf(t, f.operator, ref)
	if a.Model == nil || *a.Model != "claude-opus-5-5" {
		t.Errorf("model: %v", a.Model)
	}
	checkContext(t, "after work", a, 34000, true)
	if len(a.Agents) != 1 || a.Agents[0].Type != "Explore" || a.Agents[0].State != apitypes.WorkCompleted || a.Agents[0].Description != "find the tests" {
		t.Fatalf("agents: %s", mustJSON(a.Agents))
	}
	agentID := a.Agents[0].ID
	var cmd *apitypes.ActivityTask
	for i := range a.Tasks {
		if a.Tasks[i].Kind == apitypes.TaskCommand {
			cmd = &a.Tasks[i]
		}
	}
	if cmd == nil || cmd.Command != "go test ./..." || cmd.State != apitypes.WorkCompleted || cmd.ExitCode == nil || *cmd.ExitCode != 0 {
		t.Errorf("tasks: %s", mustJSON(a.Tasks))
	}
	if len(a.Todos) != 3 || a.Todos[0].Status != "completed" || a.Todos[1].Status != "in_progress" || a.Todos[2].Status != "pending" {
		t.Errorf("todos: %s", mustJSON(a.Todos))
	}
	if len(a.Files) != 1 || a.Files[0].Path != "notes.txt" || a.Files[0].Added != 2 || !a.Files[0].Created {
		t.Errorf("files: %s", mustJSON(a.Files))
	}
	if len(a.Skills) != 1 || a.Skills[0] != (apitypes.Skill{Name: "review", Uses: 1}) {
		t.Errorf("skills: %s", mustJSON(a.Skills))
	}
	foundMCP := false
	for _, m := range a.MCPServers {
		foundMCP = foundMCP || m.Name == "docs" && m.Calls == 1
	}
	if !foundMCP {
		t.Errorf("mcp_servers: %s", mustJSON(a.MCPServers))
	}
	raw := f.operator.Must(http.StatusOK, http.MethodGet, runURL(ref, "activity"), nil, nil)
	for _, field := range []string{"agents", "tasks", "files", "todos", "skills", "mcp_servers", "model", "context_tokens", "context_window", "context_percent", "compactions", "transcript"} {
		if !strings.Contains(string(raw.Body), `"`+field+`":`) {
			t.Errorf("activity lacks %q: %s", field, raw.Body)
		}
	}

	// Sub-agent turns: the prompt and the answer; an unknown agent is 404.
	var turns apitypes.SubAgentTurns
	f.operator.Must(http.StatusOK, http.MethodGet, runURL(ref, "activity", "agents", agentID), nil, &turns)
	if len(turns.Turns) != 2 || turns.Turns[0].Text != "List the test files." || turns.Turns[1].Text != "main_test.go and api_test.go" {
		t.Errorf("sub-agent turns: %s", mustJSON(turns))
	}
	if got := f.operator.Call(http.MethodGet, runURL(ref, "activity", "agents", "nobody"), nil); got.Status != http.StatusNotFound || got.ErrorCode() != "unknown_agent" {
		t.Errorf("unknown agent: %d %s", got.Status, got.Body)
	}

	// An ambiguous window report: the tokens stay, both figures go null.
	fl.turn("work ambiguous")
	checkContext(t, "ambiguous report", activityOf(t, f.operator, ref), 34000, false)
	fl.turn("work")
	checkContext(t, "a clear report again", activityOf(t, f.operator, ref), 34000, true)
	// Kept across a stop (R-ACT-7) ...
	next := f.stop(ref)
	checkContext(t, "stopped", activityOf(t, f.operator, ref), 34000, true)
	// ... and across an agent restart, from the run's record.
	f.agent.Kill()
	f.agent.Start()
	f.agent.AwaitConnected(wait)
	checkContext(t, "agent restarted", activityOf(t, f.operator, ref), 34000, true)
	// A new launch of the tool clears it until its first report.
	f.post(f.operator, http.StatusOK, ref, "resume", nil, nil)
	checkContext(t, "resumed", activityOf(t, f.operator, ref), 34000, false)
	fl = f.follow(t, ref, next)
	fl.turn("work")
	checkContext(t, "resumed, then a report", activityOf(t, f.operator, ref), 34000, true)

	// R-ACT-8: one audit row per reader, run and 15 minutes; R-AGT-2: a
	// sub-agent read is audited every time.
	reader := f.env.Client(f.env.Principal(integration.Tenant, store.RoleViewer, store.KindHuman))
	count := func(event string) int {
		return len(audit(t, f.admin, url.Values{"event": {event}, "run_ref": {ref}, "limit": {"500"}}.Encode()))
	}
	act0, agt0 := count(apitypes.AuditRunActivity), count(apitypes.AuditRunActivityAgent)
	activityOf(t, reader, ref)
	clock.Advance(14 * time.Minute)
	activityOf(t, reader, ref)
	if got := count(apitypes.AuditRunActivity); got != act0+1 {
		t.Errorf("two reads within 15 minutes: %d new audit rows, want 1", got-act0)
	}
	clock.Advance(time.Minute)
	activityOf(t, reader, ref)
	if got := count(apitypes.AuditRunActivity); got != act0+2 {
		t.Errorf("a read 15 minutes after the first: %d new audit rows, want 2", got-act0)
	}
	for range 2 {
		reader.Must(http.StatusOK, http.MethodGet, runURL(ref, "activity", "agents", agentID), nil, nil)
	}
	if got := count(apitypes.AuditRunActivityAgent); got != agt0+2 {
		t.Errorf("two sub-agent reads: %d audit rows, want 2", got-agt0)
	}
	f.post(f.operator, http.StatusOK, ref, "stop", nil, nil)
}

// checkContext asserts the context meter: tokens always, window and
// percent only for a matching, unambiguous report (R-ACT-7, R-ACT-9).
func checkContext(t *testing.T, when string, a apitypes.Activity, tokens int64, known bool) {
	t.Helper()
	if a.ContextTokens == nil || *a.ContextTokens != tokens {
		t.Errorf("%s: context_tokens %v, want %d", when, a.ContextTokens, tokens)
	}
	if !known {
		if a.ContextWindow != nil || a.ContextPercent != nil {
			t.Errorf("%s: context_window %v, context_percent %v, want both null", when, a.ContextWindow, a.ContextPercent)
		}
		return
	}
	want := float64(int(1000*float64(tokens)/1e6+0.5)) / 10 // 100 × tokens / window, one decimal
	if a.ContextWindow == nil || *a.ContextWindow != 1000000 || a.ContextPercent == nil || *a.ContextPercent != want {
		t.Errorf("%s: context_window %v, context_percent %v, want 1000000 and %.1f", when, a.ContextWindow, a.ContextPercent, want)
	}
}

// j08CodexActivity: Codex activity comes from the rollout on disk (R-ACT-2)
// and starts no process, even for a stopped run; Codex children have no
// transcript route (R-AGT-4).
func j08CodexActivity(t *testing.T, f *fixture) {
	p := f.profile("codex")
	r := f.launch(p)
	s := f.viewer.Attach(r.RunRef, "from=0")
	defer s.Close()
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Text("hello codex"), nil)
	s.UntilOutput(`"turn/completed"`, wait)
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
	starts := len(calls(t, p.Home))
	a := activityOf(t, f.operator, r.RunRef)
	if a.Model == nil || *a.Model != "fake-model" || a.ContextTokens == nil || *a.ContextTokens != 2 ||
		a.ContextWindow == nil || *a.ContextWindow != 258400 || a.ContextPercent == nil || *a.ContextPercent != 0 {
		t.Errorf("codex activity: %s", mustJSON(a))
	}
	var page apitypes.MessagesPage
	f.operator.Must(http.StatusOK, http.MethodGet, runURL(r.RunRef, "messages"), nil, &page)
	if page.Total != 1 || page.Items[0].FirstLine != "hello codex" {
		t.Errorf("codex messages: %s", mustJSON(page))
	}
	if got := len(calls(t, p.Home)); got != starts {
		t.Errorf("reading a stopped Codex run's activity started the tool (%d starts, was %d)", got, starts)
	}
	if run := f.operator.Run(r.RunRef); run.State != apitypes.StateStopped || run.Generation != 1 {
		t.Errorf("after the reads: %s generation %d", run.State, run.Generation)
	}
	if got := f.operator.Call(http.MethodGet, runURL(r.RunRef, "activity", "agents", "x"), nil); got.Status != http.StatusUnprocessableEntity {
		t.Errorf("codex sub-agent read: %d %s, want 422", got.Status, got.Body)
	}
}

// j08Messages: what people sent by default (R-MSG-3), role=all, the
// R-MSG-16 refusals, text=1 at most 50 items with the 64 KiB clip
// (R-MSG-8, R-MSG-12), an id read with later_same (R-MSG-7, R-MSG-15), an
// unknown id (R-MSG-11), a grok run (R-MSG-11) and the audit events
// (R-MSG-10, R-MSG-17).
func j08Messages(t *testing.T, f *fixture) {
	p := f.profile("claude")
	r := f.launch(p)
	ref := r.RunRef
	big := strings.Repeat("é", apitypes.MaxMessageText) // 128 KiB of two-byte runes
	sent := []string{"repeat\none", "repeat\ntwo", big}
	for i := range 30 {
		sent = append(sent, fmt.Sprintf("m%02d", i))
	}
	fl := f.follow(t, ref, 0)
	for _, m := range sent {
		f.post(f.operator, http.StatusAccepted, ref, "input", integration.Message(m), nil)
	}
	fl.s.UntilOutput(`"result":"pong: m29"`, wait)
	fl.turn("work") // tool results are not what a person sent

	msgs := func(q string) apitypes.MessagesPage {
		t.Helper()
		var page apitypes.MessagesPage
		f.operator.Must(http.StatusOK, http.MethodGet, runURL(ref, "messages")+"?"+q, nil, &page)
		return page
	}
	def := msgs("limit=200")
	if def.Total != len(sent)+1 || len(def.Items) != len(sent)+1 {
		t.Fatalf("default page: total %d, %d items; want %d user messages", def.Total, len(def.Items), len(sent)+1)
	}
	for _, it := range def.Items {
		if it.Role != "user" || it.Text != nil {
			t.Fatalf("default page holds %s", mustJSON(it))
		}
	}
	all := msgs("role=all&limit=200")
	if all.Total != 2*(len(sent)+1) {
		t.Errorf("role=all: total %d, want %d", all.Total, 2*(len(sent)+1))
	}
	for q, code := range map[string]string{
		"q=" + strings.Repeat("a", 257): "invalid_parameter",
		"limit=201":                     "invalid_parameter",
		"limit=0":                       "invalid_parameter",
		"role=bot":                      "invalid_parameter",
		"order=up":                      "invalid_parameter",
		"text=2":                        "invalid_parameter",
	} {
		if got := f.operator.Call(http.MethodGet, runURL(ref, "messages")+"?"+q, nil); got.Status != http.StatusBadRequest || got.ErrorCode() != code {
			t.Errorf("messages?%.20s: %d %s, want 400 %s", q, got.Status, got.Body, code)
		}
	}
	if got := msgs("q=" + strings.Repeat("a", 256)); got.Total != 0 {
		t.Errorf("a 256-byte q matches %d", got.Total)
	}

	// text=1: at most 50 items, each text clipped at 64 KiB with [...].
	text := msgs("role=all&text=1&limit=200")
	if len(text.Items) != transcript.MaxTextLimit || text.Next == nil {
		t.Errorf("text=1&limit=200: %d items, next %v; want %d and a next", len(text.Items), text.Next, transcript.MaxTextLimit)
	}
	clipped := 0
	for _, it := range text.Items {
		if it.Text == nil {
			t.Fatalf("text=1 item without text: %s", mustJSON(it))
		}
		if it.Clipped {
			clipped++
			if len(*it.Text) > apitypes.MaxMessageText+len(transcript.ClipMark) || !strings.HasSuffix(*it.Text, transcript.ClipMark) {
				t.Errorf("a clipped text: %d bytes, suffix %q", len(*it.Text), (*it.Text)[len(*it.Text)-8:])
			}
		}
	}
	if clipped != 2 { // the big message and its pong
		t.Errorf("%d clipped texts, want 2", clipped)
	}

	// q and an id read: later_same counts the later same-first-line ones.
	rep := msgs("q=REPEAT")
	if rep.Total != 2 || rep.Items[0].FirstLine != "repeat" {
		t.Fatalf("q=REPEAT: %s", mustJSON(rep))
	}
	var one apitypes.MessageRead
	f.operator.Must(http.StatusOK, http.MethodGet, runURL(ref, "messages")+fmt.Sprintf("?id=%d", rep.Items[0].ID), nil, &one)
	if one.Text != "repeat\none" || one.LaterSame != 1 || one.Total != all.Total {
		t.Errorf("id read: %s", mustJSON(one))
	}
	if got := f.operator.Call(http.MethodGet, runURL(ref, "messages")+"?id=99999", nil); got.Status != http.StatusNotFound || got.ErrorCode() != "unknown_message" {
		t.Errorf("unknown id: %d %s", got.Status, got.Body)
	}
	// Pages chain by next (R-MSG-13).
	first := msgs("limit=20")
	if first.Next == nil {
		t.Fatal("no next on a partial page")
	}
	second := msgs(fmt.Sprintf("limit=20&cursor=%d", *first.Next))
	if len(first.Items)+len(second.Items) != def.Total || second.Items[0].ID != *first.Next {
		t.Errorf("pages: %d + %d items, second starts at %d, next was %d", len(first.Items), len(second.Items), second.Items[0].ID, *first.Next)
	}

	// Audit: the first-line reads and the text reads are separate events.
	if n := len(audit(t, f.admin, url.Values{"event": {apitypes.AuditRunMessages}, "run_ref": {ref}}.Encode())); n != 1 {
		t.Errorf("%d sessions.run.messages rows, want 1 within the window", n)
	}
	if n := len(audit(t, f.admin, url.Values{"event": {apitypes.AuditRunMessagesText}, "run_ref": {ref}}.Encode())); n != 1 {
		t.Errorf("%d sessions.run.messages.text rows, want 1 within the window", n)
	}
	for _, e := range audit(t, f.admin, url.Values{"run_ref": {ref}}.Encode()) {
		if b, _ := json.Marshal(e); strings.Contains(string(b), "repeat") {
			t.Errorf("an audit row holds message text: %s", b)
		}
	}

	// Grok keeps no record Olivares reads.
	g := f.launch(f.profile("grok"))
	for _, path := range []string{runURL(g.RunRef, "messages"), runURL(g.RunRef, "activity")} {
		if got := f.operator.Call(http.MethodGet, path, nil); got.Status != http.StatusUnprocessableEntity || got.ErrorCode() != "unsupported_tool" {
			t.Errorf("GET %s on grok: %d %s, want 422 unsupported_tool", path, got.Status, got.Body)
		}
	}
	f.post(f.operator, http.StatusOK, g.RunRef, "stop", nil, nil)
	f.post(f.operator, http.StatusOK, ref, "stop", nil, nil)
}

// j08Taint: a vault secret refuses activity, messages, handoff and move
// (R-CRED-3/4, R-HOF-14, R-MOVE-11); a package-registry token allows
// activity while its first generation runs only (R-CRED-3). The refusal
// names the kind, never the secret (R-CRED-5).
func j08Taint(t *testing.T, f *fixture) {
	const value = "j08-secret-value"
	v := value
	var sec apitypes.Secret
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/vault/secrets", apitypes.SecretCreate{Name: "j08", Value: &v}, &sec)
	launch := func(kind string) (apitypes.Profile, string) {
		p := f.profile("claude")
		var r apitypes.Run
		f.operator.Must(http.StatusCreated, http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref,
			Grants: []apitypes.Grant{{Kind: kind, SecretRef: sec.Ref, Env: "TOKEN"}}}, &r)
		f.follow(t, r.RunRef, 0).turn("work")
		return p, r.RunRef
	}
	refused := func(when, method, path string, body any) {
		t.Helper()
		got := f.operator.Call(method, path, body)
		if got.Status != http.StatusConflict || got.ErrorCode() != "tainted" || strings.Contains(string(got.Body), value) {
			t.Errorf("%s: %s %s: %d %s, want 409 tainted", when, method, path, got.Status, got.Body)
		}
	}
	target := f.profile("claude")
	_, vref := launch(apitypes.GrantVaultSecret)
	refused("vault secret, live", http.MethodGet, runURL(vref, "activity"), nil)
	refused("vault secret, live", http.MethodGet, runURL(vref, "messages"), nil)
	refused("vault secret, live", http.MethodGet, runURL(vref, "handoff"), nil)
	refused("vault secret, live", http.MethodPost, runURL(vref, "handoff"), apitypes.HandoffRequest{ProviderProfileRef: target.Ref})
	if run := f.operator.Run(vref); run.State == apitypes.StateStopped {
		t.Error("a refused handoff stopped its source")
	}
	f.post(f.operator, http.StatusOK, vref, "stop", nil, nil)
	refused("vault secret, stopped", http.MethodPost, runURL(vref, "move"), apitypes.MoveRequest{ProviderProfileRef: target.Ref})
	refused("vault secret, stopped", http.MethodGet, runURL(vref, "activity"), nil)

	_, pref := launch(apitypes.GrantPackageRegistryToken)
	a := activityOf(t, f.operator, pref)
	checkContext(t, "package registry token, first generation", a, 34000, true)
	f.operator.Must(http.StatusOK, http.MethodGet, runURL(pref, "messages"), nil, nil) // R-CRED-4 names only S
	f.stop(pref)
	refused("package registry token, stopped", http.MethodGet, runURL(pref, "activity"), nil)
	f.post(f.operator, http.StatusOK, pref, "resume", nil, nil)
	refused("package registry token, resumed", http.MethodGet, runURL(pref, "activity"), nil)
	f.post(f.operator, http.StatusOK, pref, "stop", nil, nil)
}
