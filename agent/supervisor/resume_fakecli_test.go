//go:build linux

package supervisor_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// TestResumeRealPeers: with the local peer, resume continues the exact
// stored conversation in a new generation (R-RES-1, R-RC-3), and a
// conversation removed from the profile home is 409
// conversation_unavailable without a fallback to a new one (R-RES-2).
func TestResumeRealPeers(t *testing.T) {
	tests := []struct {
		tool string
		say  func(text string) cliruntime.Input
		// convFiles lists where the tool keeps the conversation.
		convFiles func(home, conv string) []string
		// spawns: a refused resume still starts the tool (which says it
		// has no such conversation), or is refused before any spawn.
		spawns bool
	}{
		{"codex", func(s string) cliruntime.Input { return cliruntime.Input{Text: s} },
			func(home, conv string) []string {
				m, _ := filepath.Glob(filepath.Join(home, ".codex", "sessions", "*", "*", "*", "rollout-*-"+conv+".jsonl"))
				return m
			}, true},
		{"claude", func(s string) cliruntime.Input {
			b, _ := json.Marshal(s)
			return cliruntime.Input{Message: b}
		}, func(home, conv string) []string {
			m, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", conv+".jsonl"))
			return m
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			e := procEnv(t, sessions.NewProcRunner())
			ref, prof := "run_"+tt.tool+"res1", "prof_"+tt.tool+"res1"
			e.profile(prof, tt.tool)
			e.launch(ref, prof)
			e.awaitState(ref, apitypes.StateIdle)
			out := e.tail(ref, 0)
			if err := e.sup.Input(context.Background(), ref, tt.say("first words")); err != nil {
				t.Fatalf("Input: %v", err)
			}
			out.awaitText(ring.Stdout, "pong: first words")
			var conv string
			e.await("conversation id", func() bool { conv = e.get(ref).ConversationID; return conv != "" })
			e.awaitState(ref, apitypes.StateIdle)
			home := filepath.Join(e.dir, "home-"+prof)
			e.await("conversation stored", func() bool { return len(tt.convFiles(home, conv)) == 1 })
			if _, err := e.sup.Stop(context.Background(), ref, 0); err != nil {
				t.Fatalf("Stop: %v", err)
			}

			res, err := e.sup.Resume(context.Background(), ref, nil, "")
			if err != nil {
				t.Fatalf("Resume: %v", err)
			}
			if res.Generation != 2 || res.ConversationID != conv || !apitypes.Live(res.State) {
				t.Fatalf("Resume: generation %d conversation %q state %s, want 2, %q, live", res.Generation, res.ConversationID, res.State, conv)
			}
			out2 := e.tail(ref, e.get(ref).RingLast+1)
			if err := e.sup.Input(context.Background(), ref, tt.say("history")); err != nil {
				t.Fatalf("Input after resume: %v", err)
			}
			out2.awaitText(ring.Stdout, "history: first words")
			if got := e.get(ref).ConversationID; got != conv {
				t.Fatalf("conversation after a turn of generation 2: %q, want %q", got, conv)
			}
			if _, err := e.sup.Stop(context.Background(), ref, 0); err != nil {
				t.Fatalf("Stop generation 2: %v", err)
			}

			for _, f := range tt.convFiles(home, conv) {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
			n := len(e.events(ref))
			_, err = e.sup.Resume(context.Background(), ref, nil, "")
			wantErr(t, "Resume of a removed conversation", err, supervisor.ErrConversationUnavailable)
			got := e.get(ref)
			if apitypes.Live(got.State) || got.ConversationID != conv || len(e.sup.Live()) != 0 {
				t.Fatalf("after the refused resume: state %s conversation %q live %v", got.State, got.ConversationID, e.sup.Live())
			}
			evs := e.events(ref)[n:]
			if !tt.spawns && (len(evs) != 0 || got.Generation != 2) {
				t.Fatalf("refused before a spawn, yet events %v generation %d", kinds(evs), got.Generation)
			}
			if tt.spawns {
				if k := kinds(evs); len(k) < 2 || k[0] != ledger.KindResumed || k[1] != ledger.KindStarted || k[len(k)-1] != ledger.KindExited {
					t.Fatalf("refused resume events: %v, want resumed, started, ..., exited", k)
				}
			}
			// R-RES-2: nothing fell back to a new conversation on disk.
			var all []string
			switch tt.tool {
			case "codex":
				all, _ = filepath.Glob(filepath.Join(home, ".codex", "sessions", "*", "*", "*", "rollout-*.jsonl"))
			case "claude":
				all, _ = filepath.Glob(filepath.Join(home, ".claude", "projects", "*", "*.jsonl"))
			}
			if len(all) != 0 {
				t.Fatalf("conversations after the refused resume: %v, want none", all)
			}
		})
	}
}
