package supervisor

import (
	"errors"
	"net/http"
	"os"
	pathpkg "path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/projectconfig"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// --- profiles and workspaces ---

var (
	refRE  = regexp.MustCompile(`^[a-z]+_[A-Za-z0-9]{4,64}$`)
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	envRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

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
}

func (pp ProfilePolicy) check(tool string) error {
	if pp.EngineHooks && tool != string(cliruntime.KindClaude) {
		return errf(http.StatusBadRequest, "bad_policy", "engine_hooks applies to Claude Code profiles only, not %s", tool)
	}
	if len(pp.DeniedTools) > 0 && !pp.EngineHooks {
		return errf(http.StatusBadRequest, "bad_policy", "denied_tools needs engine_hooks: only the engine's hook can refuse a tool")
	}
	for _, tl := range pp.DeniedTools {
		if tl == "" || len(tl) > 128 || strings.ContainsAny(tl, " \t\n") {
			return errf(http.StatusBadRequest, "bad_policy", "denied tool %q: give a tool name such as Bash, or *", tl)
		}
	}
	for _, w := range pp.AllowedWorkspaces {
		if !refRE.MatchString(w) {
			return errf(http.StatusBadRequest, "bad_policy", "allowed workspace %q is not a workspace ref", w)
		}
	}
	return nil
}

// CreateProfile stores a profile. Its home is created (0700) when missing,
// with the tool's config home under it; a profile without a home gets one
// under ProfilesDir.
func (s *Supervisor) CreateProfile(p ProfileParams) (apitypes.Profile, error) {
	d := s.o.Drivers[p.Tool]
	switch {
	case !refRE.MatchString(p.Ref) || p.Tenant == "":
		return apitypes.Profile{}, errf(http.StatusBadRequest, "bad_request", "profile ref %q or tenant is malformed", p.Ref)
	case d == nil:
		return apitypes.Profile{}, errf(http.StatusBadRequest, "unknown_tool", "tool %q is not one this agent drives; use claude, codex, grok, gemini or opencode", p.Tool)
	case !nameRE.MatchString(p.Name):
		return apitypes.Profile{}, errf(http.StatusBadRequest, "bad_name", "profile name %q: use 1-64 letters, digits, '.', '_' or '-'", p.Name)
	}
	if err := p.Policy.check(p.Tool); err != nil {
		return apitypes.Profile{}, err
	}
	home := p.Home
	if home == "" {
		if s.o.ProfilesDir == "" {
			return apitypes.Profile{}, errf(http.StatusBadRequest, "home_required", "this agent has no profiles directory; give the profile a home")
		}
		home = filepath.Join(s.o.ProfilesDir, p.Ref)
	}
	if !filepath.IsAbs(home) {
		return apitypes.Profile{}, errf(http.StatusBadRequest, "bad_home", "profile home %q must be an absolute path on the node", home)
	}
	home = filepath.Clean(home)
	var env []string
	for k, v := range p.Env {
		if !envRE.MatchString(k) {
			return apitypes.Profile{}, errf(http.StatusBadRequest, "bad_env", "environment name %q: use letters, digits and '_'", k)
		}
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	// A dry run of the launch command line validates the env against the
	// driver (reserved variables, NUL bytes) before anything is stored.
	if _, err := d.Launch(cliruntime.LaunchSpec{Home: home, Workdir: "/", Env: env}); err != nil {
		return apitypes.Profile{}, errf(http.StatusBadRequest, "bad_env", "%v", err)
	}
	for _, dir := range []string{home, filepath.Join(home, "."+p.Tool)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return apitypes.Profile{}, errf(http.StatusUnprocessableEntity, "bad_home", "cannot create the profile home: %v", err)
		}
	}
	rec := profile{Ref: p.Ref, Tenant: p.Tenant, Tool: p.Tool, Name: p.Name, Home: home, Env: p.Env, CreatedAt: time.Now().UTC(),
		Inactive: p.Policy.Inactive, LaunchRequiresApproval: p.Policy.LaunchRequiresApproval,
		AllowedWorkspaces: p.Policy.AllowedWorkspaces, EngineHooks: p.Policy.EngineHooks, DeniedTools: p.Policy.DeniedTools}
	err := s.o.DB.Update(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketProfiles).Get([]byte(p.Ref)) != nil {
			return errf(http.StatusConflict, "exists", "profile %q exists", p.Ref)
		}
		return putJSON(tx, bucketProfiles, p.Ref, rec)
	})
	if err != nil {
		return apitypes.Profile{}, err
	}
	return rec.view(), nil
}

