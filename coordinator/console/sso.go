package console

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/olivares-dev/olivares/coordinator/accesslog"
	"github.com/olivares-dev/olivares/coordinator/api"
	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/sso"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// FlowCookie carries a console sign-in's sealed flow from /v1/sso/login to
// /v1/sso/callback. SameSite=Lax, since the provider's redirect back is a
// navigation from its site; only the callback's path sees it.
const FlowCookie = "olivares_sso"

// SSOInfo is GET /v1/sso (R-SSO-2): whether single sign-on is on and,
// when it is, the button's name and the URL it opens.
type SSOInfo struct {
	Enabled     bool   `json:"enabled"`
	DisplayName string `json:"display_name,omitempty"`
	LoginURL    string `json:"login_url,omitempty"`
}

// SSOStartRequest is POST /v1/sso/start: the loopback address where the
// command-line client waits for the provider's answer.
type SSOStartRequest struct {
	RedirectURI string `json:"redirect_uri"`
}

// SSOStartResponse is its answer: the URL to open in a browser, and the
// sealed flow to send back with the answer.
type SSOStartResponse struct {
	AuthURL   string    `json:"auth_url"`
	Flow      string    `json:"flow"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SSOCompleteRequest is POST /v1/sso/complete: the flow and what the
// provider sent to the redirect URI.
type SSOCompleteRequest struct {
	Flow             string `json:"flow"`
	State            string `json:"state,omitempty"`
	Code             string `json:"code,omitempty"`
	Error            string `json:"error,omitempty"`
	ErrorDescription string `json:"error_description,omitempty"`
}

// SSOSession is its answer: the new session's token (shown once) with the
// person's tenants, as POST /v1/signin describes them.
type SSOSession struct {
	apitypes.Tenants
	Token string `json:"token"`
}

// serveSSO answers the single sign-on routes; false when path is not one.
func (c *Console) serveSSO(w http.ResponseWriter, r *http.Request) bool {
	p := c.o.SSO
	switch r.URL.Path {
	case sso.InfoPath, sso.LoginPath, sso.CallbackPath, sso.StartPath, sso.CompletePath:
		// Known paths only: the route label stays bounded (R-OBS-7).
		accesslog.SetRoute(r.Context(), r.URL.Path, "")
	}
	switch r.URL.Path {
	case sso.InfoPath:
		if !onlyGet(w, r) {
			return true
		}
		w.Header().Set("Cache-Control", "no-store")
		if p == nil {
			// Off: a plain answer, so the sign-in page asks without a
			// failed request in the browser's console.
			writeJSON(w, http.StatusOK, SSOInfo{})
			return true
		}
		writeJSON(w, http.StatusOK, SSOInfo{Enabled: true, DisplayName: p.DisplayName(), LoginURL: sso.LoginPath})
	case sso.LoginPath:
		if onlyGet(w, r) {
			c.ssoLogin(w, r)
		}
	case sso.CallbackPath:
		if onlyGet(w, r) {
			c.ssoCallback(w, r)
		}
	case sso.StartPath:
		if guard(w, r) {
			c.ssoStart(w, r)
		}
	case sso.CompletePath:
		if guard(w, r) {
			c.ssoComplete(w, r)
		}
	default:
		return false
	}
	return true
}

func onlyGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", http.MethodGet)
		writeErr(w, apierr.New(http.StatusMethodNotAllowed, "method_not_allowed", "use GET"))
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// ssoLogin sends the browser to the provider, with the sealed flow in a
// cookie for the callback.
func (c *Console) ssoLogin(w http.ResponseWriter, r *http.Request) {
	authURL, sealed, exp, err := c.o.SSO.Begin(r.Context(), sso.KindConsole, c.o.SSO.ConsoleRedirect(origin(r)))
	if err != nil {
		signinError(w, r, apierr.As(err))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: FlowCookie, Value: sealed, Path: sso.CallbackPath, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode, Expires: exp, MaxAge: int(sso.FlowTTL / time.Second)})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, authURL, http.StatusFound)
}

// ssoCallback completes the console's sign-in: the session cookie is set
// as POST /v1/signin sets it, and the browser goes to the console.
func (c *Console) ssoCallback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	http.SetCookie(w, &http.Cookie{Name: FlowCookie, Value: "", Path: sso.CallbackPath, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode, MaxAge: -1})
	ck, err := r.Cookie(FlowCookie)
	if err != nil || ck.Value == "" {
		signinError(w, r, apierr.New(http.StatusBadRequest, "sso_flow_invalid", "this browser did not start this sign-in (its sign-in cookie is missing); start again from the sign-in page"))
		return
	}
	res, err := c.o.SSO.Finish(r.Context(), sso.KindConsole, ck.Value, sso.AnswerOf(r.URL.Query()), "console (single sign-on)")
	if err != nil {
		signinError(w, r, apierr.As(err))
		return
	}
	setSession(w, r, res.Token, res.Credential.ExpiresAt, c.o.Now())
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// signinError takes the browser back to the sign-in page, which shows the
// code's message.
func signinError(w http.ResponseWriter, r *http.Request, e *apierr.Error) {
	q := url.Values{"sso_error": {e.Code}, "sso_message": {e.Message}}
	http.Redirect(w, r, "/signin?"+q.Encode(), http.StatusSeeOther)
}

func (c *Console) ssoStart(w http.ResponseWriter, r *http.Request) {
	var req SSOStartRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if !sso.LoopbackRedirect(req.RedirectURI) {
		writeErr(w, apierr.BadRequest("bad_redirect_uri", "redirect_uri %q: a command-line sign-in is answered on http://127.0.0.1:PORT/... (a loopback address)", req.RedirectURI))
		return
	}
	authURL, sealed, exp, err := c.o.SSO.Begin(r.Context(), sso.KindCLI, req.RedirectURI)
	if err != nil {
		writeErr(w, apierr.As(err))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, SSOStartResponse{AuthURL: authURL, Flow: sealed, ExpiresAt: exp})
}

func (c *Console) ssoComplete(w http.ResponseWriter, r *http.Request) {
	var req SSOCompleteRequest
	if !decodeBody(w, r, &req) {
		return
	}
	res, err := c.o.SSO.Finish(r.Context(), sso.KindCLI, req.Flow,
		sso.Answer{State: req.State, Code: req.Code, Error: req.Error, ErrorDescription: req.ErrorDescription}, "olivares login (single sign-on)")
	if err != nil {
		writeErr(w, apierr.As(err))
		return
	}
	out := SSOSession{Tenants: api.TenantsOf(res.Principal, res.Credential), Token: res.Token}
	exp := res.Credential.ExpiresAt
	out.ExpiresAt = &exp
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// decodeBody reads a small JSON body strictly into v.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		writeErr(w, apierr.BadRequest("bad_body", "cannot read the request body: %v", err))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, apierr.BadRequest("bad_body", "invalid JSON body: %v", err))
		return false
	}
	return true
}

// setSession puts a console session's token in the browser: the cookie
// every sign-in sets (HttpOnly, SameSite=Strict, Secure under TLS).
// setSession sets the session cookie, which the browser keeps until the
// session's credential expires and no longer.
func setSession(w http.ResponseWriter, r *http.Request, token string, expires, now time.Time) {
	maxAge := max(int(expires.Sub(now)/time.Second), 1)
	http.SetCookie(w, &http.Cookie{Name: auth.SessionCookie, Value: token, Path: "/", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, Expires: expires, MaxAge: maxAge})
}
