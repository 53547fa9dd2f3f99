// Package signin runs a tool's own account sign-in under a profile's home
// and relays it (docs/rules/profiles-workspaces.md, R-ACCT-*): Claude
// Code's `claude setup-token` on a terminal, whose URL the person opens and
// whose code they paste back; Codex's device-code sign-in through
// `codex app-server` (account/login/start). One attempt per profile at a
// time; each is killed when cancelled, when it expires and when the agent
// closes.
package signin

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/sessions"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The refusals (agentd maps them to wire statuses).
var (
	ErrNotFound    = errors.New("signin: no such attempt")
	ErrBusy        = errors.New("signin: an attempt runs for the profile")
	ErrUnsupported = errors.New("signin: the tool has no sign-in to relay")
	ErrNotWaiting  = errors.New("signin: the attempt waits for no code")
	ErrBadCode     = errors.New("signin: bad code")
)

// DefaultTimeout is how long an attempt may wait for the person (R-ACCT-4).
const DefaultTimeout = 10 * time.Minute

// TokenEnv is where a Claude Code token from setup-token is kept: the
// profile's environment on the node, which never leaves it (R-PROF-2,
// R-ACCT-6). Claude Code reads it at every launch.
const TokenEnv = "CLAUDE_CODE_OAUTH_TOKEN"

// Profile is what an attempt needs of a profile.
type Profile struct {
	Ref, Tenant, Tool string
	// Spec is the profile's launch spec (home, environment, PATH), as its
	// runs get it.
	Spec cliruntime.LaunchSpec
	// Contain wraps a runner in the profile's isolation (its sandbox, as
	// its runs get it); nil runs natively.
	Contain func(sessions.Runner) sessions.Runner
}

// runner is rn in p's isolation.
func (p Profile) runner(rn sessions.Runner) sessions.Runner {
	if p.Contain == nil || rn == nil {
		return rn
	}
	return p.Contain(rn)
}

// Options wire a Manager.
type Options struct {
	// Proc and PTY are the runners (setup-token needs a terminal).
	Proc, PTY sessions.Runner
	// Drivers give the tool's environment and program (the same as a run's).
	Drivers map[string]cliruntime.Driver
	// KeepToken stores a token the tool printed in the profile's
	// environment on the node and returns the profile's new view.
	KeepToken func(ref, tenant, key, value string) (apitypes.Profile, error)
	// Timeout bounds an attempt (DefaultTimeout when 0).
	Timeout time.Duration
	Now     func() time.Time
	// DB keeps the attempts across agent restarts (R-ACCT-10); nil keeps
	// them in memory only.
	DB *bbolt.DB
	// OnEnd is called after an attempt ended and until the coordinator
	// took it (Reported): the agent's run-index push reports it.
	OnEnd func()
	// OnError hears of a failed write of an attempt to DB.
	OnError func(error)
}

// Manager holds the attempts of one agent.
type Manager struct {
	o  Options
	mu sync.Mutex
	// byID holds every attempt until the agent closes; the done ones stay
	// readable (GET after the end says how it ended).
	byID map[string]*attempt
	// live names the attempt that runs for each profile (R-ACCT-1).
	live map[string]string
	// reported names the ended attempts the coordinator took (R-ACCT-10).
	reported map[string]bool
	closed   bool
	wg       sync.WaitGroup
	saveMu   sync.Mutex // orders the writes of attempts to DB (kept.go)
}

// New returns a Manager with the attempts DB kept: those that were live
// when the agent stopped are failed now (R-ACCT-10).
func New(o Options) (*Manager, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Manager{o: o, byID: map[string]*attempt{}, live: map[string]string{}, reported: map[string]bool{}}
	if err := m.load(); err != nil {
		return nil, err
	}
	return m, nil
}

type attempt struct {
	m      *Manager
	tenant string
	mu     sync.Mutex
	view   apitypes.SigninAttempt
	proc   sessions.Process
	code   func(string) error // sends the pasted code (Claude Code)
	sent   string             // the code sent: never in a message (R-ACCT-3)
	cancel context.CancelFunc
}

