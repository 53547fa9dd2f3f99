package transcript

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration/fakemodel"
)

func TestExpClaude(t *testing.T) {
	if os.Getenv("EXP") == "" {
		t.Skip()
	}
	bin := "/work/main/.clis/node_modules/.bin"
	out := os.Getenv("EXP_OUT")
	os.RemoveAll(out)
	home := filepath.Join(out, "home")
	work := filepath.Join(out, "work")
	os.MkdirAll(home, 0o700)
	os.MkdirAll(work, 0o700)
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	var replies []fakemodel.Reply
	json.Unmarshal([]byte(os.Getenv("EXP_REPLIES")), &replies)
	fake.Push(replies...)
	args := []string{"--print", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--setting-sources", ""}
	args = append(args, strings.Fields(os.Getenv("EXP_ARGS"))...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin+"/claude", args...)
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TERM=dumb", "LANG=C.UTF-8",
		"ANTHROPIC_BASE_URL=" + fake.URL(), "ANTHROPIC_API_KEY=test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=0",
		"CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude")}
	cmd.Env = append(cmd.Env, strings.Fields(os.Getenv("EXP_ENV"))...)
	var lines []string
	for _, l := range strings.Split(os.Getenv("EXP_INPUT"), "\n") {
		if l != "" {
			lines = append(lines, fmt.Sprintf(`{"type":"user","message":{"role":"user","content":%q}}`, l))
		}
	}
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	so, _ := os.Create(filepath.Join(out, "stdout.jsonl"))
	cmd.Stdout = so
	se, _ := os.Create(filepath.Join(out, "stderr.txt"))
	cmd.Stderr = se
	err := cmd.Run()
	so.Close()
	t.Logf("exit: %v", err)
	f, _ := os.Create(filepath.Join(out, "requests.txt"))
	for _, r := range fake.Requests() {
		fmt.Fprintf(f, "%s %s %s\n", r.Method, r.Path, r.Body)
	}
	f.Close()
	_ = bufio.NewReader
}

func TestExpCodex(t *testing.T) {
	if os.Getenv("EXP") == "" {
		t.Skip()
	}
	bin := "/work/main/.clis/node_modules/.bin"
	out := os.Getenv("EXP_OUT")
	os.RemoveAll(out)
	home := filepath.Join(out, "home")
	work := filepath.Join(out, "work")
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	os.MkdirAll(work, 0o700)
	fake := fakemodel.NewOpenAI()
	defer fake.Close()
	var replies []fakemodel.Reply
	json.Unmarshal([]byte(os.Getenv("EXP_REPLIES")), &replies)
	fake.Push(replies...)
	config := `model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "` + envOr("EXP_SANDBOX", "read-only") + `"
` + os.Getenv("EXP_CONFIG") + `
[model_providers.fake]
name = "Fake local"
base_url = "` + nsProxy(t, fake.URL()) + `/v1"
wire_api = "responses"
env_key = "FAKE_OPENAI_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 15000
`
	os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(config), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin+"/codex", "app-server")
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TERM=dumb", "LANG=C.UTF-8",
		"CODEX_HOME=" + filepath.Join(home, ".codex"), "FAKE_OPENAI_KEY=test"}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	se, _ := os.Create(filepath.Join(out, "stderr.txt"))
	cmd.Stderr = se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	so, _ := os.Create(filepath.Join(out, "stdout.jsonl"))
	lines := make(chan map[string]any, 1000)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			so.Write(append(sc.Bytes(), '\n'))
			var m map[string]any
			json.Unmarshal(sc.Bytes(), &m)
			lines <- m
		}
		close(lines)
	}()
	send := func(s string) { io.WriteString(stdin, s+"\n") }
	wait := func(pred func(map[string]any) bool) map[string]any {
		for m := range lines {
			if pred(m) {
				return m
			}
		}
		t.Fatal("eof")
		return nil
	}
	send(`{"id":1,"method":"initialize","params":{"clientInfo":{"name":"olivares","title":null,"version":"0.0.1"},"capabilities":null}}`)
	wait(func(m map[string]any) bool { return m["id"] == float64(1) })
	send(`{"id":2,"method":"thread/start","params":{"cwd":"` + work + `"}}`)
	r := wait(func(m map[string]any) bool { return m["id"] == float64(2) })
	thread := r["result"].(map[string]any)["thread"].(map[string]any)["id"].(string)
	for i, in := range strings.Split(os.Getenv("EXP_INPUT"), "\n") {
		b, _ := json.Marshal(in)
		send(fmt.Sprintf(`{"id":%d,"method":"turn/start","params":{"threadId":%q,"input":[{"type":"text","text":%s,"text_elements":[]}]}}`, 10+i, thread, b))
		wait(func(m map[string]any) bool { return m["method"] == "turn/completed" })
	}
	if os.Getenv("EXP_COMPACT") != "" {
		send(fmt.Sprintf(`{"id":99,"method":"thread/compact/start","params":{"threadId":%q}}`, thread))
		wait(func(m map[string]any) bool {
			return m["method"] == "thread/compacted" || m["method"] == "turn/completed"
		})
	}
	stdin.Close()
	cmd.Wait()
	so.Close()
	f, _ := os.Create(filepath.Join(out, "requests.txt"))
	for _, r := range fake.Requests() {
		fmt.Fprintf(f, "%s %s %s\n", r.Method, r.Path, r.Body)
	}
	f.Close()
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func nsProxy(t *testing.T, target string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.Path, r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		re := regexp.MustCompile(`"name":"([a-z0-9_]+)\.([a-z0-9_]+)"`)
		for sc.Scan() {
			line := re.ReplaceAllString(sc.Text(), `"name":"$2","namespace":"$1"`)
			io.WriteString(w, line+"\n")
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestExpRead(t *testing.T) {
	dir := os.Getenv("EXP_READ")
	if dir == "" {
		t.Skip()
	}
	tool := envOr("EXP_TOOL", ToolClaude)
	home := filepath.Join(dir, "home")
	var id string
	if tool == ToolClaude {
		m, _ := filepath.Glob(filepath.Join(home, ".claude/projects/*/*.jsonl"))
		id = strings.TrimSuffix(filepath.Base(m[0]), ".jsonl")
	} else {
		m, _ := filepath.Glob(filepath.Join(home, ".codex/sessions/*/*/*/*.jsonl"))
		sort.Strings(m)
		b := filepath.Base(m[0])
		id = strings.TrimSuffix(b[len(b)-len("01a23abd-3c4d-7ba3-92b9-9f45dfd34239.jsonl"):], ".jsonl")
	}
	src := Source{Tool: tool, Home: home, ConversationID: id, Cwd: filepath.Join(dir, "work")}
	c := NewCache(0, 0)
	live := NewLive()
	if b, err := os.ReadFile(filepath.Join(dir, "stdout.jsonl")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			live.Observe([]byte(l))
		}
	}
	snap := live.Snapshot()
	a, err := c.Activity(src, &snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.MarshalIndent(a, "", "  ")
	t.Logf("activity: %s", out)
	q := DefaultMessagesQuery()
	q.Role = RoleAll
	q.Text = true
	p, err := c.Messages(src, q)
	if err != nil {
		t.Fatal(err)
	}
	out, _ = json.MarshalIndent(p, "", "  ")
	t.Logf("messages: %s", out)
}
