package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// framesDir holds the output frames recorded from real runs of every tool
// (integration/console records them; the console's renderer reads them too).
const framesDir = "../../../integration/console/testdata/frames"

func readFrames(t *testing.T, file string) []apitypes.Output {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var frames []apitypes.Output
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var o apitypes.Output
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		frames = append(frames, o)
	}
	return frames
}

// render prints frames as session attach does, piped (no colour) or on a
// colour terminal.
func render(t *testing.T, tool string, frames []apitypes.Output, tty termOut) (stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	r := newRenderer(tool, &out, &errb, tty)
	var last uint64
	for _, o := range frames {
		if err := r.feed(o); err != nil {
			t.Fatal(err)
		}
		last = o.Seq
	}
	r.flush(last)
	r.endStderr()
	return out.String(), errb.String()
}

// R-CLI-7: session attach prints the conversation of every tool from its
// recorded real frames, as testdata/attach/<fixture>.golden holds it
// (OLIVARES_UPDATE_GOLDEN=1 rewrites them; review the diff).
func TestAttachRendersTheConversation(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(framesDir, "*.jsonl"))
	tools := map[string]bool{}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		tool, _, _ := strings.Cut(name, "-")
		tools[tool] = true
		t.Run(name, func(t *testing.T) {
			stdout, stderr := render(t, tool, readFrames(t, file), termOut{})
			got := stdout + "--- stderr ---\n" + stderr
			golden := filepath.Join("testdata", "attach", name+".golden")
			if os.Getenv("OLIVARES_UPDATE_GOLDEN") == "1" {
				os.MkdirAll(filepath.Dir(golden), 0o755)
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
				t.Errorf("attach of %s:\ngot:\n%s\nwant:\n%s", name, got, want)
			}
			if strings.Contains(got, `{"`) || strings.Contains(got, `"jsonrpc"`) {
				t.Errorf("attach of %s prints raw protocol:\n%s", name, got)
			}
			if !strings.Contains(got, "── completed") {
				t.Errorf("attach of %s shows no turn boundary:\n%s", name, got)
			}
			// On a colour terminal the same text is there, coloured.
			colored, _ := render(t, tool, readFrames(t, file), termOut{color: true})
			if !strings.Contains(colored, "\x1b[") || stripSGR(colored) != stdout {
				t.Errorf("attach of %s on a terminal: colour missing or text changed:\n%q", name, colored)
			}
		})
	}
	for _, tool := range []string{"claude", "codex", "gemini", "opencode", "grok"} {
		if !tools[tool] {
			t.Errorf("no recorded frames of %s", tool)
		}
	}
}

func stripSGR(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "\x1b[")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		j := strings.IndexByte(s[i:], 'm')
		s = s[i+j+1:]
	}
}

// Streaming: text printed as it grows, in place, and a tool call's result
// printed once, after it.
func TestRendererStreams(t *testing.T) {
	var out, errb bytes.Buffer
	r := newRenderer("gemini", &out, &errb, termOut{})
	frame := func(seq uint64, stream, data string) {
		r.feed(apitypes.Output{Seq: seq, Generation: 1, Stream: stream, Data: data})
	}
	upd := func(u string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":` + u + `}}` + "\n"
	}
	frame(1, "stdout", upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"}}`))
	if got := out.String(); got != "Hel" {
		t.Fatalf("after one chunk: %q, want %q", got, "Hel")
	}
	frame(2, "stdout", upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"lo\nthere"}}`))
	frame(3, "stdout", upd(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Shell","rawInput":{"command":"ls -la"},"status":"pending"}`))
	frame(4, "stderr", "warn one\nwarn ")
	frame(5, "stdout", upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"a\nb\n"}}]}`))
	frame(6, "stdout", upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed"}`))
	frame(7, "stdout", `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"refusal"}}`+"\n")
	r.flush(7)
	r.endStderr()
	want := "Hello\nthere\n→ Shell  ls -la\n  ✓ Shell  2 lines: a\n✗ the model refused to answer\n── failed\n"
	if out.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), want)
	}
	if want := "stderr│ warn one\nstderr│ warn \n"; errb.String() != want {
		t.Errorf("stderr %q, want %q", errb.String(), want)
	}
}

