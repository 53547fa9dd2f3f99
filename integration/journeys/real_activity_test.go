package journeys

import (
	"net/http"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-ACT-2, R-ACT-4, R-ACT-7, R-ACT-9 and R-MSG-3 with the real Claude Code
// (2.1.328) through the coordinator, the tunnel and a real agent process:
// the context meter reads the last request's tokens from the tool's own
// transcript and the window from its result frame, so context_percent is
// 100 × tokens / window; the messages page holds what the person sent.
func TestRealClaudeActivity(t *testing.T) {
	bin := realBin(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	f := setup(t, "quic", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	p := f.realClaudeProfile(fake)
	r := f.launch(p)
	s := f.viewer.Attach(r.RunRef, "from=0")
	defer s.Close()
	fake.Push(fakemodel.Reply{Text: "measured", Usage: &fakemodel.Usage{InputTokens: 1200, CacheReadInputTokens: 30000, CacheCreationInputTokens: 2800}})
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("how full is the context?"), nil)
	s.UntilOutput(`"result":"measured"`, wait)

	// Claude Code writes its transcript in batches: wait for the record.
	var a apitypes.Activity
	integration.Await(t, wait, "the assistant record in the transcript", func() bool {
		a = activityOf(t, f.operator, r.RunRef)
		return a.ContextTokens != nil
	})
	if a.Model == nil || *a.Model != "claude-opus-5-5" {
		t.Errorf("model %v, want claude-opus-5-5 (real-clis.md §1.9)", a.Model)
	}
	checkContext(t, "real claude", a, 34000, true)
	if a.Transcript != apitypes.TranscriptRead {
		t.Errorf("transcript state %q", a.Transcript)
	}

	var page apitypes.MessagesPage
	f.operator.Must(http.StatusOK, http.MethodGet, runURL(r.RunRef, "messages"), nil, &page)
	if page.Total != 1 || page.Items[0].FirstLine != "how full is the context?" || page.Items[0].Role != "user" {
		t.Errorf("messages: %s", mustJSON(page))
	}
	f.operator.Must(http.StatusOK, http.MethodGet, runURL(r.RunRef, "messages")+"?role=all", nil, &page)
	if page.Total != 2 || page.Items[1].FirstLine != "measured" {
		t.Errorf("messages?role=all: %s", mustJSON(page))
	}
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
	// The window report outlives the process (R-ACT-7).
	checkContext(t, "real claude, stopped", activityOf(t, f.operator, r.RunRef), 34000, true)
}
