// Package registry keeps the node's provider profiles and workspaces: what
// a run starts with and where. It validates them, stores them in their own
// buckets, and answers the policy questions a start asks of them (an
// inactive profile, a workspace the profile does not take, the
// repository-config gate's scan).
//
// Buckets (owned here; nothing else opens them): profiles, workspaces.
// Profile env values live here and only here: the coordinator sees names.
package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	pathpkg "path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/projectconfig"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

var (
	bucketProfiles   = []byte("profiles")
	bucketWorkspaces = []byte("workspaces")
)

var (
	refRE  = regexp.MustCompile(`^[a-z]+_[A-Za-z0-9]{4,64}$`)
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	envRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// ValidRef reports whether ref is a well-formed Olivares ref (prof_x,
// ws_x, run_x).
func ValidRef(ref string) bool { return refRE.MatchString(ref) }

// ValidEnvName reports whether name can name an environment variable.
func ValidEnvName(name string) bool { return envRE.MatchString(name) }

// Profile is a provider profile as the agent stores it.
type Profile struct {
	Ref       string            `json:"ref"`
	Tenant    string            `json:"tenant"`
	Tool      string            `json:"tool"`
	Name      string            `json:"name"`
	Home      string            `json:"home"`
	Env       map[string]string `json:"env,omitempty"`
	CreatedAt time.Time         `json:"created_at"`

	// Policy (R-MOVE-3: a profile that "would accept a launch"; Q-53).
	Inactive               bool     `json:"inactive,omitempty"`
	LaunchRequiresApproval bool     `json:"launch_requires_approval,omitempty"`
	AllowedWorkspaces      []string `json:"allowed_workspaces,omitempty"`
	// EngineHooks: Claude Code runs carry the engine's hooks and load no
	// settings file of their own (R-PCS-15).
	EngineHooks bool `json:"engine_hooks,omitempty"`
	// DeniedTools: what the engine's hook refuses (R-ED-4).
	DeniedTools []string `json:"denied_tools,omitempty"`
	// Approvals, ApprovalRules and AskTimeoutSeconds are the approval
	// policy of the tool's requests (approvals.go, R-REQ-10..12); ""
	// Approvals is a profile from before them, which denies.
	Approvals         string                  `json:"approvals,omitempty"`
	ApprovalRules     []apitypes.ApprovalRule `json:"approval_rules,omitempty"`
	AskTimeoutSeconds int64                   `json:"ask_timeout_s,omitempty"`
	// StallAfterSeconds: stall.go (R-ATTN-6); 0 is the default.
	StallAfterSeconds int64 `json:"stall_after_s,omitempty"`
	// ResumeAfterLoss: the agent resumes a lost run of the profile at
	// start (issue 30; supervisor/hold.go).
	ResumeAfterLoss bool `json:"resume_after_loss,omitempty"`
	// Isolation is what the profile's runs get unless a launch asks for
	// stricter ("" is native); Network is an isolated run's network
	// ("" is the host's) (R-TR-7, docs/isolation.md).
	Isolation string `json:"isolation,omitempty"`
	Network   string `json:"network,omitempty"`
}

// Workspace is a registered directory and its file rules.
type Workspace struct {
	Ref             string    `json:"ref"`
	Tenant          string    `json:"tenant"`
	Name            string    `json:"name"`
	Path            string    `json:"path"`
	ReadOnly        bool      `json:"read_only,omitempty"`
	AllowedSubpaths []string  `json:"allowed_subpaths,omitempty"`
	MaxReadBytes    int64     `json:"max_read_bytes,omitempty"`
	DLP             string    `json:"dlp,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
}

// Options configure a Registry.
type Options struct {
	DB *bbolt.DB
	// Drivers by tool name: a profile's tool must be one of them, and its
	// environment must pass the driver's dry run.
	Drivers map[string]cliruntime.Driver
	// ProfilesDir holds the homes of profiles created without one; when
	// empty, a profile must name its home.
	ProfilesDir string
}

// Registry is the node's profiles and workspaces.
type Registry struct {
	o     Options
	useMu sync.RWMutex // read: Hold; write: the deletions (inuse.go)
	uses  func() []Use
}

// Open creates the buckets.
func Open(o Options) (*Registry, error) {
	if o.DB == nil {
		return nil, errors.New("registry: DB is required")
	}
	err := o.DB.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketProfiles, bucketWorkspaces} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Registry{o: o, uses: func() []Use { return nil }}, nil
}

// ProfileParams is a profile to create.
type ProfileParams struct {
	Ref, Tenant, Tool, Name, Home string
	Env                           map[string]string
	Policy                        ProfilePolicy
}

// ProfilePolicy is what a profile accepts (R-MOVE-3, Q-53). The zero value
// is an active profile that takes launches in any workspace at once.
type ProfilePolicy struct {
	Inactive               bool
	LaunchRequiresApproval bool
	AllowedWorkspaces      []string
	EngineHooks            bool
	DeniedTools            []string
	// Approvals ("" for DefaultApprovals), ApprovalRules and AskTimeout
	// ("" for DefaultAskTimeout) as the API gives them (R-REQ-10..12).
	Approvals     string
	ApprovalRules []apitypes.ApprovalRule
	AskTimeout    string
	// StallAfter ("" for DefaultStallAfter), R-ATTN-6.
	StallAfter string
	// ResumeAfterLoss: issue 30.
	ResumeAfterLoss bool
	// Isolation and Network: R-TR-7.
	Isolation, Network string
}

func (pp ProfilePolicy) check(tool string) error {
	switch pp.Isolation {
	case "", apitypes.IsolationNative, apitypes.IsolationSandbox, apitypes.IsolationContainer:
	default:
		return refusal.New(ErrBadPolicy, "isolation %q: use native, sandbox or container", pp.Isolation)
	}
	switch pp.Network {
	case "", "host":
	case "none":
		if pp.Isolation == "" || pp.Isolation == apitypes.IsolationNative {
			return refusal.New(ErrBadPolicy, "network \"none\" needs isolation sandbox or container: a native run shares the node's network")
		}
	default:
		return refusal.New(ErrBadPolicy, "network %q: use host or none", pp.Network)
	}
	if pp.EngineHooks && tool != string(cliruntime.KindClaude) {
		return refusal.New(ErrBadPolicy, "engine_hooks applies to Claude Code profiles only, not %s", tool)
	}
	if len(pp.DeniedTools) > 0 && !pp.EngineHooks {
		return refusal.New(ErrBadPolicy, "denied_tools needs engine_hooks: only the engine's hook can refuse a tool")
	}
	for _, tl := range pp.DeniedTools {
		if tl == "" || len(tl) > 128 || strings.ContainsAny(tl, " \t\n") {
			return refusal.New(ErrBadPolicy, "denied tool %q: give a tool name such as Bash, or *", tl)
		}
	}
	for _, w := range pp.AllowedWorkspaces {
		if !refRE.MatchString(w) {
			return refusal.New(ErrBadPolicy, "allowed workspace %q is not a workspace ref", w)
		}
	}
	return nil
}

// CreateProfile stores a profile. Its home is created (0700) when missing,
// with the tool's config home under it; a profile without a home gets one
// under ProfilesDir.
func (g *Registry) CreateProfile(p ProfileParams) (apitypes.Profile, error) {
	d := g.o.Drivers[p.Tool]
	switch {
	case !refRE.MatchString(p.Ref) || p.Tenant == "":
		return apitypes.Profile{}, refusal.New(ErrBadRequest, "profile ref %q or tenant is malformed", p.Ref)
	case d == nil:
		return apitypes.Profile{}, refusal.New(ErrUnknownTool, "tool %q is not one this agent drives; use claude, codex, grok, gemini or opencode", p.Tool)
	case !nameRE.MatchString(p.Name):
		return apitypes.Profile{}, refusal.New(ErrBadName, "profile name %q: use 1-64 letters, digits, '.', '_' or '-'", p.Name)
	}
	if err := p.Policy.check(p.Tool); err != nil {
		return apitypes.Profile{}, err
	}
	if p.Policy.Approvals == "" {
		p.Policy.Approvals = DefaultApprovals
	}
	askTimeout, err := checkApprovals(p.Policy.Approvals, p.Policy.ApprovalRules, p.Policy.AskTimeout)
	if err != nil {
		return apitypes.Profile{}, err
	}
	stallAfter, err := checkStallAfter(p.Policy.StallAfter)
	if err != nil {
		return apitypes.Profile{}, err
	}
	home := p.Home
	if home == "" {
		if g.o.ProfilesDir == "" {
			return apitypes.Profile{}, refusal.New(ErrHomeRequired, "this agent has no profiles directory; give the profile a home")
		}
		home = filepath.Join(g.o.ProfilesDir, p.Ref)
	}
	if !filepath.IsAbs(home) {
		return apitypes.Profile{}, refusal.New(ErrBadHome, "profile home %q must be an absolute path on the node", home)
	}
	home = filepath.Clean(home)
	var env []string
	for k, v := range p.Env {
		if !envRE.MatchString(k) {
			return apitypes.Profile{}, refusal.New(ErrBadEnv, "environment name %q: use letters, digits and '_'", k)
		}
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	// A dry run of the launch command line validates the env against the
	// driver (reserved variables, NUL bytes) before anything is stored.
	if _, err := d.Launch(cliruntime.LaunchSpec{Home: home, Workdir: "/", Env: env}); err != nil {
		return apitypes.Profile{}, refusal.New(ErrBadEnv, "%v", err)
	}
	for _, dir := range []string{home, filepath.Join(home, "."+p.Tool)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return apitypes.Profile{}, refusal.New(ErrHomeUnusable, "cannot create the profile home: %v", err)
		}
	}
	rec := Profile{Ref: p.Ref, Tenant: p.Tenant, Tool: p.Tool, Name: p.Name, Home: home, Env: p.Env, CreatedAt: time.Now().UTC(),
		Inactive: p.Policy.Inactive, LaunchRequiresApproval: p.Policy.LaunchRequiresApproval,
		AllowedWorkspaces: p.Policy.AllowedWorkspaces, EngineHooks: p.Policy.EngineHooks, DeniedTools: p.Policy.DeniedTools,
		Approvals: p.Policy.Approvals, ApprovalRules: p.Policy.ApprovalRules, AskTimeoutSeconds: int64(askTimeout / time.Second),
		StallAfterSeconds: int64(stallAfter / time.Second), ResumeAfterLoss: p.Policy.ResumeAfterLoss, Isolation: p.Policy.Isolation, Network: p.Policy.Network}
	err = g.o.DB.Update(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketProfiles).Get([]byte(p.Ref)) != nil {
			return refusal.New(ErrExists, "profile %q exists", p.Ref)
		}
		return putJSON(tx, bucketProfiles, p.Ref, rec)
	})
	if err != nil {
		return apitypes.Profile{}, err
	}
	return rec.View(), nil
}

// View is the profile as the API shows it: env names, never values.
func (p Profile) View() apitypes.Profile {
	v := apitypes.Profile{Ref: p.Ref, Tenant: p.Tenant, Tool: p.Tool, Name: p.Name, Home: p.Home, CreatedAt: p.CreatedAt,
		Active: !p.Inactive, LaunchRequiresApproval: p.LaunchRequiresApproval, AllowedWorkspaces: p.AllowedWorkspaces,
		EngineHooks: p.EngineHooks, DeniedTools: p.DeniedTools, Isolation: p.Isolation, Network: p.Network}
	ap := p.ApprovalPolicy()
	v.Approvals, v.ApprovalRules, v.AskTimeout = ap.Default, ap.Rules, ap.AskTimeout.String()
	v.StallAfter, v.ResumeAfterLoss = p.StallAfter().String(), p.ResumeAfterLoss
	for k := range p.Env {
		v.EnvKeys = append(v.EnvKeys, k)
	}
	slices.Sort(v.EnvKeys)
	return v
}

// WorkspaceParams is a directory to register with its file rules.
type WorkspaceParams struct {
	Ref, Tenant, Name, Path string
	ReadOnly                bool
	AllowedSubpaths         []string
	MaxReadBytes            int64
	DLP                     string
}

// CreateWorkspace registers an existing directory.
func (g *Registry) CreateWorkspace(p WorkspaceParams) (apitypes.Workspace, error) {
	ref, tenant, name, path := p.Ref, p.Tenant, p.Name, p.Path
	switch p.DLP {
	case "":
		p.DLP = apitypes.DLPAllow
	case apitypes.DLPAllow, apitypes.DLPDeny:
	default:
		return apitypes.Workspace{}, refusal.New(ErrBadDLP, "dlp %q: use allow or deny", p.DLP)
	}
	switch {
	case p.MaxReadBytes < 0:
		return apitypes.Workspace{}, refusal.New(ErrBadMaxReadBytes, "max_read_bytes %d: give a positive byte count, or none for the default (1 MiB)", p.MaxReadBytes)
	case p.MaxReadBytes == 0:
		p.MaxReadBytes = apitypes.DefaultMaxReadBytes
	}
	for _, sp := range p.AllowedSubpaths {
		if sp == "" || sp == "." || pathpkg.IsAbs(sp) || pathpkg.Clean(sp) != sp || sp == ".." || strings.HasPrefix(sp, "../") {
			return apitypes.Workspace{}, refusal.New(ErrBadSubpath, "allowed sub-path %q: give a clean relative path inside the workspace, like src or docs/api", sp)
		}
	}
	switch {
	case !refRE.MatchString(ref) || tenant == "":
		return apitypes.Workspace{}, refusal.New(ErrBadRequest, "workspace ref %q or tenant is malformed", ref)
	case !nameRE.MatchString(name):
		return apitypes.Workspace{}, refusal.New(ErrBadName, "workspace name %q: use 1-64 letters, digits, '.', '_' or '-'", name)
	case !filepath.IsAbs(path):
		return apitypes.Workspace{}, refusal.New(ErrBadPath, "workspace path %q must be an absolute path on the node", path)
	}
	path = filepath.Clean(path)
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return apitypes.Workspace{}, refusal.New(ErrNotADirectory, "workspace path %s is not a directory on node: %v", path, errOrNotDir(err))
	}
	w := Workspace{Ref: ref, Tenant: tenant, Name: name, Path: path, ReadOnly: p.ReadOnly,
		AllowedSubpaths: p.AllowedSubpaths, MaxReadBytes: p.MaxReadBytes, DLP: p.DLP, CreatedAt: time.Now().UTC()}
	err = g.o.DB.Update(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketWorkspaces).Get([]byte(ref)) != nil {
			return refusal.New(ErrExists, "workspace %q exists", ref)
		}
		return putJSON(tx, bucketWorkspaces, ref, w)
	})
	if err != nil {
		return apitypes.Workspace{}, err
	}
	return w.View(), nil
}

func errOrNotDir(err error) error {
	if err != nil {
		return err
	}
	return errors.New("not a directory")
}

// View is the workspace as the API shows it.
func (w Workspace) View() apitypes.Workspace {
	v := apitypes.Workspace{Ref: w.Ref, Tenant: w.Tenant, Name: w.Name, Path: w.Path, ReadOnly: w.ReadOnly,
		AllowedSubpaths: w.AllowedSubpaths, MaxReadBytes: w.MaxReadBytes, DLP: w.DLP, CreatedAt: w.CreatedAt}
	// Records from before the file rules read as the defaults.
	if v.MaxReadBytes == 0 {
		v.MaxReadBytes = apitypes.DefaultMaxReadBytes
	}
	if v.DLP == "" {
		v.DLP = apitypes.DLPAllow
	}
	return v
}

// Profile returns the profile ref, whatever its tenant; ok is false when
// there is none.
func (g *Registry) Profile(ref string) (Profile, bool, error) {
	return get[Profile](g, bucketProfiles, ref)
}

// Workspace returns the workspace ref, whatever its tenant.
func (g *Registry) Workspace(ref string) (Workspace, bool, error) {
	return get[Workspace](g, bucketWorkspaces, ref)
}

func get[T any](g *Registry, bucket []byte, ref string) (v T, ok bool, err error) {
	err = g.o.DB.View(func(tx *bbolt.Tx) error {
		ok, err = getJSON(tx, bucket, ref, &v)
		return err
	})
	return v, ok, err
}

// Refs lists the refs of every registered profile and workspace, sorted:
// what the coordinator's index must match (issue 24: a record created
// here whose index write failed is removed again).
func (g *Registry) Refs() (profiles, workspaces []string, err error) {
	err = g.o.DB.View(func(tx *bbolt.Tx) error {
		for _, b := range []struct {
			name []byte
			out  *[]string
		}{{bucketProfiles, &profiles}, {bucketWorkspaces, &workspaces}} {
			if err := tx.Bucket(b.name).ForEach(func(k, _ []byte) error {
				*b.out = append(*b.out, string(k))
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return profiles, workspaces, err
}

// ProfileIn returns profile ref of tenant, or ErrNotFound.
func (g *Registry) ProfileIn(ref, tenant string) (Profile, error) {
	p, ok, err := g.Profile(ref)
	if err != nil {
		return Profile{}, err
	}
	if !ok || p.Tenant != tenant {
		return Profile{}, refusal.New(ErrNotFound, "profile %q not found", ref)
	}
	return p, nil
}

// WorkspaceIn returns workspace ref of tenant, or ErrNotFound.
func (g *Registry) WorkspaceIn(ref, tenant string) (Workspace, error) {
	w, ok, err := g.Workspace(ref)
	if err != nil {
		return Workspace{}, err
	}
	if !ok || w.Tenant != tenant {
		return Workspace{}, refusal.New(ErrNotFound, "workspace %q not found", ref)
	}
	return w, nil
}

// ProfileUpdate changes a profile's policy, environment or home; nil and
// empty fields stay as they are.
type ProfileUpdate struct {
	Active                 *bool
	LaunchRequiresApproval *bool
	AllowedWorkspaces      *[]string
	EngineHooks            *bool
	DeniedTools            *[]string
	// Env sets variables; UnsetEnv removes them by name (R-LIFE-2).
	Env      map[string]string
	UnsetEnv []string
	// Home moves the profile to another absolute directory, created 0700
	// with the tool's config home when missing.
	Home            *string
	Approvals       *string
	ApprovalRules   *[]apitypes.ApprovalRule
	AskTimeout      *string
	StallAfter      *string
	ResumeAfterLoss *bool
	// Isolation and Network apply to the next launch (R-TR-7).
	Isolation, Network *string
}

// UpdateProfile changes the policy of a profile of tenant. It applies to
// the next launch or resume (R-MOVE-10), never to a live process.
func (g *Registry) UpdateProfile(ref, tenant string, u ProfileUpdate) (apitypes.Profile, error) {
	for k := range u.Env {
		if !envRE.MatchString(k) {
			return apitypes.Profile{}, refusal.New(ErrBadEnv, "environment name %q: use letters, digits and '_'", k)
		}
		if slices.Contains(u.UnsetEnv, k) {
			return apitypes.Profile{}, refusal.New(ErrBadEnv, "environment name %q is both set and unset; give it once", k)
		}
	}
	for _, k := range u.UnsetEnv {
		if !envRE.MatchString(k) {
			return apitypes.Profile{}, refusal.New(ErrBadEnv, "environment name %q: use letters, digits and '_'", k)
		}
	}
	if u.Home != nil && (*u.Home == "" || !filepath.IsAbs(*u.Home)) {
		return apitypes.Profile{}, refusal.New(ErrBadHome, "profile home %q must be an absolute path on the node", *u.Home)
	}
	var out Profile
	err := g.o.DB.Update(func(tx *bbolt.Tx) error {
		var p Profile
		ok, err := getJSON(tx, bucketProfiles, ref, &p)
		if err != nil {
			return err
		}
		if !ok || p.Tenant != tenant {
			return refusal.New(ErrNotFound, "profile %q not found", ref)
		}
		pol := ProfilePolicy{Inactive: p.Inactive, LaunchRequiresApproval: p.LaunchRequiresApproval,
			AllowedWorkspaces: p.AllowedWorkspaces, EngineHooks: p.EngineHooks, DeniedTools: p.DeniedTools,
			Isolation: p.Isolation, Network: p.Network}
		if u.Isolation != nil {
			pol.Isolation = *u.Isolation
		}
		if u.Network != nil {
			pol.Network = *u.Network
		}
		if u.Active != nil {
			pol.Inactive = !*u.Active
		}
		if u.LaunchRequiresApproval != nil {
			pol.LaunchRequiresApproval = *u.LaunchRequiresApproval
		}
		if u.AllowedWorkspaces != nil {
			pol.AllowedWorkspaces = slices.Clone(*u.AllowedWorkspaces)
		}
		if u.EngineHooks != nil {
			pol.EngineHooks = *u.EngineHooks
		}
		if u.DeniedTools != nil {
			pol.DeniedTools = slices.Clone(*u.DeniedTools)
		}
		if err := pol.check(p.Tool); err != nil {
			return err
		}
		ap := p.ApprovalPolicy()
		def, rules, timeout := ap.Default, ap.Rules, ap.AskTimeout.String()
		if u.Approvals != nil {
			def = *u.Approvals
		}
		if u.ApprovalRules != nil {
			rules = slices.Clone(*u.ApprovalRules)
		}
		if u.AskTimeout != nil {
			timeout = *u.AskTimeout
		}
		d, err := checkApprovals(def, rules, timeout)
		if err != nil {
			return err
		}
		p.Approvals, p.ApprovalRules, p.AskTimeoutSeconds = def, rules, int64(d/time.Second)
		if u.StallAfter != nil {
			sa, err := checkStallAfter(*u.StallAfter)
			if err != nil {
				return err
			}
			p.StallAfterSeconds = int64(sa / time.Second)
		}
		if u.ResumeAfterLoss != nil {
			p.ResumeAfterLoss = *u.ResumeAfterLoss
		}
		p.Inactive, p.LaunchRequiresApproval, p.AllowedWorkspaces, p.EngineHooks = pol.Inactive, pol.LaunchRequiresApproval, pol.AllowedWorkspaces, pol.EngineHooks
		p.DeniedTools, p.Isolation, p.Network = pol.DeniedTools, pol.Isolation, pol.Network
		if len(u.Env) > 0 || len(u.UnsetEnv) > 0 || u.Home != nil {
			if err := g.changeEnvHome(&p, u); err != nil {
				return err
			}
		}
		out = p
		return putJSON(tx, bucketProfiles, ref, p)
	})
	if err != nil {
		return apitypes.Profile{}, err
	}
	return out.View(), nil
}

// changeEnvHome applies u's environment and home to p, after the same
// checks CreateProfile makes: the driver's dry run of the launch command
// line, and a home it can create.
func (g *Registry) changeEnvHome(p *Profile, u ProfileUpdate) error {
	env := maps.Clone(p.Env)
	if env == nil {
		env = map[string]string{}
	}
	for _, k := range u.UnsetEnv {
		delete(env, k)
	}
	maps.Copy(env, u.Env)
	home := p.Home
	if u.Home != nil {
		home = filepath.Clean(*u.Home)
	}
	d := g.o.Drivers[p.Tool]
	if d == nil {
		return refusal.New(ErrUnknownTool, "tool %q is not one this agent drives", p.Tool)
	}
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	if _, err := d.Launch(cliruntime.LaunchSpec{Home: home, Workdir: "/", Env: kv}); err != nil {
		return refusal.New(ErrBadEnv, "%v", err)
	}
	if home != p.Home {
		for _, dir := range []string{home, filepath.Join(home, "."+p.Tool)} {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return refusal.New(ErrHomeUnusable, "cannot create the profile home: %v", err)
			}
		}
	}
	if len(env) == 0 {
		env = nil
	}
	p.Env, p.Home = env, home
	return nil
}

// found refuses a record of bucket that is not there or not tenant's.
func found(tx *bbolt.Tx, bucket []byte, what, ref, tenant string) error {
	var rec struct {
		Tenant string `json:"tenant"`
	}
	ok, err := getJSON(tx, bucket, ref, &rec)
	if err != nil {
		return err
	}
	if !ok || rec.Tenant != tenant {
		return refusal.New(ErrNotFound, "%s %q not found", what, ref)
	}
	return nil
}

// Accepts refuses a launch, resume or move target the profile's policy
// does not take (R-MOVE-3): an inactive profile, or a workspace it is not
// allowed in. workspaceRef "" is a run in the profile's home.
func (p Profile) Accepts(workspaceRef string) error {
	if p.Inactive {
		return refusal.New(ErrProfileInactive, "profile %s is inactive; activate it (olivares profile update %s --active) or pick another", p.Ref, p.Ref)
	}
	if len(p.AllowedWorkspaces) > 0 && !slices.Contains(p.AllowedWorkspaces, workspaceRef) {
		where := "its own home"
		if workspaceRef != "" {
			where = "workspace " + workspaceRef
		}
		return refusal.New(ErrWorkspaceNotAllowed, "profile %s does not take runs in %s; it allows %s", p.Ref, where, strings.Join(p.AllowedWorkspaces, ", "))
	}
	return nil
}

// OwnsHome is R-MOVE-11c: the home must be the profile's own, a real
// directory that no other profile of this node shares.
func (g *Registry) OwnsHome(p Profile) error {
	fi, err := os.Lstat(p.Home)
	if err != nil || !fi.IsDir() {
		return refusal.New(ErrHomeNotOwned, "the home %s of profile %s is not a directory: %v", p.Home, p.Ref, errOrNotDir(err))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return refusal.New(ErrHomeNotOwned, "the home %s of profile %s belongs to uid %d, not to this agent", p.Home, p.Ref, st.Uid)
	}
	var shared string
	_ = g.o.DB.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketProfiles).ForEach(func(k, v []byte) error {
			var o Profile
			if json.Unmarshal(v, &o) == nil && o.Ref != p.Ref && filepath.Clean(o.Home) == filepath.Clean(p.Home) {
				shared = o.Ref
			}
			return nil
		})
	})
	if shared != "" {
		return refusal.New(ErrHomeNotOwned, "the home %s of profile %s is also the home of profile %s", p.Home, p.Ref, shared)
	}
	return nil
}

// ProjectConfig scans a workspace for GET /workspaces/{ref}/project-config
// (R-PCS-10): the registered folder itself.
func (g *Registry) ProjectConfig(workspaceRef, tenant string) (apitypes.ProjectConfig, error) {
	w, err := g.WorkspaceIn(workspaceRef, tenant)
	if err != nil {
		return apitypes.ProjectConfig{}, err
	}
	rep, err := projectconfig.Scan(w.Path)
	if err != nil {
		return apitypes.ProjectConfig{}, refusal.New(ErrWorkspaceUnreadable, "the workspace directory %s cannot be read on the node: %v", w.Path, err)
	}
	out := apitypes.ProjectConfig{WorkspaceRef: workspaceRef, SHA256: rep.SHA256, Files: []apitypes.ProjectConfigFile{}}
	for _, f := range rep.Files {
		pf := apitypes.ProjectConfigFile{Path: f.Path, Tools: f.Tools, Unreadable: string(f.Unreadable), Detail: f.Detail}
		for _, k := range f.Keys {
			pf.Keys = append(pf.Keys, apitypes.ProjectConfigKey{Path: k.Path, Value: k.Value})
		}
		out.Files = append(out.Files, pf)
	}
	return out, nil
}

func putJSON(tx *bbolt.Tx, bucket []byte, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Bucket(bucket).Put([]byte(key), b)
}

func getJSON(tx *bbolt.Tx, bucket []byte, key string, v any) (bool, error) {
	raw := tx.Bucket(bucket).Get([]byte(key))
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("registry: %s/%s: %w", bucket, key, err)
	}
	return true, nil
}
