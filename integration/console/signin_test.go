package console

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-ACCT-5: the profile screen's Sign in, at 1280×800 and 390×844, against
// the fakecli peer on the node (it prints what claude setup-token and
// Codex's device-code sign-in print and, because no real sign-in server
// runs here, takes a code or a device approval). Claude Code: the URL to
// open, the code pasted back, then signed in with the token kept in the
// profile's environment on the node. Codex: the URL and the code to enter,
// then signed in as whom Codex says. API key: the key goes to the vault.
func TestProfileSignInScreen(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	tab := f.signIn()
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
		tab.Viewport(size.w, size.h)
		fits := func(what string) {
			t.Helper()
			if w := browser.Eval[int](tab, `document.documentElement.scrollWidth`); w > int(size.w) {
				t.Errorf("%s %s: the page is %d px wide, wider than the %d px viewport", size.name, what, w, size.w)
			}
		}
		c := f.profile("claude", nil)
		tab.Navigate(f.env.APIURL() + "/profiles")
		tab.Await("the Sign in action", fmt.Sprintf(`!!document.querySelector('#profiles .card[data-ref=%s] .act-signin')`, js(c.Ref)), wait)
		tab.Await("the card's account", fmt.Sprintf(`(document.querySelector('#profiles .card[data-ref=%s] .account')?.textContent || '').startsWith('Account: not signed in')`, js(c.Ref)), wait)
		tab.Exec(fmt.Sprintf(`document.querySelector('#profiles .card[data-ref=%s] .act-signin').click()`, js(c.Ref)))
		tab.Await("the sign-in URL", `(document.querySelector('#signin-url')?.href || '').startsWith('https://claude.com/cai/oauth/authorize?')`, wait)
		for _, sel := range []string{"#signin-url", "#signin-code", "#signin-send"} {
			if !browser.Eval[bool](tab, inViewport(sel)) {
				t.Errorf("%s: %s is not in the viewport", size.name, sel)
			}
		}
		fits("with the sign-in URL")
		shoot(t, tab, "signin-claude-"+size.name)
		tab.Type("#signin-code", "ok-console#fakecli")
		tab.Click("#signin-send")
		tab.Await("signed in", `(document.querySelector('#signin-done')?.textContent || '').startsWith('Signed in.')`, wait)
		var got apitypes.Profile
		f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/profiles/"+c.Ref, nil, &got)
		if !slices.Contains(got.EnvKeys, "CLAUDE_CODE_OAUTH_TOKEN") {
			t.Fatalf("%s: env_keys %v after the console's sign-in, want CLAUDE_CODE_OAUTH_TOKEN", size.name, got.EnvKeys)
		}
		tab.Click("#signin-close")

		x := f.profile("codex", nil)
		tab.Navigate(f.env.APIURL() + "/profiles")
		tab.Await("the Sign in action", fmt.Sprintf(`!!document.querySelector('#profiles .card[data-ref=%s] .act-signin')`, js(x.Ref)), wait)
		tab.Exec(fmt.Sprintf(`document.querySelector('#profiles .card[data-ref=%s] .act-signin').click()`, js(x.Ref)))
		tab.Await("the device code", `document.querySelector('#signin-user-code')?.textContent === 'FAKE-1234'`, wait)
		fits("with the device code")
		shoot(t, tab, "signin-codex-"+size.name)
		if err := os.WriteFile(filepath.Join(x.Home, ".codex", "fakecli-approve"), []byte("ok"), 0o600); err != nil {
			t.Fatal(err)
		}
		tab.Await("signed in as whom Codex says", `(document.querySelector('#signin-done')?.textContent || '').startsWith('Signed in as ada@example.com (plus).')`, wait)
		tab.Click("#signin-close")
		// R-ACCT-9: the card says it too.
		tab.Await("the card's account", fmt.Sprintf(`(document.querySelector('#profiles .card[data-ref=%s] .account')?.textContent || '').startsWith('Account: signed in as ada@example.com (plus)')`, js(x.Ref)), wait)
	}

	// R-ACCT-7: the API key goes to the vault, named for the profile.
	g := f.profile("gemini", nil)
	tab.Navigate(f.env.APIURL() + "/profiles")
	tab.Await("the API key action", fmt.Sprintf(`!!document.querySelector('#profiles .card[data-ref=%s] .act-apikey')`, js(g.Ref)), wait)
	tab.Exec(fmt.Sprintf(`document.querySelector('#profiles .card[data-ref=%s] .act-signin').click()`, js(g.Ref)))
	tab.Await("no sign-in to relay", `(document.querySelector('#signin-state')?.textContent || '').includes('API key')`, wait)
	tab.Exec(`document.querySelector('#signin-dialog').close()`)
	tab.Exec(fmt.Sprintf(`document.querySelector('#profiles .card[data-ref=%s] .act-apikey').click()`, js(g.Ref)))
	tab.Await("the API key dialog", `!!document.querySelector('#key-value')`, wait)
	tab.Type("#key-value", "AIza-console-test")
	tab.Click("#key-save")
	tab.Await("kept", `(document.querySelector('#key-done')?.textContent || '').includes('GEMINI_API_KEY')`, wait)
	var secrets apitypes.SecretList
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/vault/secrets", nil, &secrets)
	i := slices.IndexFunc(secrets.Items, func(s apitypes.Secret) bool { return s.Name == g.Name+"-api-key" })
	if i < 0 {
		t.Fatalf("vault %+v, want %s-api-key", secrets.Items, g.Name)
	}
	// It is the profile's key now, and the card says so.
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/profiles/"+g.Ref, nil, &g)
	if g.APIKeyRef != secrets.Items[i].Ref {
		t.Fatalf("profile api_key_ref %q, want %s", g.APIKeyRef, secrets.Items[i].Ref)
	}
	tab.Click("#apikey-dialog button")
	tab.Await("the card's account", fmt.Sprintf(`(document.querySelector('#profiles .card[data-ref=%s] .account')?.textContent || '').includes('API key')`, js(g.Ref)), wait)
}