// Start begins an attempt named id for p (R-ACCT-1). A second while one
// runs for the profile is ErrBusy; a tool without a sign-in to relay is
// ErrUnsupported, with the API-key way in its sentence.
func (m *Manager) Start(id string, p Profile) (apitypes.SigninAttempt, error) {
	var run func(*attempt) error
	switch p.Tool {
	case string(cliruntime.KindClaude):
		run = func(a *attempt) error { return a.claude(p) }
	case string(cliruntime.KindCodex):
		run = func(a *attempt) error { return a.codex(p) }
	default:
		return apitypes.SigninAttempt{}, refusal.New(ErrUnsupported, "%s has no sign-in Olivares can relay; sign in with an API key for this tool: store it in the vault and make it the profile's API key (api_key_ref), or set it in the profile's environment", p.Tool)
	}
	now := m.o.Now().UTC()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return apitypes.SigninAttempt{}, refusal.New(ErrBusy, "the agent is stopping; try again once it is back")
	}
	if cur, ok := m.live[p.Ref]; ok {
		m.mu.Unlock()
		return apitypes.SigninAttempt{}, refusal.New(ErrBusy, "sign-in %s already runs for profile %s; finish or cancel it first", cur, p.Ref)
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.o.Timeout)
	a := &attempt{m: m, tenant: p.Tenant, cancel: cancel, view: apitypes.SigninAttempt{ID: id, ProfileRef: p.Ref, Tool: p.Tool,
		State: apitypes.SigninStarting, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(m.o.Timeout)}}
	m.byID[id], m.live[p.Ref] = a, id
	m.wg.Add(1)
	m.mu.Unlock()
	go a.watch(ctx)
	a.save()
	if err := run(a); err != nil {
		a.finish(apitypes.SigninFailed, "the sign-in did not start: "+err.Error(), nil)
	}
	return a.snapshot(), nil
}

// watch ends the attempt at its expiry or cancel: the process is killed
// (R-ACCT-4).
func (a *attempt) watch(ctx context.Context) {
	defer a.m.wg.Done()
	<-ctx.Done()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		a.finish(apitypes.SigninExpired, "nobody finished the sign-in in time; start it again", nil)
	}
	a.kill()
}

func (a *attempt) kill() {
	a.mu.Lock()
	p := a.proc
	a.mu.Unlock()
	if p != nil {
		p.Stop(time.Second)
	}
}

// set moves a live attempt to state with what the tool showed.
func (a *attempt) set(state, url, code, msg string) {
	a.mu.Lock()
	if a.view.Done() {
		a.mu.Unlock()
		return
	}
	a.view.State, a.view.URL, a.view.UserCode, a.view.Message = state, url, code, msg
	a.view.UpdatedAt = a.m.o.Now().UTC()
	a.mu.Unlock()
	a.save()
}

// finish ends the attempt once; the first end wins.
func (a *attempt) finish(state, msg string, edit func(*apitypes.SigninAttempt)) {
	a.mu.Lock()
	if a.view.Done() {
		a.mu.Unlock()
		return
	}
	if a.sent != "" {
		msg = strings.ReplaceAll(msg, a.sent, "[the code]")
	}
	a.view.State, a.view.Message, a.view.UpdatedAt = state, msg, a.m.o.Now().UTC()
	if state != apitypes.SigninSignedIn {
		a.view.URL, a.view.UserCode = "", ""
	}
	if edit != nil {
		edit(&a.view)
	}
	a.mu.Unlock()
	a.m.mu.Lock()
	if a.m.live[a.view.ProfileRef] == a.view.ID {
		delete(a.m.live, a.view.ProfileRef)
	}
	a.m.mu.Unlock()
	a.cancel()
	a.save()
}

func (a *attempt) snapshot() apitypes.SigninAttempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.view
}

func (m *Manager) get(id, tenant string) (*attempt, error) {
	m.mu.Lock()
	a := m.byID[id]
	m.mu.Unlock()
	if a == nil || a.tenant != tenant {
		return nil, refusal.New(ErrNotFound, "no sign-in %s on this node (an ended attempt is kept for 24 hours)", id)
	}
	return a, nil
}