func (p profile) view() apitypes.Profile {
	v := apitypes.Profile{Ref: p.Ref, Tenant: p.Tenant, Tool: p.Tool, Name: p.Name, Home: p.Home, CreatedAt: p.CreatedAt,
		Active: !p.Inactive, LaunchRequiresApproval: p.LaunchRequiresApproval, AllowedWorkspaces: p.AllowedWorkspaces,
		EngineHooks: p.EngineHooks, DeniedTools: p.DeniedTools}
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
func (s *Supervisor) CreateWorkspace(p WorkspaceParams) (apitypes.Workspace, error) {
	ref, tenant, name, path := p.Ref, p.Tenant, p.Name, p.Path
	switch p.DLP {
	case "":
		p.DLP = apitypes.DLPAllow
	case apitypes.DLPAllow, apitypes.DLPDeny:
	default:
		return apitypes.Workspace{}, errf(http.StatusBadRequest, "bad_dlp", "dlp %q: use allow or deny", p.DLP)
	}
	switch {
	case p.MaxReadBytes < 0:
		return apitypes.Workspace{}, errf(http.StatusBadRequest, "bad_max_read_bytes", "max_read_bytes %d: give a positive byte count, or none for the default (1 MiB)", p.MaxReadBytes)
	case p.MaxReadBytes == 0:
		p.MaxReadBytes = apitypes.DefaultMaxReadBytes
	}
	for _, sp := range p.AllowedSubpaths {
		if sp == "" || sp == "." || pathpkg.IsAbs(sp) || pathpkg.Clean(sp) != sp || sp == ".." || strings.HasPrefix(sp, "../") {
			return apitypes.Workspace{}, errf(http.StatusBadRequest, "bad_subpath", "allowed sub-path %q: give a clean relative path inside the workspace, like src or docs/api", sp)
		}
	}
	switch {
	case !refRE.MatchString(ref) || tenant == "":
		return apitypes.Workspace{}, errf(http.StatusBadRequest, "bad_request", "workspace ref %q or tenant is malformed", ref)
	case !nameRE.MatchString(name):
		return apitypes.Workspace{}, errf(http.StatusBadRequest, "bad_name", "workspace name %q: use 1-64 letters, digits, '.', '_' or '-'", name)
	case !filepath.IsAbs(path):
		return apitypes.Workspace{}, errf(http.StatusBadRequest, "bad_path", "workspace path %q must be an absolute path on the node", path)
	}
	path = filepath.Clean(path)
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return apitypes.Workspace{}, errf(http.StatusUnprocessableEntity, "bad_path", "workspace path %s is not a directory on node: %v", path, errOrNotDir(err))
	}
	w := workspace{Ref: ref, Tenant: tenant, Name: name, Path: path, ReadOnly: p.ReadOnly,
		AllowedSubpaths: p.AllowedSubpaths, MaxReadBytes: p.MaxReadBytes, DLP: p.DLP, CreatedAt: time.Now().UTC()}
	err = s.o.DB.Update(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketWorkspaces).Get([]byte(ref)) != nil {
			return errf(http.StatusConflict, "exists", "workspace %q exists", ref)
		}
		return putJSON(tx, bucketWorkspaces, ref, w)
	})
	if err != nil {
		return apitypes.Workspace{}, err
	}
	return w.view(), nil
}

func errOrNotDir(err error) error {
	if err != nil {
		return err
	}
	return errors.New("not a directory")
}

