//go:build linux

package drivers_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration/fakemodel"
)

// R-REQ-7 with the real ACP tools offline: the model asks to run a shell
// command; the agent sends session/request_permission, which the driver
// reports with the agent's own options, and the chosen optionId lets the
// command run.
func TestRealACPRequests(t *testing.T) {
	t.Run("gemini", func(t *testing.T) {
		t.Parallel()
		bin := realBinDir(t, "gemini")
		fake := fakemodel.NewGemini()
		defer fake.Close()
		spec := geminiSpec(t, bin, fake)
		fake.Push(fakemodel.Tool("run_shell_command", `{"command":"echo hi > probe.txt","description":"write the probe"}`), fakemodel.Text("done"))
		realACPRequest(t, acpStart(t, geminiDriver, spec), spec.Workdir)
	})
	t.Run("opencode", func(t *testing.T) {
		t.Parallel()
		bin := realBinDir(t, "opencode")
		fake := fakemodel.NewAnthropic()
		defer fake.Close()
		spec := opencodeSpec(t, bin, fake)
		// OpenCode asks only where its config says "ask".
		cfg := filepath.Join(spec.Home, ".config", "opencode", "opencode.json")
		b := readFile(t, cfg)
		writeFile(t, cfg, strings.TrimSuffix(strings.TrimSpace(b), "}")+`,"permission":{"bash":"ask","edit":"ask"}}`)
		fake.Push(fakemodel.Tool("bash", `{"command":"echo hi > probe.txt","description":"write the probe"}`), fakemodel.Text("done"))
		realACPRequest(t, acpStart(t, opencodeDriver, spec), spec.Workdir)
	})
}

func realACPRequest(t *testing.T, h *harness, work string) {
	t.Helper()
	h.await(cliruntime.EventConversation)
	if err := h.encode(textInput("write the probe")); err != nil {
		t.Fatal(err)
	}
	ev := seen(t, h, cliruntime.EventRequest)
	req := ev.Request
	var allow string
	var opts []string
	for _, o := range req.Options {
		opts = append(opts, o.ID+":"+string(o.Decision))
		if o.Decision == cliruntime.DecisionAllow && !o.Session && allow == "" {
			allow = o.ID
		}
	}
	if req.Kind != cliruntime.RequestCommand || !strings.Contains(req.Command, "echo hi > probe.txt") || allow == "" {
		t.Fatalf("request %+v (options %v), want a command with the agent's allow option", req, opts)
	}
	var err error
	h.do(func() cliruntime.Step {
		var st cliruntime.Step
		st, err = h.sess.Answer(req.ID, cliruntime.Answer{OptionID: allow})
		return st
	})
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, "the turn", h.await(cliruntime.EventTurnEnded), "end_turn")
	if b, err := os.ReadFile(filepath.Join(work, "probe.txt")); err != nil || string(b) != "hi\n" {
		t.Fatalf("probe.txt %q %v: the allowed command did not run", b, err)
	}
	h.closeStdin()
	h.waitExit()
}
