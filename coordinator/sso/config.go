package sso

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/config"
)

// Config is the [oidc] table of the coordinator's TOML file. Single sign-on
// is off when the table is absent (Issuer empty).
type Config struct {
	// Issuer is the provider's issuer URL, exactly as its discovery
	// document (ISSUER/.well-known/openid-configuration) names it. https,
	// or http on a loopback address only. Required.
	Issuer string `toml:"issuer"`
	// ClientID is this coordinator's client at the provider; ID tokens must
	// name it in their audience. Required.
	ClientID string `toml:"client_id"`
	// ClientSecret, or ClientSecretFile (a file holding it, such as a
	// systemd credential), authenticates the code exchange. Exactly one.
	ClientSecret     string `toml:"client_secret"`
	ClientSecretFile string `toml:"client_secret_file"`
	// Scopes asked for. When empty, openid, email and profile; openid is
	// always asked for. Add the provider's scope for the claim that Roles
	// read (such as "groups") when it needs one.
	Scopes []string `toml:"scopes"`
	// DisplayName is what the console's button says: "Sign in with
	// <DisplayName>". When empty, "single sign-on".
	DisplayName string `toml:"display_name"`
	// RedirectURL is the console's callback as the provider knows it
	// (registered there): https://HOST/v1/sso/callback. Required, except
	// on a plain-HTTP coordinator on loopback (dev), where empty means the
	// address the browser used to reach the console, + /v1/sso/callback.
	RedirectURL string `toml:"redirect_url"`
	// AllowedEmailDomains, when set, admit only people whose verified email
	// is at one of these domains (exact match, case-insensitive). When
	// empty, any email or none.
	AllowedEmailDomains []string `toml:"allowed_email_domains"`
	// NameClaim is the claim shown as the person's name. When empty,
	// "name"; the email, then the subject, stand in when it is absent.
	NameClaim string `toml:"name_claim"`
	// SessionTTL is how long a session made by single sign-on lasts, in
	// the console and for olivares login --sso. When zero, 12h; at most
	// 720h.
	SessionTTL config.Duration `toml:"session_ttl"`
	// Roles map claims to a role in a tenant; a person gets, in each
	// tenant, the strongest role of the rules that match, and nothing
	// else (a person no rule matches cannot sign in). Read at every
	// sign-in, so a change at the provider applies at the next one.
	Roles []RoleRule `toml:"roles"`
	// CAFile is a PEM bundle to trust for the provider's TLS (a private
	// CA). When empty, the system's roots.
	CAFile string `toml:"ca_file"`
}

// RoleRule is one [[oidc.roles]] entry: when the claim equals Value, or is
// a list holding Value, the person is Role in Tenant.
type RoleRule struct {
	// Claim is the claim's name in the ID token (or the userinfo answer),
	// such as "groups", "roles" or "email". Required.
	Claim string `toml:"claim"`
	// Value is the value to match exactly. "*" matches any value of a claim
	// that is present (everyone the provider lets in).
	Value  string `toml:"value"`
	Tenant string `toml:"tenant"`
	// Role is viewer, operator or admin.
	Role string `toml:"role"`
}

// Defaults.
const (
	DefaultSessionTTL = 12 * time.Hour
	MaxSessionTTL     = 30 * 24 * time.Hour
	DefaultNameClaim  = "name"
)

var tenantRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Enabled reports whether single sign-on is configured.
func (c *Config) Enabled() bool { return c.Issuer != "" }

// set reports whether any key of the table was given.
func (c *Config) set() bool {
	return c.Issuer != "" || c.ClientID != "" || c.ClientSecret != "" || c.ClientSecretFile != "" || len(c.Scopes) > 0 ||
		c.DisplayName != "" || c.RedirectURL != "" || len(c.AllowedEmailDomains) > 0 || c.NameClaim != "" ||
		c.SessionTTL.Duration != 0 || len(c.Roles) > 0 || c.CAFile != ""
}

