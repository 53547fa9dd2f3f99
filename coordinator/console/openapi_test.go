package console_test

import (
	"net/http"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/console"
	"github.com/olivares-dev/olivares/coordinator/sso"
	"github.com/olivares-dev/olivares/integration/contract"
)

// The sign-in and single sign-on routes the console serves in front of
// the API router are in openapi.yaml, each with its one method and no
// credential (coordinator/api's route test counts them as served here).
// The sign-in routes answer here; the single sign-on ones need a provider
// (integration/signin drives them against a real one).
func TestSigninRoutesAreDocumented(t *testing.T) {
	doc := contract.Must(t).Doc()
	for _, r := range []struct {
		method, path string
		served       bool
	}{
		{http.MethodPost, console.SigninPath, true}, {http.MethodPost, console.SignoutPath, true},
		{http.MethodGet, sso.InfoPath, false}, {http.MethodGet, sso.LoginPath, false}, {http.MethodGet, sso.CallbackPath, false},
		{http.MethodPost, sso.StartPath, false}, {http.MethodPost, sso.CompletePath, false},
	} {
		item := doc.Paths.Value(r.path)
		if item == nil || item.GetOperation(r.method) == nil || len(item.Operations()) != 1 {
			t.Errorf("%s: want exactly %s documented", r.path, r.method)
			continue
		}
		if sec := item.GetOperation(r.method).Security; sec == nil || len(*sec) != 0 {
			t.Errorf("%s %s: served without credentials, documented with them", r.method, r.path)
		}
		if !r.served {
			continue
		}
		f := newFix(t)
		if res := f.do(t, r.method, r.path, `{}`, "Content-Type", "application/json"); res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d, want the console's answer", r.method, r.path, res.StatusCode)
		}
	}
}
