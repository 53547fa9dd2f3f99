package conversation

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// framesDir holds the recorded frames of every tool and the items the
// console's normalize.js gives for them (integration/console).
const framesDir = "../../integration/console/testdata/frames"

// Fixtures returns the frame fixtures by name (claude-real, codex-fakecli...).
func fixtures(t *testing.T) map[string][]apitypes.Output {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(framesDir, "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no frame fixtures in " + framesDir)
	}
	out := map[string][]apitypes.Output{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var frames []apitypes.Output
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var o apitypes.Output
			if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			frames = append(frames, o)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".jsonl")] = frames
	}
	return out
}

// R-CLI-7: the Go normalizer gives, for every recorded fixture, exactly the
// items (and stderr) the console's normalize.js gives, as its golden file
// holds them.
func TestSameItemsAsTheConsole(t *testing.T) {
	for name, frames := range fixtures(t) {
		t.Run(name, func(t *testing.T) {
			tool, _, _ := strings.Cut(name, "-")
			n := New(tool)
			var stderr []string
			for _, o := range frames {
				_, e := n.Feed(o)
				stderr = append(stderr, e...)
			}
			items := n.Items
			if items == nil {
				items = []Item{}
			}
			got, err := json.Marshal(map[string]any{"items": items, "stderr": strings.Join(stderr, "")})
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(framesDir, name+".golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				gi, _ := json.MarshalIndent(g, "", " ")
				t.Errorf("items differ from the console's golden file:\ngot:\n%s\nwant:\n%s", gi, want)
			}
		})
	}
}

// Whatever a tool writes, the normalizer neither panics nor loses a line:
// every non-blank stdout line becomes an item or is read as protocol.
func FuzzFeed(f *testing.F) {
	for _, s := range []string{
		`{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"ok"}],"is_error":true}]}}`,
		`{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"c","command":"ls","exitCode":1,"aggregatedOutput":"x"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update","toolCallId":"1","content":[{"type":"diff","path":"a"}]}}}`,
		`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1e300}}`,
		`[1,2]`, `"text"`, `null`, `{"a":1}{"b":2}`, "plain text",
	} {
		for _, d := range []string{"claude", "codex", "gemini"} {
			f.Add(d, s+"\n", "stdout")
		}
	}
	f.Fuzz(func(t *testing.T, driver, data, stream string) {
		n := New(driver)
		n.Feed(apitypes.Output{Seq: 1, Generation: 1, Stream: stream, Data: data, Encoding: "utf8"})
		n.Feed(apitypes.Output{Seq: 2, Generation: 2, Stream: "stdout", Data: data})
		n.Flush(3)
		if _, err := json.Marshal(n.Items); err != nil {
			t.Fatal(err)
		}
	})
}
