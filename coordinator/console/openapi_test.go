package console_test

import (
	"net/http"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/console"
	"github.com/olivares-dev/olivares/integration/contract"
)

// The sign-in routes the console serves in front of the API router are in
// openapi.yaml (coordinator/api's route test counts them as served here),
// and nothing else of the document is served here.
func TestSigninRoutesAreDocumented(t *testing.T) {
	doc := contract.Must(t).Doc()
	for _, p := range []string{console.SigninPath, console.SignoutPath} {
		item := doc.Paths.Value(p)
		if item == nil || item.Post == nil || len(item.Operations()) != 1 {
			t.Errorf("%s: want exactly POST documented", p)
			continue
		}
		if sec := item.Post.Security; sec == nil || len(*sec) != 0 {
			t.Errorf("POST %s: served without credentials, documented with them", p)
		}
		f := newFix(t)
		if r := f.do(t, http.MethodPost, p, `{}`, "Content-Type", "application/json"); r.StatusCode == http.StatusNotFound || r.StatusCode == http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %d, want the console's answer", p, r.StatusCode)
		}
	}
}
