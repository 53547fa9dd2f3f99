// Package sso signs people in with the organisation's OpenID Connect
// provider: the authorization code flow with PKCE (S256), the ID token
// checked with go-oidc (signature, issuer, audience, expiry, nonce), the
// claims mapped to tenants and roles by the coordinator's [oidc] table, and
// the person's principal found, or created on a first sign-in, by issuer
// and subject. The result is a session credential like any other sign-in's.
//
// sso never identifies a person by email, never logs a token, a code or a
// secret, and keeps no state between the two halves of a sign-in: the flow
// travels sealed with the client (a cookie, or the CLI's request).
package sso

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/vault"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The routes (served by the console package, documented in openapi.yaml).
const (
	// InfoPath: GET, whether single sign-on is on and what the button says.
	InfoPath = "/v1/sso"
	// LoginPath: GET, the console's start: a redirect to the provider.
	LoginPath = "/v1/sso/login"
	// CallbackPath: GET, where the provider sends the browser back.
	CallbackPath = "/v1/sso/callback"
	// StartPath and CompletePath: POST, the two halves for a client that
	// receives the provider's answer itself (olivares login --sso).
	StartPath    = "/v1/sso/start"
	CompletePath = "/v1/sso/complete"
)

// FlowTTL bounds a sign-in from its start to its callback.
const FlowTTL = 10 * time.Minute

// Flow kinds: a flow started for the console cannot be completed by the
// CLI's route, and the other way round.
const (
	KindConsole = "console"
	KindCLI     = "cli"
)

// flow is what the two halves of one sign-in share, sealed.
type flow struct {
	Kind     string    `json:"k"`
	State    string    `json:"s"`
	Nonce    string    `json:"n"`
	Verifier string    `json:"v"`
	Redirect string    `json:"r"`
	Expires  time.Time `json:"e"`
}

// Provider is the coordinator's side of single sign-on.
type Provider struct {
	cfg    Config
	secret string
	st     store.Store
	seal   *vault.Vault
	now    func() time.Time
	client *http.Client

	mu       sync.Mutex
	op       *oidc.Provider
	verifier *oidc.IDTokenVerifier
}

