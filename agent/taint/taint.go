// Package taint is the rule of docs/rules/taint-audit.md: which reads of a run a credential
// given to it refuses, by the credential's kind. The run's record keeps the
// kinds (never a value); this package says what they forbid.
package taint

import (
	"errors"
	"slices"

	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// ErrTainted: the run was given a credential whose kind refuses this
// surface (docs/rules/taint-audit.md); the sentence names the kind, never the secret.
var ErrTainted = errors.New("taint: tainted")

// Surface is a read a taint may refuse (docs/rules/taint-audit.md).
type Surface string

// Taint surfaces (docs/rules/taint-audit.md).
const (
	SurfaceActivity Surface = "activity" // GET /activity and /activity/agents (R-CRED-3, R-AGT-5)
	SurfaceMessages Surface = "messages" // GET /messages (R-CRED-4)
	SurfaceMove     Surface = "move"     // POST /move (R-MOVE-11)
	SurfaceHandoff  Surface = "handoff"  // GET and POST /handoff (R-HOF-14)
)

// Kinds is what a run's grants left on it (R-CRED-1): the kinds ever
// given, never cleared, and the first generation given a package-registry
// token (R-CRED-3).
type Kinds struct {
	Kinds       []string
	PGeneration uint32
}

// Refusal is the refusal a surface answers for a run with this taint, or
// nil (docs/rules/taint-audit.md). live and generation are the run's now. The sentence names
// the category, never the secret (R-CRED-5).
func (t Kinds) Refusal(ref string, live bool, generation uint32, surface Surface) error {
	for _, kind := range t.Kinds {
		refuse := true
		switch {
		case kind != apitypes.GrantPackageRegistryToken:
		case surface == SurfaceMessages:
			// R-CRED-4 does not name P (Q-20: the literal reading).
			refuse = false
		case surface == SurfaceActivity:
			// R-CRED-3: allowed while the P launch's own generation runs;
			// refused once stopped, and after a resume.
			refuse = !(live && generation == t.PGeneration)
		}
		if refuse {
			return refusal.New(ErrTainted, "run %s was given a %s: nobody can prove its output is free of it, so its %s is refused", ref, kind, surface)
		}
	}
	return nil
}

// Add records the kinds of grants given to generation gen.
func (t *Kinds) Add(kinds []string, gen uint32) {
	for _, k := range kinds {
		if !slices.Contains(t.Kinds, k) {
			t.Kinds = append(t.Kinds, k)
		}
		if k == apitypes.GrantPackageRegistryToken && t.PGeneration == 0 {
			t.PGeneration = gen
		}
	}
	slices.Sort(t.Kinds)
}
