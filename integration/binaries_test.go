package integration

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	RemoveBinaries()
	os.Exit(code)
}

func binaries(t *testing.T) string { return Binaries(t) }

// proc is a daemon started from a real binary.
type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

func start(t *testing.T, env []string, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	p := &proc{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.done: // exited already; whoever read done put it back
		default:
			cmd.Process.Kill() // only the pid we started
			<-p.done
		}
	})
	return p
}

// interrupt sends SIGINT (Ctrl-C) and waits for a clean exit.
func (p *proc) interrupt(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("%s after SIGINT: %v\n%s", p.cmd.Path, err, p.out)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not stop within 15 s of SIGINT\n%s", p.cmd.Path, p.out)
	}
}

func runCmd(t *testing.T, env []string, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func awaitFile(t *testing.T, p *proc, path string, d time.Duration) {
	t.Helper()
	Await(t, d, path, func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited: %v\n%s", p.cmd.Path, err, p.out)
		default:
		}
		_, err := os.Stat(path)
		return err == nil
	})
}

type devInfo struct {
	APIURL      string `json:"api_url"`
	AdminToken  string `json:"admin_token"`
	Tenant      string `json:"tenant"`
	NodeID      string `json:"node_id"`
	AgentSocket string `json:"agent_socket"`
	CAFile      string `json:"ca_file"`
}

