package console

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/coordinator/sso"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/integration/idp"
)

// Single sign-on in the real browser: the sign-in page offers "Sign in
// with Test IdP", the provider's own login page takes the password, and
// the browser comes back signed in to the sessions list with the role the
// person's groups map to. A person the rules do not admit comes back to
// the sign-in page with the reason (R-SSO-2, R-SSO-5).
func TestSSOSignInInBrowser(t *testing.T) {
	people := []idp.User{
		{Subject: "sub-grace", Username: "grace", Password: "pw-grace", Name: "Grace Hopper", Email: "grace@example.com", EmailVerified: true, Groups: []string{"contractors"}},
		{Subject: "sub-eve", Username: "eve", Password: "pw-eve", Name: "Eve", Email: "eve@elsewhere.org", EmailVerified: true, Groups: []string{"contractors"}},
	}
	p := idp.Start(t, people...)
	env := integration.NewEnv(t, integration.Options{Configure: func(c *coordd.Config) {
		c.OIDC = sso.Config{Issuer: p.Issuer, ClientID: idp.ClientID, ClientSecret: idp.ClientSecret,
			Scopes: []string{"openid", "email", "profile", "groups"}, DisplayName: "Test IdP",
			AllowedEmailDomains: []string{"example.com"},
			Roles:               []sso.RoleRule{{Claim: "groups", Value: "contractors", Tenant: integration.Tenant, Role: store.RoleViewer}}}
	}})

	tab := browser.New(t)
	tab.Navigate(env.APIURL() + "/signin")
	tab.Await("the single sign-on button", `(document.querySelector('#sso')||{}).textContent === 'Sign in with Test IdP'`, wait)
	tab.Click("#sso")
	tab.Do("the provider's login page", wait, chromedp.WaitVisible("#username"))
	tab.Type("#username", "grace")
	tab.Type("#password", "pw-grace")
	tab.Click("#login")
	tab.Do("the console", wait, chromedp.WaitVisible(".list-head h1"))
	tab.Await("the sessions list", `location.pathname === '/' && !!document.querySelector('.list-head h1')`, wait)
	if got := browser.Eval[int](tab, `fetch('/v1/tenants').then(r => r.status)`); got != http.StatusOK {
		t.Fatalf("GET /v1/tenants with the single sign-on session: %d", got)
	}
	if got := browser.Eval[string](tab, `fetch('/v1/tenants').then(r => r.json()).then(j => j.name + ' ' + j.items[0].role)`); got != "Grace Hopper viewer" {
		t.Fatalf("the signed-in person: got %q, want Grace Hopper viewer", got)
	}
	// A viewer sees no launch control (R-AUTH-2).
	tab.Await("the viewer's empty list, without New session", `!!document.querySelector('.empty') && !document.querySelector('#launch')`, wait)

	// Eve's address is not at an admitted domain.
	tab2 := browser.New(t)
	tab2.Navigate(env.APIURL() + "/signin")
	tab2.Await("the single sign-on button", `!!document.querySelector('#sso')`, wait)
	tab2.Click("#sso")
	tab2.Do("the provider's login page", wait, chromedp.WaitVisible("#username"))
	tab2.Type("#username", "eve")
	tab2.Type("#password", "pw-eve")
	tab2.Click("#login")
	tab2.Do("the sign-in page", wait, chromedp.WaitVisible(".signin .banner.error"))
	tab2.Await("the refusal on the sign-in page", `location.pathname === '/signin' && (document.querySelector('.signin .banner.error')||{}).textContent?.includes('elsewhere.org')`, wait)
}
