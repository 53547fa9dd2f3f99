package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"mime"
	"net/http"
	"time"

	"github.com/olivares-dev/olivares/coordinator/api"
	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The sign-in routes: public API routes like the others (documented in
// openapi.yaml), served here because they set and clear the cookie.
const (
	SigninPath  = "/v1/signin"
	SignoutPath = "/v1/signout"
)

// Sign-in link lifetimes.
const (
	DefaultLinkTTL = 15 * time.Minute
	MaxLinkTTL     = 24 * time.Hour
)

// SigninRequest is POST /v1/signin: exactly one of a one-time link's
// secret (the part after # of /signin#...) or a bearer token.
type SigninRequest struct {
	Link  string `json:"link,omitempty"`
	Token string `json:"token,omitempty"`
}

// MintLink stores a one-time sign-in link for a person and returns its
// secret and expiry. ttl zero is DefaultLinkTTL; more than MaxLinkTTL is
// refused. The secret is shown once: the store keeps its hash.
func MintLink(ctx context.Context, st store.Store, principalID string, ttl time.Duration, now time.Time) (string, time.Time, error) {
	switch {
	case ttl == 0:
		ttl = DefaultLinkTTL
	case ttl < 0 || ttl > MaxLinkTTL:
		return "", time.Time{}, fmt.Errorf("ttl %v: a sign-in link lives at most %v", ttl, MaxLinkTTL)
	}
	p, err := st.GetPrincipal(ctx, principalID)
	if errors.Is(err, store.ErrNotFound) {
		return "", time.Time{}, fmt.Errorf("no principal %q (olivares-coordinator principal create makes one)", principalID)
	}
	if err != nil {
		return "", time.Time{}, err
	}
	if p.Kind != store.KindHuman {
		return "", time.Time{}, fmt.Errorf("principal %q is an agent identity; the console signs in people", principalID)
	}
	secret, err := auth.NewToken(auth.PrefixSigninLink)
	if err != nil {
		return "", time.Time{}, err
	}
	now = now.UTC()
	exp := now.Add(ttl)
	if err := st.CreateSigninLink(ctx, store.SigninLink{Hash: auth.Hash(secret), PrincipalID: p.ID, CreatedAt: now, ExpiresAt: exp}); err != nil {
		return "", time.Time{}, err
	}
	return secret, exp, nil
}

// LinkURL is the link a person opens: the secret rides in the fragment,
// which browsers never send, so no server or proxy log sees it.
func LinkURL(base, secret string) string { return base + "/signin#" + secret }

func writeErr(w http.ResponseWriter, e *apierr.Error) { apierr.Write(w, e) }

// guard refuses what a cross-site page could send: anything but a POST of
// application/json from the console's own origin. A form cannot send that
// content type, and a script of another origin would need a preflight,
// which this server never answers.
func guard(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeErr(w, apierr.New(http.StatusMethodNotAllowed, "method_not_allowed", "use POST"))
		return false
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeErr(w, apierr.New(http.StatusUnsupportedMediaType, "json_required", "send the body as Content-Type: application/json"))
		return false
	}
	if auth.CrossSite(r) {
		writeErr(w, api.CrossSiteRefused())
		return false
	}
	return true
}

