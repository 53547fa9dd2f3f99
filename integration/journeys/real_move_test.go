package journeys

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
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

// homeTree is every regular file under dir with its sha256.
func homeTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			sum := sha256.Sum256(b)
			rel, _ := filepath.Rel(dir, p)
			out[rel] = hex.EncodeToString(sum[:])
		}
		return nil
	})
	return out
}

// J07's move with the real Claude Code binary (R-MOVE-1..15, R-LIM-8): a run
// that ended its last turn on a limit moves to a second profile; the limit
// is cleared, the run keeps its ref and session id, the source home is
// byte-for-byte unchanged, and the resume runs under the second profile
// with the whole earlier history sent to the model.
func TestRealClaudeMove(t *testing.T) {
	bin := realBin(t, "claude")
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	f := setup(t, "quic", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	p1 := f.realClaudeProfile(fake)
	var p2 apitypes.Profile
	f.admin.Must(http.StatusCreated, http.MethodPost, "/v1/m/sessions/profiles", apitypes.ProfileCreate{
		NodeID: f.agent.ID, Tool: "claude", Name: "claude-second", Home: f.env.ProfileHome(),
		Env: map[string]string{"ANTHROPIC_BASE_URL": fake.URL(), "ANTHROPIC_API_KEY": "test",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0"}}, &p2)

	r := f.launch(p1)
	s := f.viewer.Attach(r.RunRef, "from=0")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("the word is heron"), nil)
	s.UntilOutput("pong: the word is heron", wait)
	f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ConversationID != "" })
	fake.Push(fakemodel.AnthropicRateLimited())
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("limited"), nil)
	lim := f.operator.AwaitRun(r.RunRef, wait, "a limit", func(r apitypes.Run) bool { return r.Limit != nil && r.State == apitypes.StateIdle })
	sid := lim.ConversationID
	if got := f.operator.Call(http.MethodPost, runURL(r.RunRef, "move"), apitypes.MoveRequest{ProviderProfileRef: p2.Ref}); got.Status != http.StatusConflict {
		t.Fatalf("move of a live run: %d %s, want 409", got.Status, got.Body)
	}
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
	before := homeTree(t, p1.Home)

	var moved apitypes.Run
	f.operator.Must(http.StatusOK, http.MethodPost, runURL(r.RunRef, "move"), apitypes.MoveRequest{ProviderProfileRef: p2.Ref}, &moved)
	if moved.RunRef != r.RunRef || moved.ConversationID != sid || moved.ProviderProfileRef != p2.Ref || moved.Limit != nil || moved.State != apitypes.StateStopped {
		t.Fatalf("moved: %+v", moved)
	}
	evs := f.viewer.Events(r.RunRef)
	last := evs[len(evs)-1]
	var d struct {
		From, To string
		Files    int
	}
	json.Unmarshal(last.Detail, &d)
	if last.Kind != "moved" || d.From != p1.Ref || d.To != p2.Ref || d.Files < 1 {
		t.Fatalf("moved event: %s %s", last.Kind, last.Detail)
	}
	after := homeTree(t, p1.Home)
	if len(after) != len(before) {
		t.Fatalf("the source home changed: %d files, was %d", len(after), len(before))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("the source home changed: %s", k)
		}
	}

	var res apitypes.Run
	f.post(f.operator, http.StatusOK, r.RunRef, "resume", nil, &res)
	if res.Generation != 2 || res.ConversationID != sid || res.ProviderProfileRef != p2.Ref {
		t.Fatalf("resume after the move: %+v", res)
	}
	s = f.viewer.Attach(r.RunRef, "")
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("what was the word"), nil)
	s.UntilOutput("pong: what was the word", wait)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	reqs, err := fake.Await(ctx, fakemodel.MessagesPath, 3)
	if err != nil {
		t.Fatal(err)
	}
	said := reqs[len(reqs)-1].Said()
	if !slices.ContainsFunc(said, func(s string) bool { return strings.Contains(s, "heron") }) {
		t.Fatalf("the resumed turn under the second profile lacks the earlier history: %q", said)
	}
	if m, _ := filepath.Glob(filepath.Join(p2.Home, ".claude", "projects", "*", sid+".jsonl")); len(m) != 1 {
		t.Fatalf("the second profile's transcript: %v", m)
	}
	for k, v := range before {
		if homeTree(t, p1.Home)[k] != v {
			t.Fatalf("the resume under the second profile wrote into the first home: %s", k)
		}
	}
	f.post(f.operator, http.StatusOK, r.RunRef, "stop", nil, nil)
}
