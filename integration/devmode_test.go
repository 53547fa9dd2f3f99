package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// devJSON is dev.json as these tests read it.
type devJSON struct {
	APIURL     string `json:"api_url"`
	Tunnel     string `json:"tunnel"`
	AdminToken string `json:"admin_token"`
	Tenant     string `json:"tenant"`
	NodeID     string `json:"node_id"`
	PID        int    `json:"pid"`
}

func readDev(t *testing.T, state string) devJSON {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(state, "dev.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d devJSON
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dev.json: %v\n%s", err, raw)
	}
	return d
}

// awaitDevRewritten waits until dev.json is newer than before.
func awaitDevRewritten(t *testing.T, p *proc, state string, before time.Time) devJSON {
	t.Helper()
	Await(t, 90*time.Second, "dev.json rewritten\n"+p.out.String(), func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("dev mode exited: %v\n%s", err, p.out)
		default:
		}
		st, err := os.Stat(filepath.Join(state, "dev.json"))
		return err == nil && st.ModTime().After(before)
	})
	return readDev(t, state)
}

// gone reports whether pid has exited (a zombie waiting for its reaper
// counts as exited).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// `go run ./coordinator/cmd/olivares-coordinator dev &`, then the go run
// process is killed: dev mode stops with it, its runs' children too, and
// the next start gets the state dir's lock and the ports (R-DEV-1). The
// parent is go run's shape: a process named go whose child is the binary
// it built under a go-build temp dir.
func TestDevModeStopsWithGoRun(t *testing.T) {
	t.Parallel()
	bin := Binaries(t)
	dir := shortTempDir(t)
	exeDir := filepath.Join(dir, "go-build4242", "b001", "exe")
	goDir := filepath.Join(dir, "gobin")
	for _, d := range []string{exeDir, goDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(exeDir, "olivares-coordinator")
	copyFile(t, filepath.Join(bin, "olivares-coordinator"), exe)
	// Like go run, the parent waits for its child; it is not replaced
	// by it (the exit after keeps sh from exec'ing the last command).
	goRun := filepath.Join(goDir, "go")
	if err := os.WriteFile(goRun, []byte("#!/bin/sh\n\"$@\"\nexit $?\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "dev")
	env := []string{"OLIVARES_CONFIG_DIR=" + filepath.Join(dir, "cfg"), "PATH=" + PeerPath(t), "HOME=" + filepath.Join(dir, "home")}
	parent := start(t, env, goRun, exe, "dev", "--state-dir", state, "--http", "127.0.0.1:0")
	awaitFile(t, parent, filepath.Join(state, "dev.json"), 90*time.Second)
	info := readDev(t, state)
	if info.PID == 0 || info.PID == parent.cmd.Process.Pid {
		t.Fatalf("dev.json pid %d (parent %d)", info.PID, parent.cmd.Process.Pid)
	}
	t.Cleanup(func() {
		if !gone(info.PID) {
			syscall.Kill(info.PID, syscall.SIGKILL) // the dev process this test started, by pid
		}
	})
	// A run with a live child (the fake Codex).
	c := apiclient.New(apiclient.Config{URL: info.APIURL, Token: info.AdminToken, Tenant: info.Tenant})
	ctx := context.Background()
	var prof apitypes.Profile
	Await(t, 30*time.Second, "dev mode's codex profile", func() bool {
		ps, err := c.Profiles(ctx)
		for _, p := range ps.Items {
			if p.Name == "codex" {
				prof = p
			}
		}
		return err == nil && prof.Ref != ""
	})
	r, err := c.Launch(ctx, apitypes.LaunchRequest{ProviderProfileRef: prof.Ref})
	if err != nil || r.PID == 0 {
		t.Fatalf("launch: %+v %v", r, err)
	}

	// go run is killed (kill -9 leaves it no chance to pass anything on).
	parent.cmd.Process.Signal(syscall.SIGKILL)
	Await(t, 30*time.Second, "the dev process to stop after its go run was killed", func() bool { return gone(info.PID) })
	Await(t, 30*time.Second, "the run's child to stop with dev mode", func() bool { return gone(r.PID) })

	// Nothing holds the state dir or the ports: dev mode starts again.
	before := time.Now()
	dev := start(t, env, filepath.Join(bin, "olivares-coordinator"), "dev", "--state-dir", state, "--http", "127.0.0.1:0")
	again := awaitDevRewritten(t, dev, state, before)
	if again.NodeID != info.NodeID {
		t.Fatalf("restart: node %s, want %s", again.NodeID, info.NodeID)
	}
	// Dev mode stopped the run itself on its way out: stopped, as a
	// session stop leaves it, not failed and lost (R-DEV-6, issue 32 finding 6).
	// The index learns it when the node, connected again, pushes its rows.
	c = apiclient.New(apiclient.Config{URL: again.APIURL, Token: again.AdminToken, Tenant: again.Tenant})
	var got apitypes.Run
	Await(t, 30*time.Second, "the run dev mode stopped to be indexed stopped", func() bool {
		got, err = c.Run(ctx, r.RunRef)
		return err == nil && got.State != apitypes.StateIdle && got.State != apitypes.StateRunning && got.State != apitypes.StateStarting
	})
	if got.State != apitypes.StateStopped || got.Reason != "" || got.Attention != nil && *got.Attention == "failed" {
		t.Errorf("the run dev mode stopped: %+v, want state stopped\n%s", got, parent.out)
	}
	if !strings.Contains(parent.out.String(), "stopped 1 live run(s)") {
		t.Errorf("dev mode did not say it stopped the run:\n%s", parent.out)
	}
	dev.interrupt(t)
}

// With no vendor CLI on PATH dev mode says so and how to get them, and
// suggests no session it cannot start; --http 127.0.0.1:0 alone picks a
// free tunnel port too, dev.json has it, and a restart keeps the ports,
// so the saved login keeps working (R-DEV-3, R-DEV-4).
func TestDevModePortZeroAndNoCLIs(t *testing.T) {
	t.Parallel()
	bin := Binaries(t)
	dir := shortTempDir(t)
	state := filepath.Join(dir, "dev")
	env := []string{"OLIVARES_CONFIG_DIR=" + filepath.Join(dir, "cfg"), "PATH=/usr/bin:/bin", "HOME=" + filepath.Join(dir, "home")}
	coord, cli := filepath.Join(bin, "olivares-coordinator"), filepath.Join(bin, "olivares")
	dev := start(t, env, coord, "dev", "--state-dir", state, "--http", "127.0.0.1:0")
	awaitFile(t, dev, filepath.Join(state, "dev.json"), 90*time.Second)
	info := readDev(t, state)
	if info.Tunnel == "" || strings.HasSuffix(info.Tunnel, ":7444") || !strings.HasPrefix(info.Tunnel, "127.0.0.1:") {
		t.Fatalf("dev.json tunnel %q, want a free loopback port", info.Tunnel)
	}
	Await(t, 10*time.Second, "dev mode's usage", func() bool { return strings.Contains(dev.out.String(), "Ctrl-C stops everything") })
	out := dev.out.String()
	for _, want := range []string{"no vendor CLI", "scripts/install-clis", ".clis/node_modules/.bin"} {
		if !strings.Contains(out, want) {
			t.Errorf("dev output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "session start") {
		t.Errorf("dev suggests a session start with no profile to run it:\n%s", out)
	}
	if out, code := runCmd(t, env, cli, "login", "--dev", filepath.Join(state, "dev.json")); code != 0 {
		t.Fatalf("login: %d %s", code, out)
	}
	dev.interrupt(t)

	before := time.Now()
	dev = start(t, env, coord, "dev", "--state-dir", state, "--http", "127.0.0.1:0")
	again := awaitDevRewritten(t, dev, state, before)
	if again.APIURL != info.APIURL || again.Tunnel != info.Tunnel {
		t.Fatalf("restart on port 0: api %s tunnel %s, want the same %s %s", again.APIURL, again.Tunnel, info.APIURL, info.Tunnel)
	}
	if out, code := runCmd(t, env, cli, "whoami"); code != 0 {
		t.Fatalf("the saved login after a restart: %d %s", code, out)
	}
	dev.interrupt(t)
}

// Revoking the dev node by mistake does not brick dev mode: the running
// dev mode says what happened, the next start refuses with the way out,
// and --reenroll enrolls the host again and moves its profiles and
// workspace default to the new node, where a session starts (R-DEV-2).
func TestDevModeReenroll(t *testing.T) {
	t.Parallel()
	bin := Binaries(t)
	dir := shortTempDir(t)
	state := filepath.Join(dir, "dev")
	env := []string{"OLIVARES_CONFIG_DIR=" + filepath.Join(dir, "cfg"), "PATH=" + PeerPath(t), "HOME=" + filepath.Join(dir, "home")}
	coord := filepath.Join(bin, "olivares-coordinator")
	args := []string{"dev", "--state-dir", state, "--http", "127.0.0.1:0"}
	dev := start(t, env, coord, args...)
	awaitFile(t, dev, filepath.Join(state, "dev.json"), 90*time.Second)
	info := readDev(t, state)
	ctx := context.Background()
	c := apiclient.New(apiclient.Config{URL: info.APIURL, Token: info.AdminToken, Tenant: info.Tenant})
	if _, err := c.RevokeNode(ctx, info.NodeID); err != nil {
		t.Fatal(err)
	}
	Await(t, 30*time.Second, "dev mode to say its node was revoked", func() bool {
		return strings.Contains(dev.out.String(), "was revoked") && strings.Contains(dev.out.String(), "--reenroll")
	})
	dev.interrupt(t)

	refused := start(t, env, coord, args...)
	select {
	case err := <-refused.done:
		refused.done <- err
		out := refused.out.String()
		if err == nil || !strings.Contains(out, "was revoked") || !strings.Contains(out, "--reenroll") {
			t.Fatalf("start with a revoked node: %v\n%s", err, out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("dev mode with a revoked node did not stop:\n%s", refused.out)
	}

	before := time.Now()
	dev = start(t, env, coord, append(args, "--reenroll")...)
	again := awaitDevRewritten(t, dev, state, before)
	if again.NodeID == info.NodeID || again.AdminToken != info.AdminToken {
		t.Fatalf("after --reenroll: node %s (was %s), admin token kept %v", again.NodeID, info.NodeID, again.AdminToken == info.AdminToken)
	}
	c = apiclient.New(apiclient.Config{URL: again.APIURL, Token: again.AdminToken, Tenant: again.Tenant})
	ps, err := c.Profiles(ctx)
	if err != nil || len(ps.Items) == 0 {
		t.Fatalf("profiles: %+v %v", ps, err)
	}
	var codex apitypes.Profile
	for _, p := range ps.Items {
		if p.NodeID != again.NodeID {
			t.Errorf("profile %s stayed on node %s, want %s", p.Name, p.NodeID, again.NodeID)
		}
		if p.Name == "codex" {
			codex = p
		}
	}
	ws, err := c.Workspaces(ctx)
	if err != nil || len(ws.Items) != 1 || ws.Items[0].Name != "default" || ws.Items[0].NodeID != again.NodeID {
		t.Fatalf("workspaces after --reenroll: %+v %v", ws, err)
	}
	r, err := c.Launch(ctx, apitypes.LaunchRequest{ProviderProfileRef: codex.Ref, WorkspaceRef: ws.Items[0].Ref})
	if err != nil || r.NodeID != again.NodeID {
		t.Fatalf("launch on the new node: %+v %v", r, err)
	}
	if _, err := c.Stop(ctx, r.RunRef); err != nil {
		t.Fatal(err)
	}
	// The old node is only revoked, and can be forgotten.
	if fg, err := c.ForgetNode(ctx, info.NodeID); err != nil || fg.ProfilesRemoved != 0 {
		t.Fatalf("forget the old node: %+v %v", fg, err)
	}
	dev.interrupt(t)
}