func (w workspace) view() apitypes.Workspace {
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

func (s *Supervisor) profile(ref string) (profile, bool, error) {
	var p profile
	var ok bool
	err := s.o.DB.View(func(tx *bbolt.Tx) error {
		var err error
		ok, err = getJSON(tx, bucketProfiles, ref, &p)
		return err
	})
	return p, ok, err
}

func (s *Supervisor) workspace(ref string) (workspace, bool, error) {
	var w workspace
	var ok bool
	err := s.o.DB.View(func(tx *bbolt.Tx) error {
		var err error
		ok, err = getJSON(tx, bucketWorkspaces, ref, &w)
		return err
	})
	return w, ok, err
}

// ProfileUpdate changes a profile's policy; nil fields stay as they are.
type ProfileUpdate struct {
	Active                 *bool
	LaunchRequiresApproval *bool
	AllowedWorkspaces      *[]string
	EngineHooks            *bool
	DeniedTools            *[]string
}

// UpdateProfile changes the policy of a profile of tenant. It applies to
// the next launch or resume (R-MOVE-10), never to a live process.
func (s *Supervisor) UpdateProfile(ref, tenant string, u ProfileUpdate) (apitypes.Profile, error) {
	var out profile
	err := s.o.DB.Update(func(tx *bbolt.Tx) error {
		var p profile
		ok, err := getJSON(tx, bucketProfiles, ref, &p)
		if err != nil {
			return err
		}
		if !ok || p.Tenant != tenant {
			return notFound("profile", ref)
		}
		pol := ProfilePolicy{Inactive: p.Inactive, LaunchRequiresApproval: p.LaunchRequiresApproval,
			AllowedWorkspaces: p.AllowedWorkspaces, EngineHooks: p.EngineHooks, DeniedTools: p.DeniedTools}
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
		p.Inactive, p.LaunchRequiresApproval, p.AllowedWorkspaces, p.EngineHooks = pol.Inactive, pol.LaunchRequiresApproval, pol.AllowedWorkspaces, pol.EngineHooks
		p.DeniedTools = pol.DeniedTools
		out = p
		return putJSON(tx, bucketProfiles, ref, p)
	})
	if err != nil {
		return apitypes.Profile{}, err
	}
	return out.view(), nil
}

// accepts refuses a launch, resume or move target the profile's policy
// does not take (R-MOVE-3): an inactive profile, or a workspace it is not
// allowed in. workspaceRef "" is a run in the profile's home.
func (p profile) accepts(workspaceRef string) error {
	if p.Inactive {
		return errf(http.StatusConflict, "profile_inactive", "profile %s is inactive; activate it (olivares profile update %s --active) or pick another", p.Ref, p.Ref)
	}
	if len(p.AllowedWorkspaces) > 0 && !slices.Contains(p.AllowedWorkspaces, workspaceRef) {
		where := "its own home"
		if workspaceRef != "" {
			where = "workspace " + workspaceRef
		}
		return errf(http.StatusConflict, "workspace_not_allowed", "profile %s does not take runs in %s; it allows %s", p.Ref, where, strings.Join(p.AllowedWorkspaces, ", "))
	}
	return nil
}

// checkProjectConfig is the repository-config gate (R-PCS-12, R-PCS-19):
// a start of a tool that reads a flagged file in dir, the directory the
// process will start in, is 409 unless approved is the directory's current
// hash. There is no way around it (R-PCS-14). Runs outside a workspace (in
// the profile's own home) carry no repository and are not gated.
func (s *Supervisor) checkProjectConfig(p profile, workspaceRef, dir, approved string) error {
	if workspaceRef == "" {
		return nil
	}
	rep, err := projectconfig.Scan(dir)
	if err != nil {
		return errf(http.StatusServiceUnavailable, "workspace_unreadable", "the workspace directory %s cannot be read on the node: %v", dir, err)
	}
	if ref := projectconfig.Check(rep, p.Tool, s.engineHooks(p), approved); ref != nil {
		return errf(http.StatusConflict, projectconfig.Code, "%s", ref.Message(workspaceRef))
	}
	return nil
}

// ProjectConfig scans a workspace for GET /workspaces/{ref}/project-config
// (R-PCS-10): the registered folder itself.
func (s *Supervisor) ProjectConfig(workspaceRef, tenant string) (apitypes.ProjectConfig, error) {
	w, ok, err := s.workspace(workspaceRef)
	if err != nil {
		return apitypes.ProjectConfig{}, err
	}
	if !ok || w.Tenant != tenant {
		return apitypes.ProjectConfig{}, notFound("workspace", workspaceRef)
	}
	rep, err := projectconfig.Scan(w.Path)
	if err != nil {
		return apitypes.ProjectConfig{}, errf(http.StatusServiceUnavailable, "workspace_unreadable", "the workspace directory %s cannot be read on the node: %v", w.Path, err)
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