// The main job as a person runs it: dev mode from the real binary, the CLI
// against it, a second node enrolled with the real agent binary, Ctrl-C,
// and a restart that reuses everything.
func TestDevModeBinaries(t *testing.T) {
	t.Parallel()
	bin := binaries(t)
	dir := shortTempDir(t)
	state := filepath.Join(dir, "dev")
	// The peer stands in for the vendor CLIs on PATH; HOME is the test's,
	// since dev profiles use the user's own home.
	env := []string{"OLIVARES_CONFIG_DIR=" + filepath.Join(dir, "cfg"), "PATH=" + PeerPath(t), "HOME=" + filepath.Join(dir, "home")}
	coord, cli, agent := filepath.Join(bin, "olivares-coordinator"), filepath.Join(bin, "olivares"), filepath.Join(bin, "olivares-agent")

	dev := start(t, env, coord, "dev", "--state-dir", state, "--http", "127.0.0.1:0", "--tunnel", "127.0.0.1:0")
	awaitFile(t, dev, filepath.Join(state, "dev.json"), 60*time.Second)
	var info devInfo
	raw, _ := os.ReadFile(filepath.Join(state, "dev.json"))
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatal(err)
	}
	if info.Tenant != "default" || info.NodeID == "" || info.AdminToken == "" || !strings.HasPrefix(info.APIURL, "http://127.0.0.1:") || info.CAFile == "" {
		t.Fatalf("dev.json: %+v", info)
	}
	// dev.json is written first, then the usage is printed. Its commands
	// are the binaries beside dev mode's, not go run (issue 32 finding 8).
	Await(t, 10*time.Second, "dev mode to print its usage", func() bool {
		return strings.Contains(dev.out.String(), "dev mode is ready") && strings.Contains(dev.out.String(), "login --dev")
	})
	if out := dev.out.String(); strings.Contains(out, "go run") || !strings.Contains(out, cli+" login --dev") || !strings.Contains(out, agent+" status --state-dir") {
		t.Errorf("dev mode's Try: names go run or not the binaries:\n%s", out)
	}

	out, code := runCmd(t, env, cli, "login", "--dev", filepath.Join(state, "dev.json"))
	if code != 0 {
		t.Fatalf("login: %d %s", code, out)
	}
	st, err := os.Stat(filepath.Join(dir, "cfg", "credentials.json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", st, err)
	}
	if out, code := runCmd(t, env, cli, "login", "--url", info.APIURL, "--token", "olv_wrong", "--tenant", "default"); code != 1 || !strings.Contains(out, "unauthenticated") {
		t.Fatalf("login with a bad token: %d %s", code, out)
	}

	nodeList := func() []map[string]any {
		out, code := runCmd(t, env, cli, "node", "list", "--json")
		if code != 0 {
			t.Fatalf("node list: %d %s", code, out)
		}
		var res struct{ Items []map[string]any }
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("node list --json: %v\n%s", err, out)
		}
		return res.Items
	}
	ns := nodeList()
	if len(ns) != 1 || ns[0]["id"] != info.NodeID || ns[0]["connected"] != true {
		t.Fatalf("node list: %v", ns)
	}
	if out, code := runCmd(t, env, cli, "node", "show", info.NodeID); code != 0 || !strings.Contains(out, "connected") {
		t.Fatalf("node show: %d %s", code, out)
	}

	// Dev mode made a profile per CLI on PATH and the workspace default;
	// a session runs through the CLI end to end (issue 3).
	if out, code := runCmd(t, env, cli, "profile", "list"); code != 0 || !strings.Contains(out, "claude") || !strings.Contains(out, "codex") || !strings.Contains(out, "grok") {
		t.Fatalf("profile list: %d %s", code, out)
	}
	if out, code := runCmd(t, env, cli, "workspace", "list"); code != 0 || !strings.Contains(out, "default") {
		t.Fatalf("workspace list: %d %s", code, out)
	}
	out, code = runCmd(t, env, cli, "session", "start", "--profile", "codex", "--workspace", "default", "--json")
	var run struct {
		RunRef string `json:"run_ref"`
		State  string `json:"state"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &run) != nil || run.RunRef == "" {
		t.Fatalf("session start: %d %s", code, out)
	}
	if out, code := runCmd(t, env, cli, "session", "input", run.RunRef, "--text", "hello"); code != 0 {
		t.Fatalf("session input: %d %s", code, out)
	}
	if out, code := runCmd(t, env, cli, "session", "input", run.RunRef, "--message", "hello"); code != 1 || !strings.Contains(out, "wrong_input_field") {
		t.Fatalf("session input with the wrong field: %d %s", code, out)
	}
	Await(t, 20*time.Second, "the run to go idle", func() bool {
		out, _ := runCmd(t, env, cli, "session", "show", run.RunRef, "--json")
		return strings.Contains(out, `"state": "idle"`) || strings.Contains(out, `"state":"idle"`)
	})
	if out, code := runCmd(t, env, agent, "status", "--state-dir", filepath.Join(state, "agent")); code != 0 || !strings.Contains(out, run.RunRef) || !strings.Contains(out, "codex") {
		t.Fatalf("agent status lists no live run: %d %s", code, out)
	}
	if out, code := runCmd(t, env, cli, "session", "stop", run.RunRef); code != 0 || !strings.Contains(out, "stopped") {
		t.Fatalf("session stop: %d %s", code, out)
	}
	if out, code := runCmd(t, env, cli, "session", "attach", run.RunRef, "--from", "0"); code != 0 || !strings.Contains(out, "pong: hello") || !strings.Contains(out, "not live") {
		t.Fatalf("session attach after stop: %d %s", code, out)
	}
	if out, code := runCmd(t, env, cli, "session", "events", run.RunRef); code != 0 || !strings.Contains(out, "stop_requested") || !strings.Contains(out, "exited") {
		t.Fatalf("session events: %d %s", code, out)
	}
	if out, code := runCmd(t, env, cli, "session", "list"); code != 0 || !strings.Contains(out, run.RunRef) {
		t.Fatalf("session list: %d %s", code, out)
	}
	if out, code := runCmd(t, env, cli, "session", "show", "run_0000000000000000"); code != 4 {
		t.Fatalf("session show of an unknown run: %d %s, want exit 4 (R-CLI-2)", code, out)
	}

	agentDir := filepath.Join(state, "agent")
	out, code = runCmd(t, env, agent, "status", "--state-dir", agentDir, "--json")
	if code != 0 {
		t.Fatalf("agent status: %d %s", code, out)
	}
	var ast map[string]any
	json.Unmarshal([]byte(out), &ast)
	if ast["node_id"] != info.NodeID {
		t.Fatalf("agent status: %s", out)
	}
	if out, code := runCmd(t, env, agent, "status", "--state-dir", agentDir); code != 0 || !strings.Contains(out, "link:") || !strings.Contains(out, "connected") {
		t.Fatalf("agent status text: %d %s", code, out)
	}

	// A second node, enrolled and run with the real agent binary.
	out, code = runCmd(t, env, coord, "token", "create", "--state-dir", filepath.Join(state, "coordinator"), "--label", "role=builder", "--json")
	if code != 0 {
		t.Fatalf("token create: %d %s", code, out)
	}
	var tok struct {
		Token       string `json:"token"`
		NodeID      string `json:"node_id"`
		Coordinator string `json:"coordinator"`
		CAPin       string `json:"ca_pin"`
	}
	if err := json.Unmarshal([]byte(out), &tok); err != nil || tok.Token == "" || tok.NodeID == "" {
		t.Fatalf("token create --json: %v %s", err, out)
	}
	node2 := filepath.Join(dir, "node2")
	if out, code := runCmd(t, env, agent, "enroll", "--coordinator", tok.Coordinator, "--token", tok.Token, "--ca-pin", tok.CAPin, "--state-dir", node2); code != 0 {
		t.Fatalf("enroll: %d %s", code, out)
	}
	// The token is single use.
	if out, code := runCmd(t, env, agent, "enroll", "--coordinator", tok.Coordinator, "--token", tok.Token, "--ca-pin", tok.CAPin, "--state-dir", filepath.Join(dir, "node3")); code != 1 || !strings.Contains(out, "already used") {
		t.Fatalf("reused token: %d %s", code, out)
	}
	a2 := start(t, env, agent, "run", "--state-dir", node2, "--transport", "yamux")
	Await(t, 20*time.Second, "second node connected", func() bool {
		for _, n := range nodeList() {
			if n["id"] == tok.NodeID && n["connected"] == true && n["transport"] == "yamux" {
				return true
			}
		}
		return false
	})
	// A viewer principal made over the admin socket cannot revoke.
	out, code = runCmd(t, env, coord, "principal", "create", "--state-dir", filepath.Join(state, "coordinator"), "--tenant", "default", "--name", "v", "--role", "viewer", "--kind", "human", "--json")
	if code != 0 {
		t.Fatalf("principal create: %d %s", code, out)
	}
	var pr struct{ Token string }
	json.Unmarshal([]byte(out), &pr)
	venv := []string{"OLIVARES_CONFIG_DIR=" + filepath.Join(dir, "cfg-viewer")}
	if out, code := runCmd(t, venv, cli, "login", "--url", info.APIURL, "--token", pr.Token, "--tenant", "default"); code != 0 {
		t.Fatalf("viewer login: %d %s", code, out)
	}
	if out, code := runCmd(t, venv, cli, "node", "revoke", tok.NodeID); code != 3 || !strings.Contains(out, "permission_denied") {
		// R-CLI-2: 403 exits 3.
		t.Fatalf("viewer revoke: %d %s", code, out)
	}
	if out, code := runCmd(t, env, cli, "node", "revoke", tok.NodeID, "--json"); code != 0 || !strings.Contains(out, "revoked_at") {
		t.Fatalf("admin revoke: %d %s", code, out)
	}
	a2.interrupt(t)
	// Started again, the revoked agent ends at once, non-zero, with the
	// sentence (issue 32 finding 13; R-LIFE-8).
	if out, code := runCmd(t, env, agent, "run", "--state-dir", node2, "--transport", "yamux"); code != 1 || !strings.Contains(out, "olivares-agent: ") || !strings.Contains(out, "will not connect again") {
		t.Fatalf("a revoked agent started again: %d %s", code, out)
	}

	// Ctrl-C stops everything; the agent socket goes with it, and dev.json
	// (R-DEV-5, issue 32 finding 7: a script waiting for it must not take a stopped
	// dev mode's for a ready one). The agent's status says whose agent it
	// is (finding 8).
	dev.interrupt(t)
	if out, code := runCmd(t, env, agent, "status", "--state-dir", agentDir); code != 1 || !strings.Contains(out, "no agent is running") ||
		!strings.Contains(out, "start dev mode with olivares-coordinator dev --state-dir "+state) {
		t.Fatalf("status with no agent: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(state, "dev.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dev.json after Ctrl-C: %v, want it gone", err)
	}
	// One left by a dev mode that was killed names a pid that is gone.
	copyFile(t, filepath.Join(state, "dev.last.json"), filepath.Join(state, "dev.json"))
	if out, code := runCmd(t, env, cli, "login", "--dev", filepath.Join(state, "dev.json")); code != 1 || !strings.Contains(out, "dev mode is not running") {
		t.Fatalf("login --dev with a killed dev mode's dev.json: %d %s", code, out)
	}

	// A restart reuses the CA, the admin and the node.
	dev = start(t, env, coord, "dev", "--state-dir", state, "--http", "127.0.0.1:0", "--tunnel", "127.0.0.1:0")
	Await(t, 60*time.Second, "dev.json written again", func() bool {
		var d devJSON
		raw, err := os.ReadFile(filepath.Join(state, "dev.json"))
		return err == nil && json.Unmarshal(raw, &d) == nil && d.PID == dev.cmd.Process.Pid
	})
	var again devInfo
	raw, _ = os.ReadFile(filepath.Join(state, "dev.json"))
	json.Unmarshal(raw, &again)
	if again.NodeID != info.NodeID || again.AdminToken != info.AdminToken {
		t.Fatalf("restart: got node %s token reused %v, want node %s reused", again.NodeID, again.AdminToken == info.AdminToken, info.NodeID)
	}
	dev.interrupt(t)
}

// Serve mode: TLS on the public API from the coordinator's own CA, the CLI
// trusting it with --ca-file, and a plain listener on a non-loopback
// address refused.
func TestServeModeBinaries(t *testing.T) {
	t.Parallel()
	bin := binaries(t)
	dir := shortTempDir(t)
	coord, cli := filepath.Join(bin, "olivares-coordinator"), filepath.Join(bin, "olivares")
	env := []string{"OLIVARES_CONFIG_DIR=" + filepath.Join(dir, "cfg")}
	state := filepath.Join(dir, "state")
	cfg := filepath.Join(dir, "coordinator.toml")
	os.WriteFile(cfg, []byte("state_dir = \""+state+"\"\n[api]\nlisten = \"127.0.0.1:0\"\n[tunnel]\nlisten = \"127.0.0.1:0\"\n"), 0o600)
	srv := start(t, env, coord, "serve", "--config", cfg)
	var url string
	Await(t, 30*time.Second, "serve to print its URL", func() bool {
		for _, f := range strings.Fields(srv.out.String()) {
			if strings.HasPrefix(f, "https://127.0.0.1:") {
				url = strings.TrimSuffix(f, ",")
				return true
			}
		}
		return false
	})
	// A tenant is created on purpose; a typo in one is refused, not a new
	// tenant (R-LIFE-4). Before there is any, the refusal says so instead
	// of an empty list, and after, it names the one meant (issue 32
	// finding 8).
	if out, code := runCmd(t, env, coord, "principal", "create", "--state-dir", state, "--tenant", "acme", "--name", "ops", "--role", "operator"); code != 1 || !strings.Contains(out, "this coordinator has no tenant yet") || strings.Contains(out, "(tenants: )") {
		t.Fatalf("principal create with no tenant: %d %s", code, out)
	}
	if out, code := runCmd(t, env, coord, "tenant", "create", "acme", "--state-dir", state); code != 0 {
		t.Fatalf("tenant create: %d %s", code, out)
	}
	if out, code := runCmd(t, env, coord, "principal", "create", "--state-dir", state, "--tenant", "acem", "--name", "ops", "--role", "operator"); code != 1 || !strings.Contains(out, `tenant "acem" does not exist (tenants: acme; did you mean acme?)`) || !strings.Contains(out, "--new-tenant") {
		t.Fatalf("principal create in a misspelt tenant: %d %s", code, out)
	}
	// Without --state-dir, the command says which coordinator it reached.
	if out, code := runCmd(t, append(env, "OLIVARES_STATE_DIR="+state), coord, "tenant", "list"); code != 0 || !strings.Contains(out, "the coordinator of state dir "+state+" ($OLIVARES_STATE_DIR; --state-dir names another)") {
		t.Fatalf("tenant list without --state-dir: %d %s", code, out)
	}
	if out, code := runCmd(t, env, coord, "tenant", "list", "--state-dir", state); code != 0 || !strings.Contains(out, "acme") || strings.Contains(out, "acem") {
		t.Fatalf("tenant list: %d %s", code, out)
	}
	out, code := runCmd(t, env, coord, "principal", "create", "--state-dir", state, "--tenant", "acme", "--name", "ops", "--role", "operator", "--json")
	if code != 0 {
		t.Fatalf("principal create: %d %s", code, out)
	}
	// Two principals may not share a name in a tenant.
	if out, code := runCmd(t, env, coord, "principal", "create", "--state-dir", state, "--tenant", "acme", "--name", "ops", "--role", "viewer"); code != 1 || !strings.Contains(out, "name_taken") && !strings.Contains(out, "exists in tenant acme") {
		t.Fatalf("principal create with a taken name: %d %s", code, out)
	}
	var pr struct{ Token string }
	json.Unmarshal([]byte(out), &pr)
	// Without the CA the TLS handshake fails; with it, login works.
	// ... and the refusal says how to trust it (issue 32 finding 9).
	if out, code := runCmd(t, env, cli, "login", "--url", url, "--token", pr.Token, "--tenant", "acme"); code != 1 || !strings.Contains(out, "certificate") || !strings.Contains(out, "pass --ca-file") {
		t.Fatalf("login without CA: %d %s", code, out)
	}
	if out, code := runCmd(t, env, cli, "login", "--url", url, "--token", pr.Token, "--tenant", "acme", "--ca-file", filepath.Join(state, "ca", "ca.pem")); code != 0 {
		t.Fatalf("login with CA: %d %s", code, out)
	}
	if out, code := runCmd(t, env, cli, "whoami", "--json"); code != 0 || !strings.Contains(out, `"operator"`) {
		t.Fatalf("whoami: %d %s", code, out)
	}
	srv.interrupt(t)

	bad := filepath.Join(dir, "plain.toml")
	os.WriteFile(bad, []byte("state_dir = \""+state+"\"\n[api]\nlisten = \"0.0.0.0:0\"\nplain_http = true\n"), 0o600)
	if out, code := runCmd(t, env, coord, "serve", "--config", bad); code != 1 || !strings.Contains(out, "loopback") {
		t.Fatalf("plain on 0.0.0.0: %d %s", code, out)
	}
	// Commands that need the running coordinator say so when it is down.
	if out, code := runCmd(t, env, coord, "token", "create", "--state-dir", state); code != 1 || !strings.Contains(out, "no coordinator is running") {
		t.Fatalf("token create with no coordinator: %d %s", code, out)
	}
}
