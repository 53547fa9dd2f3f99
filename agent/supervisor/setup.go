package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
)

// DefaultSetupTimeout is Options.SetupTimeout's default.
const DefaultSetupTimeout = 10 * time.Minute

// errSetupStopped is the cause of a setup command an operator's stop ended.
var errSetupStopped = errors.New("supervisor: the run was stopped during its setup command")

// setupCommand is the setup command a launch runs before its tool
// (R-SETUP-2): the approved one of a worktree launch under sandbox or
// container. A native run never executes it (it runs as the agent's
// user); "" for none.
func setupCommand(p LaunchParams) string {
	if !p.Worktree || (p.Isolation != apitypes.IsolationSandbox && p.Isolation != apitypes.IsolationContainer) {
		return ""
	}
	return p.SetupCommand
}

// startFirst starts a launch's first generation with c. A run that
// carries a setup command (R-SETUP-2) runs it first, in a goroutine that
// takes over r.op: startFirst then returns true and the caller must not
// unlock r.op. The caller holds r.op.
func (r *run) startFirst(ctx context.Context, c checked, grants []Grant) (handed bool) {
	r.mu.Lock()
	cmd := r.rec.Setup
	r.mu.Unlock()
	if cmd == "" {
		r.start(ctx, c.d, c.spec, false, grants)
		return false
	}
	// Set before the goroutine, so that a stop from now on ends it.
	ctx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	r.mu.Lock()
	r.stopSetup = stop
	r.mu.Unlock()
	go func() {
		defer r.op.Unlock()
		defer stop(nil)
		if r.setup(ctx, cmd, c.spec) {
			r.start(context.WithoutCancel(ctx), c.d, c.spec, false, grants)
		}
	}()
	return true
}

// setup runs cmd with sh -c in the run's worktree, inside the boundary its
// tool gets (docs/isolation.md), its stdout and stderr into the ring as
// the setup stream. A non-zero exit or the timeout records the run failed
// (setup_failed) and the tool is never started; it reports whether the
// tool may start.
func (r *run) setup(ctx context.Context, cmd string, spec cliruntime.LaunchSpec) bool {
	s := r.s
	timeout := s.o.SetupTimeout
	if timeout <= 0 {
		timeout = DefaultSetupTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	r.mu.Lock()
	n, net, iso := r.rec.Generation+1, r.rec.Network, r.rec.Isolation
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.stopSetup = nil
		r.mu.Unlock()
	}()
	env := append(append([]string(nil), spec.Env...), "HOME="+spec.Home)
	run := func() error {
		sh, err := exec.LookPath("sh")
		if err != nil {
			return err
		}
		i := s.Host.isolator(iso)
		if i == nil {
			return fmt.Errorf("isolation %q does not work on this node", iso)
		}
		wrapped, cleanup, err := i.Wrap(sessions.Spec{Path: sh, Args: []string{"-c", cmd}, Env: env, Dir: spec.Workdir}, s.Host.boundary(net, spec))
		if err != nil {
			return err
		}
		defer cleanup()
		c := exec.CommandContext(ctx, wrapped.Path, wrapped.Args...)
		c.Env, c.Dir = wrapped.Env, wrapped.Dir
		w := ringWriter{r.ring, n}
		c.Stdout, c.Stderr = w, w
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
		c.WaitDelay = time.Second
		return c.Run()
	}
	err := run()
	if err == nil {
		r.mu.Lock()
		r.rec.Setup = ""
		r.mu.Unlock()
		return true
	}
	if s.closed() {
		// The agent is going down: the run starts nothing and records
		// nothing, as a generation then (wait).
		return false
	}
	now := time.Now().UTC()
	if errors.Is(context.Cause(ctx), errSetupStopped) {
		// An operator stop: the run stopped as asked, with no tool
		// started (R-STATE-3).
		r.ring.Flush()
		r.update(ledger.Event{Kind: ledger.KindStopRequested, Generation: n}, func(rec *record) {
			rec.Generation, rec.PID, rec.Ended, rec.StopRequested, rec.Setup = n, 0, true, true, ""
			rec.StartedAt, rec.EndedAt = now, now
		})
		r.ring.End("")
		s.o.OnChange(r.ref)
		return false
	}
	msg := "the setup command failed: " + err.Error()
	var ee *exec.ExitError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		msg = "the setup command did not finish within " + timeout.String()
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		msg = "the setup command exited with code " + strconv.Itoa(ee.ExitCode())
	}
	b, _ := json.Marshal(map[string]string{"error": msg})
	s.o.Log.Info("setup command failed", logging.KeyRunRef, r.ref, logging.Err(err))
	r.ring.Flush()
	r.update(ledger.Event{Kind: ledger.KindFailed, Generation: n, Reason: apitypes.ReasonSetupFailed, Detail: b}, func(rec *record) {
		rec.Generation, rec.PID, rec.Ended, rec.FailReason, rec.Setup = n, 0, true, apitypes.ReasonSetupFailed, ""
		rec.StartedAt, rec.EndedAt = now, now
	})
	r.ring.End(apitypes.ReasonSetupFailed)
	s.o.OnChange(r.ref)
	return false
}

// ringWriter appends what it is given to a run's ring as the setup stream.
type ringWriter struct {
	rg  *ring.Ring
	gen uint32
}

func (w ringWriter) Write(p []byte) (int, error) {
	if _, err := w.rg.Append(w.gen, ring.Setup, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
