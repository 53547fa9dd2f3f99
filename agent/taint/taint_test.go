package taint

import (
	"errors"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// docs/rules/taint-audit.md, R-CRED-3/4/5, R-MOVE-11, R-HOF-14: which surface each grant kind
// refuses, and when. V, R and M refuse all four surfaces for good; P
// refuses move and handoff, allows messages (R-CRED-4 names only the
// others, Q-20) and allows activity only while the generation P was
// given to runs.
func TestTaintRefusalByKind(t *testing.T) {
	surfaces := []Surface{SurfaceActivity, SurfaceMessages, SurfaceMove, SurfaceHandoff}
	type when struct {
		name       string
		live       bool
		generation uint32
	}
	whens := []when{{"first generation live", true, 1}, {"stopped", false, 1}, {"resumed", true, 2}}
	for _, kind := range []string{apitypes.GrantVaultSecret, apitypes.GrantRepositoryCredential, apitypes.GrantManagedCredential, apitypes.GrantPackageRegistryToken} {
		for _, w := range whens {
			k := Kinds{Kinds: []string{kind}}
			if kind == apitypes.GrantPackageRegistryToken {
				k.PGeneration = 1
			}
			for _, surface := range surfaces {
				want := true
				if kind == apitypes.GrantPackageRegistryToken {
					switch surface {
					case SurfaceMessages:
						want = false
					case SurfaceActivity:
						want = !(w.live && w.generation == 1)
					}
				}
				err := k.Refusal("run_1", w.live, w.generation, surface)
				got := err != nil
				if got != want {
					t.Errorf("%s, %s, %s: refused %v, want %v", kind, w.name, surface, got, want)
					continue
				}
				if got && (!errors.Is(err, ErrTainted) || !strings.Contains(err.Error(), kind)) {
					t.Errorf("%s, %s, %s: %v, want ErrTainted naming the kind", kind, w.name, surface, err)
				}
			}
		}
	}
	// No taint, no refusal; a second kind adds its own refusals.
	if err := (Kinds{}).Refusal("run_1", false, 1, SurfaceMove); err != nil {
		t.Errorf("untainted: %v", err)
	}
	both := Kinds{Kinds: []string{apitypes.GrantPackageRegistryToken, apitypes.GrantVaultSecret}, PGeneration: 1}
	if err := both.Refusal("run_1", true, 1, SurfaceActivity); err == nil {
		t.Error("a vault secret beside a package-registry token: activity allowed")
	}
}