// R-CLI-4, issue 32 finding 14: a tool's own terminal escapes (Codex colours its log
// lines on stderr) reach a pipe or a file as plain text; a colour terminal
// gets them as they are.
func TestRendererDropsToolEscapesOffTerminal(t *testing.T) {
	log := "\x1b[2m2026-12-06T00:11:12Z\x1b[0m \x1b[31mERROR\x1b[0m codex_app_server: \x1b]8;;http://x\x07link\x1b]8;;\x07 done\n"
	for _, tt := range []struct {
		tty  termOut
		want string
	}{
		{termOut{}, "stderr│ 2026-12-06T00:11:12Z ERROR codex_app_server: link done\n"},
		{termOut{color: true}, "\x1b[2mstderr│ \x1b[0m" + log},
	} {
		var out, errb bytes.Buffer
		r := newRenderer("codex", &out, &errb, tt.tty)
		r.feed(apitypes.Output{Seq: 1, Generation: 1, Stream: "stderr", Data: log})
		r.endStderr()
		if errb.String() != tt.want {
			t.Errorf("colour %v: stderr %q, want %q", tt.tty.color, errb.String(), tt.want)
		}
	}
}

// R-DIFF-9 (finding 5): the list says how many paths are uncommitted, and
// diff --file is a unified diff, coloured only on a terminal.
func TestSessionDiff(t *testing.T) {
	three, zero := 3, 0
	uncommitted := &three
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/m/sessions/runs/run_1/diff":
			writeJSON(w, 200, apitypes.Diff{Branch: "olivares/run_1", Base: strings.Repeat("b", 40), Head: strings.Repeat("c", 40), Files: []apitypes.DiffEntry{}, Uncommitted: uncommitted})
		case "/v1/m/sessions/runs/run_1/diff/file":
			if got := r.URL.Query().Get("path"); got != "a.txt" {
				t.Errorf("path %q", got)
			}
			writeJSON(w, 200, apitypes.FileDiff{Path: "a.txt", Original: "one\ntwo\nthree\n", Modified: "one\n2\nthree\nfour"})
		default:
			t.Errorf("unexpected %s", r.URL)
		}
	})
	out, _, code := cli(t, "session", "diff", "run_1")
	if code != 0 || !strings.Contains(out, "no committed change\n") || !strings.Contains(out, "3 paths in the worktree have uncommitted changes, not shown") {
		t.Errorf("diff: exit %d\n%s", code, out)
	}
	uncommitted = &zero
	if out, _, _ := cli(t, "session", "diff", "run_1"); strings.Contains(out, "uncommitted") {
		t.Errorf("diff of a clean worktree speaks of uncommitted changes:\n%s", out)
	}
	out, _, code = cli(t, "session", "diff", "run_1", "--file", "a.txt")
	want := "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+2\n three\n+four\n\\ No newline at end of file\n"
	if code != 0 || out != want {
		t.Errorf("diff --file: exit %d\n%s\nwant:\n%s", code, out, want)
	}
	var b bytes.Buffer
	printFileDiff(&b, apitypes.FileDiff{Path: "a.txt", Original: "x\n", Modified: "y\n"}, termOut{color: true})
	if !strings.Contains(b.String(), "\x1b[31m-x\x1b[0m") || !strings.Contains(b.String(), "\x1b[32m+y\x1b[0m") {
		t.Errorf("diff --file on a terminal: %q", b.String())
	}
}

