package supervisor

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Grant is a credential handed to a run's tool (R-GRANT-1): Value goes to the
// child as the environment variable Env, or, with AsFile, into a 0600 file
// whose path is in Env. The supervisor never stores, logs or records a
// value: the run's record keeps only the kinds (R-CRED-1).
type Grant struct {
	Kind   string
	Env    string
	AsFile bool
	Value  []byte
}

// maxGrantValue bounds one granted value.
const maxGrantValue = 64 << 10

// checkGrants refuses malformed grants before anything is written.
func checkGrants(grants []Grant, prof profile) error {
	seen := map[string]bool{}
	for _, g := range grants {
		switch {
		case !slices.Contains(apitypes.GrantKinds, g.Kind):
			return errf(http.StatusBadRequest, "bad_grant", "grant kind %q: use %s", g.Kind, strings.Join(apitypes.GrantKinds, ", "))
		case !envRE.MatchString(g.Env):
			return errf(http.StatusBadRequest, "bad_grant", "grant environment name %q: use letters, digits and '_'", g.Env)
		case seen[strings.ToUpper(g.Env)]:
			return errf(http.StatusBadRequest, "bad_grant", "two grants name the environment variable %s", g.Env)
		case prof.Env[g.Env] != "":
			return errf(http.StatusBadRequest, "bad_grant", "the profile %s already sets %s; a grant may not replace it", prof.Ref, g.Env)
		case len(g.Value) > maxGrantValue:
			return errf(http.StatusBadRequest, "bad_grant", "the value granted as %s is over %d bytes", g.Env, maxGrantValue)
		case !g.AsFile && bytes.IndexByte(g.Value, 0) >= 0:
			return errf(http.StatusBadRequest, "bad_grant", "the value granted as %s holds a NUL byte; grant it as_file", g.Env)
		}
		seen[strings.ToUpper(g.Env)] = true
	}
	return nil
}

// withGrants returns spec with the grants delivered, and a cleanup that
// removes the files it wrote (called when the generation ends). Files go
// under the agent's grants directory, one 0700 directory per run and
// generation.
func (s *Supervisor) withGrants(spec cliruntime.LaunchSpec, runRef string, gen uint32, grants []Grant) (cliruntime.LaunchSpec, func(), error) {
	if len(grants) == 0 {
		return spec, func() {}, nil
	}
	spec.Env = slices.Clone(spec.Env)
	var dir string
	cleanup := func() {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	for _, g := range grants {
		v := string(g.Value)
		if g.AsFile {
			if s.o.GrantsDir == "" {
				return spec, cleanup, errf(http.StatusUnprocessableEntity, "grant_files_unsupported", "this agent has no grants directory for a grant as_file")
			}
			if dir == "" {
				dir = filepath.Join(s.o.GrantsDir, runRef, strconv.FormatUint(uint64(gen), 10))
				if err := os.MkdirAll(dir, 0o700); err != nil {
					return spec, cleanup, fmt.Errorf("grants: %w", err)
				}
			}
			p := filepath.Join(dir, strings.ToLower(g.Env))
			if err := os.WriteFile(p, g.Value, 0o600); err != nil {
				cleanup()
				return spec, func() {}, fmt.Errorf("grants: write %s: %w", g.Env, err)
			}
			v = p
		}
		spec.Env = append(spec.Env, g.Env+"="+v)
	}
	return spec, cleanup, nil
}

// taint adds the kinds of grants to the record's taint, which is never
// cleared (R-CRED-1, R-HW-6), and remembers the generation of the first
// launch given a package-registry token (R-CRED-3).
func taint(rec *record, grants []Grant, gen uint32) {
	for _, g := range grants {
		if !slices.Contains(rec.Taint, g.Kind) {
			rec.Taint = append(rec.Taint, g.Kind)
		}
		if g.Kind == apitypes.GrantPackageRegistryToken && rec.PGeneration == 0 {
			rec.PGeneration = gen
		}
	}
	slices.Sort(rec.Taint)
}

// Taint surfaces (docs/rules/taint-audit.md).
const (
	SurfaceActivity = "activity" // GET /activity and /activity/agents (R-CRED-3, R-AGT-5)
	SurfaceMessages = "messages" // GET /messages (R-CRED-4)
	SurfaceMove     = "move"     // POST /move (R-MOVE-11)
	SurfaceHandoff  = "handoff"  // GET and POST /handoff (R-HOF-14)
)

// TaintRefusal is the 409 a surface answers for a tainted run, or nil
// (docs/rules/taint-audit.md). The refusal names the category, never the secret (R-CRED-5).
func (s *Supervisor) TaintRefusal(ref, surface string) error {
	r, err := s.get(ref)
	if err != nil {
		return err
	}
	r.mu.Lock()
	rec, live := r.rec, r.gen != nil
	r.mu.Unlock()
	return taintRefusal(rec, live, surface)
}

func taintRefusal(rec record, live bool, surface string) error {
	for _, kind := range rec.Taint {
		refuse := true
		switch {
		case kind != apitypes.GrantPackageRegistryToken:
		case surface == SurfaceMessages:
			// R-CRED-4 does not name P (Q-20: the literal reading).
			refuse = false
		case surface == SurfaceActivity:
			// R-CRED-3: allowed while the P launch's own generation runs;
			// refused once stopped, and after a resume.
			refuse = !(live && rec.Generation == rec.PGeneration)
		}
		if refuse {
			return errf(http.StatusConflict, "tainted", "run %s was given a %s: nobody can prove its output is free of it, so its %s is refused", rec.RunRef, kind, surface)
		}
	}
	return nil
}
