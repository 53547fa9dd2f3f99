package supervisor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-ATT-11: every accepted input is a frame of the run's output, with who
// sent it, before anything the tool answers to it; an input too long for
// one frame is cut and says so.
func TestInputFrameInOutput(t *testing.T) {
	e, _ := fakeEnv(t)
	e.launchIdle("run_inframe1")
	out := e.tail("run_inframe1", 0)
	in := cliruntime.Input{Text: "hello there", By: "prn_0123456789abcdef", Name: "Ana"}
	if err := e.sup.Input(context.Background(), "run_inframe1", in); err != nil {
		t.Fatal(err)
	}
	out.awaitText(ring.Stdout, `pong: hello there`)
	long := strings.Repeat("é\"", 40000) // 120,000 bytes of text, more as JSON
	if err := e.sup.Input(context.Background(), "run_inframe1", cliruntime.Input{Text: long}); err != nil {
		t.Fatal(err)
	}
	out.await("the long input's frame", func(tl *tail) bool { return len(inputs(t, tl)) == 2 })

	frames := out.snapshot()
	var firstIn, firstReply uint64
	for _, f := range frames {
		if f.Stream == ring.Input && firstIn == 0 {
			firstIn = f.Seq
		}
		if f.Stream == ring.Stdout && strings.Contains(string(f.Data), "pong: hello there") && firstReply == 0 {
			firstReply = f.Seq
		}
	}
	if firstIn == 0 || firstIn > firstReply {
		t.Fatalf("input frame at seq %d, the reply at %d: want the input first", firstIn, firstReply)
	}
	got := inputs(t, out)
	if want := (apitypes.InputFrame{By: in.By, Name: in.Name, Text: in.Text}); got[0] != want {
		t.Errorf("input frame: got %+v, want %+v", got[0], want)
	}
	if g := got[1]; !g.Clipped || g.By != "" || len(g.Text) == 0 || !strings.HasPrefix(long, g.Text) {
		t.Errorf("long input frame: clipped %v by %q, %d bytes of text, want clipped, no sender, a prefix of the input", g.Clipped, g.By, len(g.Text))
	}
}

// inputs decodes the input frames read so far; each must fit one frame.
func inputs(t *testing.T, tl *tail) []apitypes.InputFrame {
	t.Helper()
	var out []apitypes.InputFrame
	for _, f := range tl.snapshot() {
		if f.Stream != ring.Input {
			continue
		}
		var v apitypes.InputFrame
		if err := json.Unmarshal(f.Data, &v); err != nil {
			t.Fatalf("input frame %d: %v (%d bytes)", f.Seq, err, len(f.Data))
		}
		out = append(out, v)
	}
	return out
}
