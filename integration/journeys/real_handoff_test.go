package journeys

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// J07's handoff with the real binaries (R-HOF-6, R-HOF-8..12): a real
// Codex session handed off to a real Claude Code: the new session's first
// turn, which the fake Anthropic server receives, holds the summary and the
// transcript's path, and the transcript holds the Codex turns.
func TestRealCodexHandoffToClaude(t *testing.T) {
	bin := realBin(t, "codex")
	realBin(t, "claude")
	openai := fakemodel.NewOpenAI()
	defer openai.Close()
	anthropic := fakemodel.NewAnthropic()
	defer anthropic.Close()
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	codex := f.realCodexProfile(t, openai)
	claude := f.realClaudeProfile(anthropic)

	src := f.launch(codex)
	s := f.viewer.Attach(src.RunRef, "from=0")
	f.post(f.operator, http.StatusAccepted, src.RunRef, "input", integration.Text("design the ostrich parser"), nil)
	s.UntilOutput("pong: design the ostrich parser", wait)
	f.operator.AwaitRun(src.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ConversationID != "" })

	var pv apitypes.HandoffPreview
	f.viewer.Must(http.StatusOK, http.MethodGet, runURL(src.RunRef, "handoff"), nil, &pv)
	if pv.SourceDriver != "codex" || pv.Turns != 2 || !strings.Contains(pv.Summary, "design the ostrich parser") {
		t.Fatalf("preview of the real codex session: %+v", pv)
	}
	edited := pv.Summary + "\nReviewed: keep the parser streaming.\n"
	var res apitypes.HandoffResponse
	f.operator.Must(http.StatusCreated, http.MethodPost, runURL(src.RunRef, "handoff"),
		apitypes.HandoffRequest{ProviderProfileRef: claude.Ref, Summary: &edited}, &res)
	if res.SummaryState != "delivered" || res.HandoffOf != src.RunRef {
		t.Fatalf("handoff: %+v", res)
	}
	if now := f.viewer.Run(src.RunRef); now.State != apitypes.StateStopped || now.ExitCode == nil || *now.ExitCode != 0 {
		t.Fatalf("the codex source after the handoff: %+v", now)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	reqs, err := anthropic.Await(ctx, fakemodel.MessagesPath, 1)
	if err != nil {
		t.Fatal(err)
	}
	transcript := filepath.Join(claude.Home, ".claude", "olivares-handoffs", res.RunRef+".md")
	said := strings.Join(reqs[len(reqs)-1].Said(), "\n")
	if !strings.Contains(said, "keep the parser streaming") || !strings.Contains(said, transcript) {
		t.Fatalf("the first turn Claude Code sent the model lacks the reviewed summary or the transcript path %s:\n%s", transcript, said)
	}
	body, err := os.ReadFile(transcript)
	if err != nil || !strings.Contains(string(body), "design the ostrich parser") || !strings.Contains(string(body), "pong: design the ostrich parser") {
		t.Fatalf("the transcript %s: %v\n%s", transcript, err, body)
	}
	if !slices.Contains(integration.Kinds(f.viewer.Events(src.RunRef)), "handed_off") {
		t.Fatal("no handed_off event on the source")
	}
	f.post(f.operator, http.StatusOK, res.RunRef, "stop", nil, nil)
}
