//go:build linux

package supervisor_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/gemini"
	"github.com/olivares-dev/olivares/agent/drivers/grok"
	"github.com/olivares-dev/olivares/agent/drivers/opencode"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-REQ-7: an ACP agent's session/request_permission (fakecli, speaking
// each tool's ACP) is a request with the agent's own options; the answer
// goes back as the chosen optionId; an interrupt cancels the open request
// (ACP: answered "cancelled"), which the run shows withdrawn.
func TestACPRequests(t *testing.T) {
	for _, tool := range []string{"grok", "gemini", "opencode"} {
		t.Run(tool, func(t *testing.T) {
			e := newEnv(t, supervisor.Options{
				Path:    fakecliDir(t),
				Drivers: map[string]cliruntime.Driver{"grok": grok.New(), "gemini": gemini.New(), "opencode": opencode.New()},
				Runners: map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: sessions.NewProcRunner()},
			})
			prof := "prof_acp" + tool
			var env map[string]string
			if tool == "gemini" {
				env = map[string]string{"GEMINI_API_KEY": "test"}
			}
			if _, err := e.reg.CreateProfile(registry.ProfileParams{Ref: prof, Tenant: tenant, Tool: tool, Name: tool,
				Home: filepath.Join(e.dir, "home-"+tool), Env: env}); err != nil {
				t.Fatal(err)
			}
			ref := "run_acp" + tool
			e.launch(ref, prof)
			e.awaitState(ref, apitypes.StateIdle)
			tl := e.tail(ref, 0)

			e.input(ref, "ask rm -rf build")
			req := e.awaitRequest(ref, apitypes.RequestPending)
			var opts []string
			for _, o := range req.Options {
				opts = append(opts, o.ID+":"+o.Decision)
			}
			if req.Kind != apitypes.RequestCommand || req.Detail.Command != "rm -rf build" ||
				strings.Join(opts, ",") != "proceed_once:allow,proceed_always:allow,cancel:deny" {
				t.Fatalf("request %+v options %v, want the command and the agent's own options", req, opts)
			}
			if _, err := e.sup.Requests.Answer(ref, req.ID, "prn_alice", apitypes.RequestAnswer{Decision: "allow", OptionID: "proceed_always"}); err != nil {
				t.Fatal(err)
			}
			tl.awaitText(ring.Stdout, "ran: rm -rf build (proceed_always)")
			e.awaitState(ref, apitypes.StateIdle)

			e.input(ref, "ask ls")
			req = e.awaitRequest(ref, apitypes.RequestPending)
			if _, err := e.sup.Requests.Answer(ref, req.ID, "prn_alice", apitypes.RequestAnswer{Decision: "deny"}); err != nil {
				t.Fatal(err)
			}
			tl.awaitText(ring.Stdout, "denied: ls (selected cancel)")
			e.awaitState(ref, apitypes.StateIdle)

			e.input(ref, "ask make")
			req = e.awaitRequest(ref, apitypes.RequestPending)
			if _, err := e.sup.Interrupt(t.Context(), ref); err != nil {
				t.Fatal(err)
			}
			e.await("the interrupted turn's request withdrawn", func() bool {
				for _, q := range e.requests(ref) {
					if q.ID == req.ID {
						return q.State == apitypes.RequestExpired && strings.Contains(q.Reason, "no longer waits")
					}
				}
				return false
			})
			e.awaitState(ref, apitypes.StateIdle)
		})
	}
}

// Issue 32 finding 3: a tool that refuses a launch's handshake (Gemini CLI
// with no API key: session/new answers "Gemini API key is missing or not
// configured") is a failed run, handshake_failed, with the reason in
// last_error as an auth error; its process is stopped, not left starting.
func TestHandshakeRefusedFailsTheRun(t *testing.T) {
	e := newEnv(t, supervisor.Options{
		Path:    fakecliDir(t),
		Drivers: map[string]cliruntime.Driver{"gemini": gemini.New()},
		Runners: map[cliruntime.LaunchTransport]sessions.Runner{cliruntime.TransportStdio: sessions.NewProcRunner()},
	})
	e.profile("prof_nokey", "gemini")
	e.launch("run_nokey", "prof_nokey")
	r := e.awaitState("run_nokey", apitypes.StateFailed)
	if r.Reason != apitypes.ReasonHandshakeFailed || r.LastError == nil || r.LastError.Kind != cliruntime.ErrorAuth ||
		!strings.Contains(r.LastError.Message, "Gemini API key is missing") || apitypes.AttentionOf(r, time.Now()) != apitypes.AttentionFailed {
		t.Fatalf("run %+v (last_error %+v), want failed, handshake_failed, an auth last_error", r, r.LastError)
	}
	if err := e.sup.Input(context.Background(), "run_nokey", cliruntime.Input{Text: "hi"}); err == nil {
		t.Error("input to a run whose tool refused its handshake was accepted")
	}
}