// Get is the attempt's state (R-ACCT-2).
func (m *Manager) Get(id, tenant string) (apitypes.SigninAttempt, error) {
	a, err := m.get(id, tenant)
	if err != nil {
		return apitypes.SigninAttempt{}, err
	}
	return a.snapshot(), nil
}

// Code sends the code the person pasted (R-ACCT-3).
func (m *Manager) Code(id, tenant, code string) (apitypes.SigninAttempt, error) {
	a, err := m.get(id, tenant)
	if err != nil {
		return apitypes.SigninAttempt{}, err
	}
	code = strings.TrimSpace(code)
	if code == "" || len(code) > 4096 || strings.ContainsAny(code, "\r\n\x00\x1b") {
		return apitypes.SigninAttempt{}, refusal.New(ErrBadCode, "paste the code the sign-in page showed, on one line")
	}
	a.mu.Lock()
	send, state := a.code, a.view.State
	if state == apitypes.SigninWaitingForCode {
		a.view.State, a.view.Message, a.view.UpdatedAt = apitypes.SigninStarting, "checking the code", a.m.o.Now().UTC()
		a.sent = code
	}
	a.mu.Unlock()
	a.save()
	if state != apitypes.SigninWaitingForCode || send == nil {
		return apitypes.SigninAttempt{}, refusal.New(ErrNotWaiting, "sign-in %s is %s; it takes no code now", id, state)
	}
	if err := send(code); err != nil {
		a.finish(apitypes.SigninFailed, "the code could not be given to the tool: "+err.Error(), nil)
	}
	return a.snapshot(), nil
}

// Cancel ends the attempt and kills its process (R-ACCT-4).
func (m *Manager) Cancel(id, tenant string) (apitypes.SigninAttempt, error) {
	a, err := m.get(id, tenant)
	if err != nil {
		return apitypes.SigninAttempt{}, err
	}
	a.finish(apitypes.SigninFailed, "cancelled", nil)
	return a.snapshot(), nil
}

// Close kills every live attempt and waits for them (the agent stops).
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	var live []*attempt
	for _, id := range m.live {
		live = append(live, m.byID[id])
	}
	m.mu.Unlock()
	for _, a := range live {
		a.finish(apitypes.SigninFailed, MsgAgentStopped, nil)
	}
	m.wg.Wait()
}

// command is the tool's program and environment for the profile, as its
// runs get them, with args in place of the run's.
func (m *Manager) command(p Profile, args ...string) (sessions.Spec, error) {
	d := m.o.Drivers[p.Tool]
	if d == nil {
		return sessions.Spec{}, refusal.New(ErrUnsupported, "this node has no %s driver", p.Tool)
	}
	spec := p.Spec
	spec.Workdir = spec.Home
	spec.ConversationID = ""
	cmd, err := d.Launch(spec)
	if err != nil {
		return sessions.Spec{}, err
	}
	return sessions.Spec{Path: cmd.Path, Args: args, Env: cmd.Env, Dir: spec.Home}, nil
}

// --- terminal text ---

var (
	// osc8 is a hyperlink's target (Claude Code prints its URL as one).
	osc8 = regexp.MustCompile("\x1b\\]8;[^;\x07\x1b]*;([^\x07\x1b]+)(?:\x07|\x1b\\\\)")
	osc  = regexp.MustCompile("\x1b\\][^\x07\x1b]*(?:\x07|\x1b\\\\)")
	// column moves stand for spaces in Ink's output (measured).
	column = regexp.MustCompile("\x1b\\[[0-9]*[GC]")
	csi    = regexp.MustCompile("\x1b\\[[0-9;?>=]*[ -/]*[@-~]")
	// token is what setup-token prints once the code is good; it never
	// leaves the node (R-ACCT-6).
	token = regexp.MustCompile(`sk-ant-[A-Za-z0-9_-]{16,}`)
)

// plain is terminal output as text: hyperlinks and colours gone, column
// moves as spaces.
func plain(b []byte) string {
	b = osc.ReplaceAll(b, nil)
	b = column.ReplaceAll(b, []byte(" "))
	b = csi.ReplaceAll(b, nil)
	return string(bytes.ReplaceAll(b, []byte("\r"), nil))
}