// CheckAndSetDefaults validates c and fills its zero values; an error
// names the bad key as it is written in the file (oidc.roles[1].role). An
// absent table is valid and leaves single sign-on off.
func (c *Config) CheckAndSetDefaults() error {
	if !c.set() {
		return nil
	}
	if c.Issuer == "" {
		return errors.New("config: oidc.issuer is required when [oidc] is set")
	}
	u, err := url.Parse(c.Issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("config: oidc.issuer %q: want the provider's https URL", c.Issuer)
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return fmt.Errorf("config: oidc.issuer %q: plain http is only accepted on a loopback address; use the provider's https URL", c.Issuer)
	}
	if c.ClientID == "" {
		return errors.New("config: oidc.client_id is required")
	}
	switch {
	case c.ClientSecret != "" && c.ClientSecretFile != "":
		return errors.New("config: oidc.client_secret and oidc.client_secret_file: give one, not both")
	case c.ClientSecret == "" && c.ClientSecretFile == "":
		return errors.New("config: oidc.client_secret (or oidc.client_secret_file) is required")
	}
	if len(c.Scopes) == 0 {
		c.Scopes = []string{"openid", "email", "profile"}
	}
	if !slices.Contains(c.Scopes, "openid") {
		c.Scopes = append([]string{"openid"}, c.Scopes...)
	}
	for i, s := range c.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\"\\") {
			return fmt.Errorf("config: oidc.scopes[%d] %q: a scope is one word", i, s)
		}
	}
	if c.DisplayName == "" {
		c.DisplayName = "single sign-on"
	}
	if c.RedirectURL != "" {
		r, err := url.Parse(c.RedirectURL)
		if err != nil || r.Host == "" || (r.Scheme != "https" && r.Scheme != "http") || r.Path != CallbackPath {
			return fmt.Errorf("config: oidc.redirect_url %q: want the console's address + %s, such as https://olivares.example.com%s", c.RedirectURL, CallbackPath, CallbackPath)
		}
	}
	for i, d := range c.AllowedEmailDomains {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "" || strings.ContainsAny(d, "@ /") || !strings.Contains(d, ".") {
			return fmt.Errorf("config: oidc.allowed_email_domains[%d] %q: want a domain such as example.com", i, c.AllowedEmailDomains[i])
		}
		c.AllowedEmailDomains[i] = d
	}
	if c.NameClaim == "" {
		c.NameClaim = DefaultNameClaim
	}
	switch ttl := c.SessionTTL.Duration; {
	case ttl == 0:
		c.SessionTTL.Duration = DefaultSessionTTL
	case ttl < time.Minute || ttl > MaxSessionTTL:
		return fmt.Errorf("config: oidc.session_ttl %v: want between 1m and %v", ttl, MaxSessionTTL)
	}
	if len(c.Roles) == 0 {
		return errors.New("config: oidc.roles: give at least one [[oidc.roles]] rule (claim, value, tenant, role); nobody could sign in without one")
	}
	for i, r := range c.Roles {
		switch {
		case r.Claim == "":
			return fmt.Errorf("config: oidc.roles[%d].claim is required (such as \"groups\")", i)
		case r.Value == "":
			return fmt.Errorf("config: oidc.roles[%d].value is required (\"*\" matches any value)", i)
		case !tenantRe.MatchString(r.Tenant):
			return fmt.Errorf("config: oidc.roles[%d].tenant %q: use 1-63 lower-case letters, digits, '_' or '-'", i, r.Tenant)
		case rank(r.Role) == 0:
			return fmt.Errorf("config: oidc.roles[%d].role %q: use viewer, operator or admin", i, r.Role)
		}
	}
	// The files (client_secret_file, ca_file) are read when the
	// coordinator starts, which names them if they do not open.
	return nil
}

// rank orders the built-in roles; 0 is not a role.
func rank(role string) int {
	switch role {
	case store.RoleViewer:
		return 1
	case store.RoleOperator:
		return 2
	case store.RoleAdmin:
		return 3
	}
	return 0
}

func loopbackHost(h string) bool {
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}
