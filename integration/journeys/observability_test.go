package journeys

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// debugAgent makes the agent process log at debug: the most it can say.
var debugAgent = integration.ProcOptions{Config: "\n[log]\nlevel = \"debug\"\n"}

// R-OBS-3, R-OBS-4: one request is one access line with its fields, and
// the request id in the X-Request-Id header, the error body and the access
// line is the same one.
func TestAccessLineAndRequestID(t *testing.T) {
	f := setup(t, "yamux", debugAgent)
	r := f.launch(f.profile("claude"))

	// A request that succeeds: exactly one access line, with its fields.
	ok := f.viewer.Call(http.MethodGet, runsPath+"/"+r.RunRef, nil)
	if ok.Status != http.StatusOK {
		t.Fatalf("GET run: %d %s", ok.Status, ok.Body)
	}
	id := ok.Header.Get("X-Request-Id")
	if id == "" {
		t.Fatal("no X-Request-Id on a 200")
	}
	line := accessLine(t, f.env, id)
	want := map[string]any{
		"msg": "http request", "method": "GET", "route": runsPath + "/:ref", "path": runsPath + "/" + r.RunRef,
		"status": float64(200), "bytes": float64(len(ok.Body)), "request_id": id, "run_ref": r.RunRef,
		"tenant": integration.Tenant, "level": "INFO",
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("access line %s: got %v, want %v (%v)", k, line[k], v, line)
		}
	}
	if d, ok := line["duration_ms"].(float64); !ok || d < 0 {
		t.Errorf("access line duration_ms: got %v, want a number >= 0", line["duration_ms"])
	}
	if p, _ := line["principal"].(string); !strings.HasPrefix(p, "prn_") {
		t.Errorf("access line principal: got %q, want the caller's principal id", p)
	}

	// A refused request: the same id in the header, the body and the line.
	nf := f.viewer.Call(http.MethodGet, runsPath+"/run_doesnotexist", nil)
	var body struct {
		Error struct {
			Code      string `json:"code"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	if err := json.Unmarshal(nf.Body, &body); err != nil || nf.Status != http.StatusNotFound {
		t.Fatalf("GET unknown run: %d %s", nf.Status, nf.Body)
	}
	hid := nf.Header.Get("X-Request-Id")
	if hid == "" || body.Error.RequestID != hid {
		t.Fatalf("error body request_id %q, header %q: want equal and not empty", body.Error.RequestID, hid)
	}
	if l := accessLine(t, f.env, hid); l["status"] != float64(404) {
		t.Fatalf("access line of the 404: status %v", l["status"])
	}

	// A proxy's id is kept when well formed, replaced when not.
	kept, err := f.viewer.Send(http.MethodGet, runsPath, nil, map[string]string{"X-Request-Id": "proxy-42.a_b:c"})
	if err != nil || kept.Header.Get("X-Request-Id") != "proxy-42.a_b:c" {
		t.Fatalf("a well-formed incoming id: got %q (%v), want it kept", kept.Header.Get("X-Request-Id"), err)
	}
	accessLine(t, f.env, "proxy-42.a_b:c")
	bad, err := f.viewer.Send(http.MethodGet, runsPath, nil, map[string]string{"X-Request-Id": "x\" injected=1"})
	if err != nil || strings.Contains(bad.Header.Get("X-Request-Id"), "injected") || !strings.HasPrefix(bad.Header.Get("X-Request-Id"), "req_") {
		t.Fatalf("a malformed incoming id: got %q (%v), want a fresh req_ id", bad.Header.Get("X-Request-Id"), err)
	}

	// The agent's lines about a call name the request that made it.
	in, err := f.operator.Send(http.MethodPost, runsPath+"/"+r.RunRef+"/input", integration.Message("hello"), nil)
	if err != nil || in.Status != http.StatusAccepted {
		t.Fatalf("input: %v %d %s", err, in.Status, in.Body)
	}
	iid := in.Header.Get("X-Request-Id")
	integration.Await(t, wait, "the agent's line about the input call", func() bool {
		for _, l := range f.env.LogRecords() {
			if l["request_id"] == iid && l["msg"] == "call served" && l["op"] == "run.input" && l["node_id"] == f.agent.ID {
				return true
			}
		}
		return false
	})
}

// accessLine returns the one access line of request id, failing unless
// there is exactly one. The line is written when the handler returns,
// after the client has its answer: it is awaited.
func accessLine(t *testing.T, env *integration.Env, id string) map[string]any {
	t.Helper()
	var found []map[string]any
	integration.Await(t, wait, "the access line of "+id, func() bool {
		found = found[:0]
		for _, l := range env.LogRecords() {
			if l["msg"] == "http request" && l["request_id"] == id {
				found = append(found, l)
			}
		}
		return len(found) > 0
	})
	if len(found) != 1 {
		t.Fatalf("request %s has %d access lines, want 1: %v", id, len(found), found)
	}
	return found[0]
}

// R-OBS-3: a full journey (join tokens, principals' tokens, a sign-in
// link and the session it makes, a vault value granted to a run, a bad
// token, a query that holds a secret, a run's life) leaves no secret in
// any line the daemons logged, at debug. R-OBS-7, R-OBS-8: then the
// metrics hold the journey, parsed with the Prometheus text parser.
func TestJourneyLogsHoldNoSecretAndMetricsCount(t *testing.T) {
	f := setup(t, "quic", debugAgent)
	env := f.env
	ctx := context.Background()

	// A sign-in link, redeemed by the console's sign-in route.
	pid, _ := env.PrincipalNamed(integration.Tenant, "signin-person", store.RoleOperator, store.KindHuman)
	link, _, err := env.Coord.SigninLink(ctx, pid, 15*time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	env.NoteSecret(u.Fragment)
	resp := postJSON(t, env.APIURL(), "/v1/signin", `{"link":"`+u.Fragment+`"}`)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("sign in with the link: %d %s", resp.StatusCode, b)
	}
	for _, c := range resp.Cookies() {
		env.NoteSecret(c.Value) // the console session
	}
	resp.Body.Close()

	// A vault value, granted to a run.
	const value = "vault-value-9f8e7d6c5b4a"
	env.NoteSecret(value)
	v := value
	var sec apitypes.Secret
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/vault/secrets", apitypes.SecretCreate{Name: "npm", Value: &v}, &sec)

	// Refused: an unknown token, and a secret in a query string.
	const badToken = "olv_not-a-real-token-0123456789"
	env.NoteSecret(badToken)
	if r := env.Do(http.MethodGet, runsPath, badToken, integration.Tenant); r.Status != http.StatusUnauthorized {
		t.Fatalf("unknown token: %d", r.Status)
	}
	const querySecret = "query-secret-abcdef123456"
	env.NoteSecret(querySecret)
	if r := f.viewer.Call(http.MethodGet, runsPath+"?token="+querySecret, nil); r.Status != http.StatusBadRequest {
		t.Fatalf("unknown query parameter: %d %s", r.Status, r.Body)
	}

	// A run's life: launch with the grant, attach, input, stop.
	p := f.profile("claude")
	var r apitypes.Run
	f.operator.Must(http.StatusCreated, http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref,
		Grants: []apitypes.Grant{{Kind: apitypes.GrantVaultSecret, SecretRef: sec.Ref, Env: "NPM_TOKEN"}}}, &r)
	s := f.viewer.Attach(r.RunRef, "from=0")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("hello"), nil)
	s.UntilOutput("pong: hello", wait)
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
	s.Until(apitypes.SSEEnd, wait)
	if !s.Ended(wait) {
		t.Fatal("attach still open after end")
	}
	// A launch the workspace refuses, counted by its code.
	if got := f.operator.Call(http.MethodPost, runsPath, apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref, WorktreeFrom: "main"}); got.Status != http.StatusUnprocessableEntity {
		t.Fatalf("launch with worktree_from alone: %d %s", got.Status, got.Body)
	}

	// The metrics of the journey.
	mfs := scrapeMetrics(t, env.MetricsURL())
	node := f.agent.ID
	checks := []struct {
		name   string
		labels map[string]string
		ok     func(float64) bool
		want   string
	}{
		{"olivares_api_request_duration_seconds", map[string]string{"method": "POST", "route": runsPath, "status": "201"}, atLeast(1), ">= 1"},
		{"olivares_api_request_duration_seconds", map[string]string{"method": "GET", "route": runsPath, "status": "401"}, atLeast(1), ">= 1"},
		{"olivares_api_streams_total", map[string]string{"route": runsPath + "/:ref/attach", "status": "200"}, atLeast(1), ">= 1"},
		{"olivares_api_streams_open", map[string]string{"route": runsPath + "/:ref/attach"}, equal(0), "0 once the stream ended"},
		{"olivares_tunnel_call_duration_seconds", map[string]string{"op": "run.launch", "result": "ok"}, atLeast(1), ">= 1"},
		{"olivares_tunnel_call_duration_seconds", map[string]string{"op": "run.stop", "result": "ok"}, atLeast(1), ">= 1"},
		{"olivares_nodes_connected", map[string]string{"transport": "quic"}, equal(1), "1"},
		{"olivares_nodes_connected", map[string]string{"transport": "yamux"}, equal(0), "0"},
		{"olivares_tunnel_open_streams", nil, atLeast(1), ">= 1 (the control stream)"},
		{"olivares_tunnel_reconnects_total", nil, equal(0), "0"},
		{"olivares_launches_total", map[string]string{"result": "started"}, atLeast(1), ">= 1"},
		{"olivares_launches_total", map[string]string{"result": "worktree_from_without_worktree"}, equal(1), "1"},
		{"olivares_attach_viewers", nil, equal(0), "0"},
		{"olivares_runs", map[string]string{"state": apitypes.StateStopped, "tool": "claude"}, atLeast(1), ">= 1"},
		{"olivares_audit_appends_total", map[string]string{"event": apitypes.AuditRunStarted}, atLeast(1), ">= 1"},
		{"olivares_node_metrics_up", map[string]string{"node": node}, equal(1), "1"},
		{"olivares_agent_ring_frames_appended_total", map[string]string{"node": node}, atLeast(1), ">= 1"},
		{"olivares_agent_ring_bytes_appended_total", map[string]string{"node": node}, atLeast(len("pong: hello")), ">= the output's bytes"},
		{"olivares_agent_ring_commit_duration_seconds", map[string]string{"node": node}, atLeast(1), ">= 1 commit"},
		{"olivares_agent_ring_fsync_duration_seconds", map[string]string{"node": node}, atLeast(1), ">= 1 commit"},
		{"olivares_agent_child_exits_total", map[string]string{"node": node, "cause": "exit_nonzero"}, atLeast(1), ">= 1 (143 on SIGTERM)"},
		{"olivares_agent_input_queue_bytes", map[string]string{"node": node}, equal(0), "0"},
	}
	for _, c := range checks {
		v, found := sample(mfs, c.name, c.labels)
		if !found {
			t.Errorf("%s%v: no such series", c.name, c.labels)
			continue
		}
		if !c.ok(v) {
			t.Errorf("%s%v: got %v, want %s", c.name, c.labels, v, c.want)
		}
	}
	// R-OBS-7: bounded labels: no run ref, principal or secret in any.
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if v := l.GetValue(); strings.Contains(v, r.RunRef) || strings.HasPrefix(v, "prn_") || strings.Contains(v, value) {
					t.Errorf("%s has the label %s=%q", mf.GetName(), l.GetName(), v)
				}
			}
		}
	}

	// R-OBS-3: no secret in any line.
	secrets, lines := env.AssertNoSecretInLogs(t)
	if secrets < 8 || lines < 20 {
		t.Fatalf("checked %d secrets in %d lines: the journey made fewer than expected", secrets, lines)
	}
}

func postJSON(t *testing.T, origin, path, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, origin+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", origin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func scrapeMetrics(t *testing.T, u string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the scrape does not parse: %v", err)
	}
	return mfs
}

// sample is the value of the series of name with labels (a histogram's
// count), and whether it exists.
func sample(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf, ok := mfs[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range mf.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func atLeast(n int) func(float64) bool { return func(v float64) bool { return v >= float64(n) } }
func equal(n int) func(float64) bool   { return func(v float64) bool { return v == float64(n) } }
