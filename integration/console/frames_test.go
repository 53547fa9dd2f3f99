package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/integration/realcli"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The frame fixtures: output events exactly as GET /runs/{ref}/attach
// sends them, one JSON object a line, recorded from runs of every driver
// (the fakecli peer, and the real Claude Code against the fake Messages
// API), with the normalized conversation each must give beside them
// (<name>.golden.json). The console's renderer is checked against them
// here; the CLI's attach renderer reads the same files.
const framesDir = "testdata/frames"

// recordings are the runs whose frames are recorded: a driver, the inputs
// sent one turn after another, and the profile's environment.
var recordings = []struct {
	name, tool string
	inputs     []string
	real       bool
}{
	{"claude-fakecli", "claude", []string{"hello", "stderr oops", "limit"}, false},
	{"codex-fakecli", "codex", []string{"hello", "limit"}, false},
	{"gemini-fakecli", "gemini", []string{"hello"}, false},
	{"opencode-fakecli", "opencode", []string{"hello"}, false},
	{"grok-fakecli", "grok", []string{"hello"}, false},
	{"claude-real", "claude", []string{"hello", "again"}, true},
}

// TestRecordFrames rewrites the fixtures (OLIVARES_RECORD_FRAMES=1).
func TestRecordFrames(t *testing.T) {
	if os.Getenv("OLIVARES_RECORD_FRAMES") != "1" {
		t.Skip("set OLIVARES_RECORD_FRAMES=1 to record testdata/frames again")
	}
	for _, rec := range recordings {
		t.Run(rec.name, func(t *testing.T) {
			o := integration.ProcOptions{}
			var env map[string]string
			if rec.real {
				bin := realcli.BinDir(t, rec.tool)
				o.Path = bin + ":" + cliruntime.DefaultPath
				fake := fakemodel.NewAnthropic()
				defer fake.Close()
				env = map[string]string{"ANTHROPIC_BASE_URL": fake.URL(), "ANTHROPIC_API_KEY": "test",
					"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0"}
			} else if rec.tool == "gemini" {
				env = map[string]string{"GEMINI_API_KEY": "test"}
			}
			f := setup(t, o)
			r := f.launch(f.admin, f.profile(rec.tool, env), "")
			s := f.admin.Attach(r.RunRef, "from=0")
			field := "text"
			if rec.tool == "claude" {
				field = "message"
			}
			for _, in := range rec.inputs {
				f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
				f.admin.Must(http.StatusAccepted, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/input", map[string]string{field: in}, nil)
				f.admin.AwaitRun(r.RunRef, wait, "the turn to end", func(x apitypes.Run) bool { return x.State != apitypes.StateRunning })
			}
			f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
			f.admin.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/stop", nil, nil)
			_, outs := s.Until(apitypes.SSEEnd, wait)
			var b bytes.Buffer
			for _, o := range outs {
				j, _ := json.Marshal(o)
				b.Write(append(j, '\n'))
			}
			if err := os.MkdirAll(framesDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(framesDir, rec.name+".jsonl"), b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNormalizeGolden feeds each fixture to the console's normalizer in the
// browser and compares the items with the golden file
// (OLIVARES_UPDATE_GOLDEN=1 rewrites them; review the diff).
func TestNormalizeGolden(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(framesDir, "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no frame fixtures in " + framesDir)
	}
	env := integration.NewEnv(t)
	tab := browser.New(t)
	tab.Navigate(env.APIURL() + "/signin")
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			tool, _, _ := strings.Cut(name, "-")
			lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
			arr := "[" + strings.Join(lines, ",") + "]"
			expr := fmt.Sprintf(`import('/assets/normalize.js').then(m => {
  const n = m.normalizer(%q);
  const stderr = [];
  for (const o of %s) stderr.push(...n.feed(o).stderr);
  return JSON.stringify({items: n.items, stderr: stderr.join('')}, null, 1);
})`, tool, arr)
			got := browser.Eval[string](tab, expr) + "\n"
			golden := filepath.Join(framesDir, name+".golden.json")
			if os.Getenv("OLIVARES_UPDATE_GOLDEN") == "1" {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (OLIVARES_UPDATE_GOLDEN=1 writes it)", err)
			}
			if got != string(want) {
				t.Fatalf("normalized %s differs from %s:\ngot:\n%s", name, golden, got)
			}
		})
	}
}
