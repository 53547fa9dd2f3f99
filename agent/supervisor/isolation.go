package supervisor

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/isolation"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// isolation is the isolation a launch of prof runs with (R-TR-7): the
// launch's, else the profile's, else native. 400 for a value that is none
// of the three, 422 for one this node cannot give, 409 for native asked of
// a profile that isolates its runs (a launch may ask for stricter, never
// looser).
func (h *Host) isolation(iso string, prof registry.Profile) (string, error) {
	switch iso {
	case "":
		iso = prof.Isolation
		if iso == "" {
			iso = apitypes.IsolationNative
		}
	case apitypes.IsolationNative, apitypes.IsolationSandbox, apitypes.IsolationContainer:
	default:
		return "", refusal.New(ErrBadIsolation, "isolation %q: use native, container or sandbox", iso)
	}
	if err := h.supports(iso); err != nil {
		return "", err
	}
	if iso == apitypes.IsolationNative && prof.Isolation != "" && prof.Isolation != apitypes.IsolationNative {
		return "", refusal.New(ErrIsolationBelowProfile, "profile %s runs its sessions with isolation %q; launch with that isolation, or leave it unset", prof.Name, prof.Isolation)
	}
	return iso, nil
}

// supports refuses an isolation this node cannot give (R-TR-7, R-TR-8):
// sandbox without a working bubblewrap, or container without a working
// podman, says why.
func (h *Host) supports(iso string) error {
	if iso == apitypes.IsolationNative || h.isolator(iso) != nil {
		return nil
	}
	why := h.o.SandboxUnavailable
	if iso == apitypes.IsolationContainer {
		why = "podman was not looked for"
		if h.o.Container != nil {
			why = h.o.Container.Err().Error()
		}
	}
	return refusal.New(ErrIsolationUnsupported, "isolation %q does not work on this node: %s", iso, why)
}

// isolator is an isolating runner: the sandbox's or the container's.
type isolator interface {
	Wrap(sessions.Spec, isolation.Boundary) (sessions.Spec, func(), error)
	Runner(sessions.Runner, isolation.Boundary) sessions.Runner
}

// isolator is the runner of isolation iso, nil for native or one this
// node does not have.
func (h *Host) isolator(iso string) isolator {
	switch {
	case iso == apitypes.IsolationSandbox && h.o.Sandbox != nil:
		return h.o.Sandbox
	case iso == apitypes.IsolationContainer && h.o.Container != nil && h.o.Container.Err() == nil:
		return h.o.Container
	}
	return nil
}

// contain wraps rn for a generation of a run with isolation iso: the run
// sees its working directory and its profile home (docs/isolation.md),
// its grant files and the engine's hook. A native run's runner is rn.
func (h *Host) contain(rn sessions.Runner, iso, network string, spec cliruntime.LaunchSpec) sessions.Runner {
	i := h.isolator(iso)
	if i == nil {
		return rn
	}
	return i.Runner(rn, h.boundary(network, spec))
}

// boundary is what a contained process of a run launched with spec may
// reach: the tool's, and the setup command's before it (R-SETUP-2).
func (h *Host) boundary(network string, spec cliruntime.LaunchSpec) isolation.Boundary {
	b := isolation.Boundary{Writable: []string{spec.Workdir, spec.Home}, Network: network, Name: spec.RunRef}
	// A worktree run's git needs its repository's objects and refs.
	ro, rw := isolation.GitWorktree(spec.Workdir)
	b.ReadOnly, b.Writable = append(b.ReadOnly, ro...), append(b.Writable, rw...)
	if h.o.GrantsDir != "" {
		b.ReadOnly = append(b.ReadOnly, filepath.Join(h.o.GrantsDir, spec.RunRef))
	}
	if spec.EngineHook != "" {
		if prog := hookProgram(spec.EngineHook); prog != "" {
			b.ReadOnly = append(b.ReadOnly, filepath.Dir(prog))
		}
		if _, err := os.Stat(h.o.Hook.Socket); err == nil {
			b.Writable = append(b.Writable, h.o.Hook.Socket)
		}
	}
	return b
}

// hookProgram is the program of the engine's hook command: its first word,
// single-quoted as agentd quotes it, or bare.
func hookProgram(cmd string) string {
	if rest, ok := strings.CutPrefix(cmd, "'"); ok {
		p, _, _ := strings.Cut(strings.ReplaceAll(rest, `'\''`, "\x00"), "'")
		return strings.ReplaceAll(p, "\x00", "'")
	}
	p, _, _ := strings.Cut(cmd, " ")
	return p
}

// network is the network a run of prof with isolation iso gets: the
// profile's, when the run is isolated ("" is the host's).
func network(iso string, prof registry.Profile) string {
	if iso == apitypes.IsolationNative {
		return ""
	}
	return prof.Network
}
