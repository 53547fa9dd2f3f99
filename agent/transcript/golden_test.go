package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden want.json files")

// goldenCase is testdata/golden/<name>/case.json: the source of a recorded
// (real or hand-made) native record under <name>/home, and what to ask of
// it. <name>/stdout.jsonl, when present, is fed to a Live; want.json holds
// the expected answers.
type goldenCase struct {
	// Prompt says how the fixture was made (the real run's turns, or what a
	// hand-made file stands for).
	Prompt         string `json:"prompt"`
	Tool           string `json:"tool"`
	ConversationID string `json:"conversation_id"`
	Cwd            string `json:"cwd"`
	Live           bool   `json:"live"`
	// Window, when set, is the window report passed to Activity in place of
	// the one stdout.jsonl gives.
	Window *WindowReport `json:"window,omitempty"`
	// Queries are GET /messages query strings.
	Queries []string `json:"queries"`
	// Agents are sub-agent ids to read.
	Agents []string `json:"agents,omitempty"`
}

type goldenErr struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
}

type goldenWant struct {
	Activity any            `json:"activity"`
	Messages map[string]any `json:"messages"`
	Agents   map[string]any `json:"agents,omitempty"`
}

// goldenStatus is the status agentd answers each code with, as the golden
// files recorded it when this package still carried statuses.
var goldenStatus = map[string]int{"invalid_parameter": 400, "unknown_message": 404, "unknown_agent": 404,
	"unsupported_tool": 422, "transcript_unsafe": 422, "invalid_source": 500}

func asGolden(v any, err error) any {
	var e *Error
	if errors.As(err, &e) {
		return map[string]any{"error": goldenErr{goldenStatus[e.Code], e.Code}}
	}
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	return v
}

// runGolden answers a case's questions.
func runGolden(t *testing.T, dir string, c goldenCase) goldenWant {
	t.Helper()
	home, err := filepath.Abs(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Tool: c.Tool, Home: home, ConversationID: c.ConversationID, Cwd: c.Cwd, Live: c.Live}
	cache := NewCache(0, 0)
	var snap *LiveSnapshot
	if data, err := os.ReadFile(filepath.Join(dir, "stdout.jsonl")); err == nil {
		live := NewLive()
		for _, l := range bytes.Split(data, []byte("\n")) {
			live.Observe(l)
		}
		s := live.Snapshot()
		snap = &s
	}
	got := goldenWant{Messages: map[string]any{}}
	got.Activity = asGolden(cache.Activity(src, snap, c.Window))
	for _, qs := range c.Queries {
		v, err := url.ParseQuery(qs)
		if err != nil {
			t.Fatalf("%s: query %q: %v", dir, qs, err)
		}
		q, err := ParseMessagesQuery(v)
		switch {
		case err != nil:
			got.Messages[qs] = asGolden(nil, err)
		case q.ID != 0:
			got.Messages[qs] = asGolden(cache.Message(src, q.ID))
		default:
			got.Messages[qs] = asGolden(cache.Messages(src, q))
		}
	}
	if len(c.Agents) > 0 {
		got.Agents = map[string]any{}
		for _, a := range c.Agents {
			got.Agents[a] = asGolden(cache.SubAgent(src, a))
		}
	}
	return got
}

// TestGolden reads every recorded native record under testdata/golden and
// compares Activity, Messages and SubAgent with want.json (-update rewrites
// them). The real fixtures were written by the real-binary tests (their
// case.json says which turns made them); the hand-made ones stand for what a
// fake model server cannot provoke.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(filepath.Join(dir, "case.json"))
			if err != nil {
				t.Fatal(err)
			}
			var c goldenCase
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(runGolden(t, dir, c), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			wantPath := filepath.Join(dir, "want.json")
			if *update {
				if err := os.WriteFile(wantPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantPath)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: got\n%s\nwant\n%s", dir, diffLines(string(got), string(want)), "")
			}
		})
	}
}

// diffLines shows the first lines where got and want differ.
func diffLines(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			lo, hi := max(i-3, 0), i+3
			var b strings.Builder
			for j := lo; j <= hi; j++ {
				if j < len(g) {
					b.WriteString("got  " + g[j] + "\n")
				}
				if j < len(w) {
					b.WriteString("want " + w[j] + "\n")
				}
			}
			return b.String()
		}
	}
	return ""
}