func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	if !guard(w, r) {
		return
	}
	// R-SIGNIN-5: a source that failed too often is refused before the
	// link or token is looked up; each 401 below counts.
	src := auth.Source(r.RemoteAddr)
	if after, ok := c.o.Failures.Blocked(src, c.o.Now()); ok {
		writeErr(w, api.TooManyFailures(w.Header(), after))
		return
	}
	w = &failureCounter{ResponseWriter: w, count: func() { c.o.Failures.Fail(src, "", c.o.Now()) }}
	ctx := r.Context()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		writeErr(w, apierr.BadRequest("bad_body", "cannot read the request body: %v", err))
		return
	}
	var req SigninRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeErr(w, apierr.BadRequest("bad_body", "invalid JSON body: %v", err))
		return
	}
	if (req.Link == "") == (req.Token == "") {
		writeErr(w, apierr.BadRequest("bad_body", "give exactly one of \"link\" (the part after # of a sign-in link) or \"token\" (an API token)"))
		return
	}
	now := c.o.Now().UTC()
	tok, err := auth.NewToken(auth.PrefixAPIToken)
	if err != nil {
		writeErr(w, apierr.As(err))
		return
	}
	cred := store.Credential{Hash: auth.Hash(tok), ID: auth.NewID("cred_"), Kind: store.CredSession,
		Label: "console", CreatedAt: now, ExpiresAt: now.Add(c.o.SessionTTL)}
	var p store.Principal
	if req.Link != "" {
		// A link is the operator's word for the person: every tenant.
		cred.Tenant = store.AllTenants
		p, _, err = c.o.Store.RedeemSigninLink(ctx, auth.Hash(req.Link), now, cred)
		switch {
		case errors.Is(err, store.ErrTokenUsed):
			writeErr(w, apierr.New(http.StatusUnauthorized, "signin_link_used", "this sign-in link was already used; a link signs in once (olivares-coordinator signin-link mints another)"))
			return
		case errors.Is(err, store.ErrTokenExpired):
			writeErr(w, apierr.New(http.StatusUnauthorized, "signin_link_expired", "this sign-in link has expired; olivares-coordinator signin-link mints another"))
			return
		case errors.Is(err, store.ErrNotFound):
			writeErr(w, apierr.New(http.StatusUnauthorized, "signin_link_unknown", "this sign-in link is not one this coordinator issued; check that it was copied whole"))
			return
		case err != nil:
			writeErr(w, apierr.As(err))
			return
		}
	} else {
		// A pasted token proves the person; the browser gets its own
		// session credential of that person (which shares their pins,
		// snoozes and done marks, R-PIN-6), so signing out never revokes
		// the token that was pasted. That session is derived from the
		// token: of its tenant, ending no later, revoked with it, so an
		// expired session never comes back as a fresh one (R-LIFE-10).
		tp, parent, err := api.ResolveToken(ctx, c.o.Store, now, req.Token)
		var ae *apierr.Error
		if errors.As(err, &ae) && ae.Code == "unauthenticated" {
			writeErr(w, apierr.New(http.StatusUnauthorized, "unauthenticated", "this token is not known to this coordinator; check that it was copied whole"))
			return
		}
		if err != nil {
			writeErr(w, apierr.As(err))
			return
		}
		if tp.Kind != store.KindHuman {
			writeErr(w, apierr.New(http.StatusForbidden, "agent_identity_refused", "this token belongs to an agent identity; the console signs in people"))
			return
		}
		cred = parent.Derive(cred)
		if err := c.o.Store.AddCredential(ctx, cred); errors.Is(err, store.ErrNotFound) {
			writeErr(w, apierr.Unauthenticated())
			return
		} else if err != nil {
			writeErr(w, apierr.As(err))
			return
		}
		p = tp
	}
	via := "console link"
	if req.Token != "" {
		via = "console token"
	}
	c.audit(ctx, p, cred, apitypes.AuditSignedIn, via)
	setSession(w, r, tok, cred.ExpiresAt, now)
	out := api.TenantsOf(p, cred)
	exp := cred.ExpiresAt
	out.ExpiresAt = &exp
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	json.NewEncoder(w).Encode(out)
}

// failureCounter counts a failed sign-in when the answer is 401.
type failureCounter struct {
	http.ResponseWriter
	count func()
}

func (f *failureCounter) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		f.count()
	}
	f.ResponseWriter.WriteHeader(code)
}

// audit records a sign-in or sign-out in each tenant of p (R-AUD-6); the
// session exists or is gone already, so a failure is only logged.
func (c *Console) audit(ctx context.Context, p store.Principal, cred store.Credential, event, via string) {
	for t := range p.Roles {
		e := apitypes.AuditEntry{At: c.o.Now().UTC(), Tenant: t, Actor: store.AuditActor(p, cred), Event: event,
			Target: apitypes.AuditTarget{PrincipalID: p.ID, CredentialID: cred.PublicID()}}
		e.Detail, _ = json.Marshal(map[string]string{"via": via})
		if _, err := c.o.Store.AppendAudit(ctx, e); err != nil {
			log.Printf("console: audit %s: %v", event, err)
		}
	}
}

// signout revokes the cookie's credential, so a copy of the cookie is
// worth nothing after it, and clears the cookie. Without a cookie it only
// clears it (idempotent).
func (c *Console) signout(w http.ResponseWriter, r *http.Request) {
	if !guard(w, r) {
		return
	}
	if ck, err := r.Cookie(auth.SessionCookie); err == nil && ck.Value != "" {
		p, cred, perr := c.o.Store.PrincipalByCredential(r.Context(), auth.Hash(ck.Value))
		if _, err := c.o.Store.RevokeCredential(r.Context(), auth.Hash(ck.Value)); err != nil && !errors.Is(err, store.ErrNotFound) {
			writeErr(w, apierr.As(err))
			return
		}
		if perr == nil {
			c.audit(r.Context(), p, cred, apitypes.AuditSignedOut, "console")
		}
	}
	http.SetCookie(w, &http.Cookie{Name: auth.SessionCookie, Value: "", Path: "/", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}