// New returns the provider of cfg (checked). v seals the flows: replicas
// that share the vault key complete each other's sign-ins. The provider's
// discovery document is fetched at the first sign-in, and again after a
// failure, so the coordinator starts while the provider is down.
func New(cfg Config, st store.Store, v *vault.Vault, now func() time.Time) (*Provider, error) {
	if !cfg.Enabled() {
		return nil, errors.New("sso: no issuer configured")
	}
	if now == nil {
		now = time.Now
	}
	secret := cfg.ClientSecret
	if cfg.ClientSecretFile != "" {
		b, err := os.ReadFile(cfg.ClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("config: oidc.client_secret_file: %w", err)
		}
		if secret = strings.TrimSpace(string(b)); secret == "" {
			return nil, fmt.Errorf("config: oidc.client_secret_file %s is empty", cfg.ClientSecretFile)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("config: oidc.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("config: oidc.ca_file %s holds no PEM certificate", cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &Provider{cfg: cfg, secret: secret, st: st, seal: v, now: now,
		client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

// DisplayName is what the console's button names.
func (p *Provider) DisplayName() string { return p.cfg.DisplayName }

// SessionTTL is the lifetime of the sessions it makes.
func (p *Provider) SessionTTL() time.Duration { return p.cfg.SessionTTL.Duration }

// ConsoleRedirect is the console's callback URL for a request that reached
// the console at origin (scheme://host).
func (p *Provider) ConsoleRedirect(origin string) string {
	if p.cfg.RedirectURL != "" {
		return p.cfg.RedirectURL
	}
	return origin + CallbackPath
}

func (p *Provider) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, p.client)
}

// discover returns the provider's endpoints, fetching them once.
func (p *Provider) discover(ctx context.Context) (*oidc.Provider, *oidc.IDTokenVerifier, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.op != nil {
		return p.op, p.verifier, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	op, err := oidc.NewProvider(p.ctx(ctx), p.cfg.Issuer)
	if err != nil {
		return nil, nil, apierr.New(http.StatusBadGateway, "sso_provider_unreachable",
			"the identity provider at %s did not answer its discovery document (%v); check oidc.issuer and that this coordinator reaches it", p.cfg.Issuer, err)
	}
	p.op = op
	p.verifier = op.Verifier(&oidc.Config{ClientID: p.cfg.ClientID, Now: p.now})
	return p.op, p.verifier, nil
}

func (p *Provider) oauth(op *oidc.Provider, redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.secret, Endpoint: op.Endpoint(), RedirectURL: redirect, Scopes: p.cfg.Scopes}
}

// Begin starts a sign-in whose answer the provider sends to redirect: it
// returns the provider's authorization URL to open and the sealed flow the
// client hands back to Finish.
func (p *Provider) Begin(ctx context.Context, kind, redirect string) (authURL, sealed string, expires time.Time, err error) {
	op, _, err := p.discover(ctx)
	if err != nil {
		return "", "", time.Time{}, err
	}
	state, err := auth.NewToken("")
	if err != nil {
		return "", "", time.Time{}, err
	}
	nonce, err := auth.NewToken("")
	if err != nil {
		return "", "", time.Time{}, err
	}
	f := flow{Kind: kind, State: state, Nonce: nonce, Verifier: oauth2.GenerateVerifier(), Redirect: redirect, Expires: p.now().Add(FlowTTL).UTC()}
	raw, _ := json.Marshal(f)
	box, err := p.seal.Seal("", aad(kind), raw)
	if err != nil {
		return "", "", time.Time{}, err
	}
	authURL = p.oauth(op, redirect).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(f.Verifier))
	return authURL, base64.RawURLEncoding.EncodeToString(box), f.Expires, nil
}

func aad(kind string) string { return "sso-flow:" + kind }

// Result is a completed sign-in: the person and their new session.
type Result struct {
	Principal  store.Principal
	Token      string
	Credential store.Credential
	// Created reports the person's first sign-in.
	Created bool
}

// Answer is what the provider sent back to the redirect URL.
type Answer struct {
	State, Code string
	// Error and ErrorDescription are the provider's refusal, if any.
	Error, ErrorDescription string
}

// AnswerOf reads the provider's answer from a redirect's query.
func AnswerOf(q url.Values) Answer {
	return Answer{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error"), ErrorDescription: q.Get("error_description")}
}

// Finish completes the sign-in the sealed flow started: it checks the
// answer's state, exchanges the code (with the PKCE verifier), verifies
// the ID token, applies the email domains and the role rules, and stores
// the person's principal and a new session credential.
func (p *Provider) Finish(ctx context.Context, kind, sealed string, a Answer, label string) (Result, error) {
	f, err := p.open(kind, sealed)
	if err != nil {
		return Result{}, err
	}
	if a.Error != "" {
		msg := a.Error
		if a.ErrorDescription != "" {
			msg += ": " + a.ErrorDescription
		}
		return Result{}, apierr.New(http.StatusUnauthorized, "sso_refused", "the identity provider refused the sign-in (%s)", clip(msg, 300))
	}
	if a.State == "" || subtle.ConstantTimeCompare([]byte(a.State), []byte(f.State)) != 1 {
		return Result{}, apierr.New(http.StatusBadRequest, "sso_state_mismatch", "the identity provider's answer does not belong to this sign-in; start again")
	}
	if a.Code == "" {
		return Result{}, apierr.New(http.StatusBadRequest, "sso_code_missing", "the identity provider's answer carries no authorization code; start again")
	}
	op, verifier, err := p.discover(ctx)
	if err != nil {
		return Result{}, err
	}
	cctx := p.ctx(ctx)
	tok, err := p.oauth(op, f.Redirect).Exchange(cctx, a.Code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return Result{}, apierr.New(http.StatusUnauthorized, "sso_code_rejected",
				"the identity provider refused the authorization code (%s); start again, and check oidc.client_id and oidc.client_secret if it persists", clip(re.ErrorCode+" "+re.ErrorDescription, 200))
		}
		return Result{}, apierr.New(http.StatusBadGateway, "sso_provider_unreachable", "the identity provider's token endpoint did not answer (%v)", redactErr(err))
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		return Result{}, apierr.New(http.StatusBadGateway, "sso_no_id_token", "the identity provider answered without an ID token; check that the client may use the openid scope")
	}
	idt, err := verifier.Verify(cctx, rawID)
	if err != nil {
		var te *oidc.TokenExpiredError
		if errors.As(err, &te) {
			return Result{}, apierr.New(http.StatusUnauthorized, "sso_token_expired",
				"the identity provider's ID token expired at %s (this coordinator's time is %s); check the clocks of both", te.Expiry.UTC().Format(time.RFC3339), p.now().UTC().Format(time.RFC3339))
		}
		return Result{}, apierr.New(http.StatusUnauthorized, "sso_token_invalid", "the identity provider's ID token was refused: %v; check oidc.issuer and oidc.client_id", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return Result{}, apierr.New(http.StatusUnauthorized, "sso_token_invalid", "the identity provider's ID token was issued for another sign-in (its nonce differs); start again")
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return Result{}, apierr.New(http.StatusBadGateway, "sso_token_invalid", "the ID token's claims do not decode: %v", err)
	}
	if p.needUserInfo(claims) {
		// Some providers put only the subject in the ID token; the rest
		// is at the userinfo endpoint, for the same subject.
		if ui, err := op.UserInfo(cctx, oauth2.StaticTokenSource(tok)); err == nil && ui.Subject == idt.Subject {
			extra := map[string]any{}
			if ui.Claims(&extra) == nil {
				for k, v := range extra {
					if _, ok := claims[k]; !ok {
						claims[k] = v
					}
				}
			}
		}
	}
	if err := p.checkEmail(claims); err != nil {
		return Result{}, err
	}
	roles := p.roles(claims)
	if len(roles) == 0 {
		return Result{}, apierr.New(http.StatusForbidden, "sso_no_role",
			"your account at the identity provider matches no role here (this coordinator reads the claims %s); ask an administrator to grant you one", strings.Join(p.ruleClaims(), ", "))
	}
	return p.signIn(ctx, store.External{Issuer: idt.Issuer, Subject: idt.Subject}, p.name(claims, idt.Subject), roles, label)
}

func (p *Provider) open(kind, sealed string) (flow, error) {
	bad := apierr.New(http.StatusBadRequest, "sso_flow_invalid", "this sign-in was not started here, or was changed on its way; start again")
	box, err := base64.RawURLEncoding.DecodeString(sealed)
	if sealed == "" || err != nil {
		return flow{}, bad
	}
	raw, err := p.seal.Open("", aad(kind), box)
	if err != nil {
		return flow{}, bad
	}
	var f flow
	if json.Unmarshal(raw, &f) != nil || f.Kind != kind {
		return flow{}, bad
	}
	if !p.now().Before(f.Expires) {
		return flow{}, apierr.New(http.StatusBadRequest, "sso_flow_expired", "this sign-in was started more than %v ago; start again", FlowTTL)
	}
	return f, nil
}

func (p *Provider) needUserInfo(claims map[string]any) bool {
	for _, c := range p.ruleClaims() {
		if _, ok := claims[c]; !ok {
			return true
		}
	}
	_, ok := claims["email"]
	return !ok && len(p.cfg.AllowedEmailDomains) > 0
}

func (p *Provider) ruleClaims() []string {
	var out []string
	for _, r := range p.cfg.Roles {
		if !slices.Contains(out, r.Claim) {
			out = append(out, r.Claim)
		}
	}
	return out
}

// checkEmail applies allowed_email_domains: a verified email at one of
// them.
func (p *Provider) checkEmail(claims map[string]any) error {
	if len(p.cfg.AllowedEmailDomains) == 0 {
		return nil
	}
	email, _ := claims["email"].(string)
	at := strings.LastIndexByte(email, '@')
	if at < 1 {
		return apierr.New(http.StatusForbidden, "sso_email_domain_refused", "the identity provider gave no email address, and this coordinator admits only addresses at %s", strings.Join(p.cfg.AllowedEmailDomains, ", "))
	}
	domain := strings.ToLower(email[at+1:])
	if !slices.Contains(p.cfg.AllowedEmailDomains, domain) {
		return apierr.New(http.StatusForbidden, "sso_email_domain_refused", "addresses at %s may not sign in here (this coordinator admits %s); ask an administrator", domain, strings.Join(p.cfg.AllowedEmailDomains, ", "))
	}
	if !verified(claims["email_verified"]) {
		return apierr.New(http.StatusForbidden, "sso_email_unverified", "the identity provider has not verified the address %s; verify it there, then sign in again", email)
	}
	return nil
}

// verified reads email_verified, which some providers send as a string.
func verified(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string:
		return strings.EqualFold(b, "true")
	}
	return false
}

// roles applies the role rules: the strongest matching role per tenant.
func (p *Provider) roles(claims map[string]any) map[string]string {
	out := map[string]string{}
	for _, r := range p.cfg.Roles {
		if !matches(claims[r.Claim], r.Value) {
			continue
		}
		if rank(r.Role) > rank(out[r.Tenant]) {
			out[r.Tenant] = r.Role
		}
	}
	return out
}

// matches reports whether a claim's value is want, or is a list holding
// it; "*" matches any present value.
func matches(v any, want string) bool {
	switch c := v.(type) {
	case nil:
		return false
	case string:
		return want == "*" || c == want
	case bool, float64:
		return want == "*" || fmt.Sprint(c) == want
	case []any:
		for _, e := range c {
			if s, ok := e.(string); ok && (want == "*" || s == want) {
				return true
			}
		}
	}
	return false
}

func (p *Provider) name(claims map[string]any, subject string) string {
	for _, k := range []string{p.cfg.NameClaim, "email", "preferred_username"} {
		if s, ok := claims[k].(string); ok && strings.TrimSpace(s) != "" {
			return clip(strings.TrimSpace(s), 200)
		}
	}
	return subject
}

func (p *Provider) signIn(ctx context.Context, id store.External, name string, roles map[string]string, label string) (Result, error) {
	now := p.now().UTC()
	tok, err := auth.NewToken(auth.PrefixAPIToken)
	if err != nil {
		return Result{}, err
	}
	// The person proved themselves to the provider: the session serves
	// every tenant the role rules give them (R-LIFE-9).
	cred := store.Credential{Hash: auth.Hash(tok), ID: auth.NewID("cred_"), Kind: store.CredSession, Label: label,
		CreatedAt: now, ExpiresAt: now.Add(p.cfg.SessionTTL.Duration), Tenant: store.AllTenants}
	pr, created, err := p.st.SignInExternal(ctx, id, auth.NewID("prn_"), name, roles, now, cred)
	if err != nil {
		return Result{}, err
	}
	cred.PrincipalID = pr.ID
	// R-AUD-6: the sign-in, in every tenant of the person (and the
	// principal's creation when this is their first). The session exists
	// already, so a failed append is not the sign-in's failure.
	for t := range pr.Roles {
		actor := store.AuditActor(pr, cred)
		target := apitypes.AuditTarget{PrincipalID: pr.ID, CredentialID: cred.ID}
		if created {
			p.st.AppendAudit(ctx, apitypes.AuditEntry{At: now, Tenant: t, Actor: actor, Event: apitypes.AuditPrincipalCreated, Target: target,
				Detail: json.RawMessage(`{"via":"sso"}`)})
		}
		p.st.AppendAudit(ctx, apitypes.AuditEntry{At: now, Tenant: t, Actor: actor, Event: apitypes.AuditSignedIn, Target: target,
			Detail: json.RawMessage(`{"via":"sso"}`)})
	}
	return Result{Principal: pr, Token: tok, Credential: cred, Created: created}, nil
}

// LoopbackRedirect reports whether u is a redirect a command-line client
// may ask for: http on a loopback address (RFC 8252, section 7.3).
func LoopbackRedirect(u string) bool {
	r, err := url.Parse(u)
	if err != nil || r.Scheme != "http" || r.User != nil || r.RawQuery != "" || r.Fragment != "" {
		return false
	}
	h := r.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// redactErr drops the URL an *url.Error carries (it may hold the code).
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
