package supervisor

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Grant is a credential handed to a run's tool (docs/rules/taint-audit.md): Value goes to the
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
func checkGrants(grants []Grant, prof registry.Profile) error {
	seen := map[string]bool{}
	for _, g := range grants {
		switch {
		case !slices.Contains(apitypes.GrantKinds, g.Kind):
			return refusal.New(ErrBadGrant, "grant kind %q: use %s", g.Kind, strings.Join(apitypes.GrantKinds, ", "))
		case !registry.ValidEnvName(g.Env):
			return refusal.New(ErrBadGrant, "grant environment name %q: use letters, digits and '_'", g.Env)
		case seen[strings.ToUpper(g.Env)]:
			return refusal.New(ErrBadGrant, "two grants name the environment variable %s", g.Env)
		case prof.Env[g.Env] != "":
			return refusal.New(ErrBadGrant, "the profile %s already sets %s; a grant may not replace it", prof.Ref, g.Env)
		case len(g.Value) > maxGrantValue:
			return refusal.New(ErrBadGrant, "the value granted as %s is over %d bytes", g.Env, maxGrantValue)
		case !g.AsFile && bytes.IndexByte(g.Value, 0) >= 0:
			return refusal.New(ErrBadGrant, "the value granted as %s holds a NUL byte; grant it as_file", g.Env)
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
				return spec, cleanup, refusal.New(ErrGrantFilesUnsupported, "this agent has no grants directory for a grant as_file")
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

// addTaint adds the kinds of grants to the record's taint, which is never
// cleared (R-CRED-1, R-HW-6), and remembers the generation of the first
// launch given a package-registry token (R-CRED-3).
func addTaint(rec *record, grants []Grant, gen uint32) {
	t := rec.taint()
	kinds := make([]string, len(grants))
	for i, g := range grants {
		kinds[i] = g.Kind
	}
	t.Add(kinds, gen)
	rec.Taint, rec.PGeneration = t.Kinds, t.PGeneration
}
