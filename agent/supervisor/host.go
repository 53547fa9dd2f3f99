package supervisor

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/projectconfig"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/agent/signin"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/claudehook"
)

// Host is what a child starts with on this node: its launch spec, the
// runner of its launch form, the isolations this node gives (isolation.go)
// and the start check's gates that need no run. A sign-in starts with the
// same (Signin, R-ACCT-1).
type Host struct {
	o *Options
}

// spec builds a launch spec of run ref from a profile. The children's PATH
// is the profile's, else the agent's configured one. A profile with the
// engine's hooks gets them (R-PCS-15, R-ED-4) when this agent has a hook
// endpoint; the hook finds the agent and the run through the environment.
func (h *Host) spec(p registry.Profile, workdir, conv, ref string) cliruntime.LaunchSpec {
	var env []string
	hasPath := false
	for k, v := range p.Env {
		env = append(env, k+"="+v)
		hasPath = hasPath || k == "PATH"
	}
	sort.Strings(env)
	if !hasPath && h.o.Path != "" {
		env = append([]string{"PATH=" + h.o.Path}, env...)
	}
	spec := cliruntime.LaunchSpec{Home: p.Home, Workdir: workdir, Env: env, ConversationID: conv, RunRef: ref}
	if h.engineHooks(p) {
		spec.IsolateSettings, spec.EngineHook = true, h.o.Hook.Command
		spec.Env = append(spec.Env, claudehook.EnvRun+"="+ref, claudehook.EnvSocket+"="+h.o.Hook.Socket)
	}
	return spec
}

// Signin is what a sign-in of p runs with (R-ACCT-1): the home,
// environment and PATH of its runs, without the engine's hooks, and their
// isolation (R-TR-7), seeing only its home; no containment for a native
// profile. A sandbox profile on a node without a working sandbox is
// refused.
func (h *Host) Signin(p registry.Profile) (signin.Profile, error) {
	p.EngineHooks = false
	sp := signin.Profile{Ref: p.Ref, Tenant: p.Tenant, Tool: p.Tool, Spec: h.spec(p, p.Home, "", "")}
	if p.Isolation == "" || p.Isolation == apitypes.IsolationNative {
		return sp, nil
	}
	if err := h.supports(p.Isolation); err != nil {
		return sp, err
	}
	sp.Contain = func(rn sessions.Runner) sessions.Runner { return h.contain(rn, p.Isolation, p.Network, sp.Spec) }
	return sp, nil
}

// engineHooks reports whether runs of p carry the engine's hooks: the
// profile asks for them and this agent has a hook endpoint. Without one a
// Claude Code run reads the project's settings and is gated (R-PCS-15).
func (h *Host) engineHooks(p registry.Profile) bool {
	return p.EngineHooks && p.Tool == string(cliruntime.KindClaude) && h.o.Hook.Command != "" && h.o.Hook.Socket != ""
}

func (h *Host) runner(d cliruntime.Driver) (sessions.Runner, error) {
	rn := h.o.Runners[d.LaunchTransport()]
	if rn == nil {
		// R-TR-8: a launch form whose runner this host lacks.
		return nil, refusal.New(ErrTransportUnsupported, "the %s launch form needs the %s runner, which this host does not have", d.Kind(), d.LaunchTransport())
	}
	return rn, nil
}

// checkBinary refuses a launch whose program is not on the child's PATH, so
// that a missing CLI is a refusal a person can act on, not a failed run.
func (h *Host) checkBinary(d cliruntime.Driver, spec cliruntime.LaunchSpec) error {
	cmd, err := d.Launch(spec)
	if err != nil {
		return refusal.New(ErrBadProfile, "%v", err)
	}
	if filepath.IsAbs(cmd.Path) || filepath.Base(cmd.Path) != cmd.Path {
		return nil
	}
	if rn := h.o.Runners[d.LaunchTransport()]; rn != nil && rn.Name() == "fake" {
		// The in-process fake starts no program.
		return nil
	}
	path := cliruntime.DefaultPath
	for _, kv := range cmd.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if fi, err := os.Stat(filepath.Join(dir, cmd.Path)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return nil
		}
	}
	return refusal.New(ErrToolNotFound, "%s is not installed on this node (not on the PATH %s); install it, or set the agent's path", cmd.Path, path)
}

// checkProjectConfig is the repository-config gate (R-PCS-12, R-PCS-19):
// a start of a tool that reads a flagged file in dir, the directory the
// process will start in, is refused unless approved is the directory's
// current hash. There is no way around it (R-PCS-14). Runs outside a
// workspace (in the profile's own home) carry no repository and are not
// gated.
func (h *Host) checkProjectConfig(p registry.Profile, workspaceRef, dir, approved string) error {
	if workspaceRef == "" {
		return nil
	}
	rep, err := projectconfig.Scan(dir)
	if err != nil {
		return refusal.New(ErrWorkspaceUnreadable, "the workspace directory %s cannot be read on the node: %v", dir, err)
	}
	if ref := projectconfig.Check(rep, p.Tool, h.engineHooks(p), approved); ref != nil {
		return refusal.New(ErrProjectConfig, "%s", ref.Message(workspaceRef))
	}
	return nil
}