// R-DIFF-10: --uncommitted prints git's patch, or the paths alone when it
// is too large; it does not combine with --file.
func TestSessionDiffUncommitted(t *testing.T) {
	u := apitypes.UncommittedDiff{Head: strings.Repeat("c", 40), Files: []apitypes.DiffEntry{{Path: "a.txt", Status: "modified"}},
		Patch: "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\n+y\n", PatchLimit: 262144}
	fakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/m/sessions/runs/run_1/diff/uncommitted" {
			t.Errorf("unexpected %s", r.URL)
		}
		writeJSON(w, 200, u)
	})
	if out, _, code := cli(t, "session", "diff", "run_1", "--uncommitted"); code != 0 || out != u.Patch {
		t.Errorf("--uncommitted: exit %d\n%s", code, out)
	}
	u.TooLarge, u.Patch = true, ""
	if out, _, code := cli(t, "session", "diff", "run_1", "--uncommitted"); code != 0 || !strings.Contains(out, "too large to print (over 256 KiB") || !strings.Contains(out, "modified     a.txt\n") {
		t.Errorf("--uncommitted, too large: exit %d\n%s", code, out)
	}
	if _, errOut, code := cli(t, "session", "diff", "run_1", "--uncommitted", "--file", "a.txt"); code == 0 || !strings.Contains(errOut, "not both") {
		t.Errorf("--uncommitted with --file: exit %d %s", code, errOut)
	}
}

func TestUnifiedDiff(t *testing.T) {
	lines := func(n int, f func(i int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(f(i) + "\n")
		}
		return b.String()
	}
	a := lines(20, func(i int) string { return fmt.Sprint("line ", i) })
	b := lines(20, func(i int) string {
		if i == 2 || i == 17 {
			return "changed"
		}
		return fmt.Sprint("line ", i)
	})
	got := unifiedDiff("a", "b", a, b, 3)
	want := "--- a\n+++ b\n@@ -1,6 +1,6 @@\n line 0\n line 1\n-line 2\n+changed\n line 3\n line 4\n line 5\n" +
		"@@ -15,6 +15,6 @@\n line 14\n line 15\n line 16\n-line 17\n+changed\n line 18\n line 19\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if unifiedDiff("a", "b", a, a, 3) != "" {
		t.Error("equal texts give a diff")
	}
	if got := unifiedDiff("a", "b", "", "new\n", 3); got != "--- a\n+++ b\n@@ -0,0 +1 @@\n+new\n" {
		t.Errorf("added file: %q", got)
	}
	if got := unifiedDiff("a", "b", "old\n", "", 3); got != "--- a\n+++ b\n@@ -1 +0,0 @@\n-old\n" {
		t.Errorf("deleted file: %q", got)
	}
}

// FuzzUnifiedDiff: applying the diff's edit script to a gives b.
func FuzzUnifiedDiff(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nc\nd\n")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		var got strings.Builder
		for _, op := range diffOps(splitLines(a), splitLines(b)) {
			if op.kind != '-' {
				got.WriteString(op.line)
			}
		}
		if got.String() != b {
			t.Fatalf("the edit script of %q to %q gives %q", a, b, got.String())
		}
	})
}

// R-SETUP-2: session attach prints the setup command's output on stderr,
// each line marked "setup│ ", apart from the tool's stderr and never as
// conversation, before the tool's first output.
func TestRendererSetupStream(t *testing.T) {
	frames := []apitypes.Output{
		{Seq: 1, Generation: 1, Stream: "setup", Data: "added 3 packages\npart"},
		{Seq: 2, Generation: 1, Stream: "setup", Data: "ial\n{\"not\":\"json-rpc\"}\n"},
		{Seq: 3, Generation: 1, Stream: "setup", Data: base64.StdEncoding.EncodeToString([]byte("no newline")), Encoding: "base64"},
		{Seq: 4, Generation: 1, Stream: "stderr", Data: "tool warns\n"},
	}
	stdout, stderr := render(t, "codex", frames, termOut{})
	if stdout != "" {
		t.Errorf("stdout %q, want nothing: setup output is not the conversation", stdout)
	}
	if want := "setup│ added 3 packages\nsetup│ partial\nsetup│ {\"not\":\"json-rpc\"}\nsetup│ no newline\nstderr│ tool warns\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
}
