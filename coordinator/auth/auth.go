// Package auth holds what the route authorizer needs: bearer and join token
// generation, their hashes, roles and the permissions they grant.
//
// Tokens are shown once and stored only as their SHA-256 (issue 2). auth
// never decides a route's permission: the api package's route table does.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/olivares-dev/olivares/coordinator/store"
)

// Permissions (R-AUTH-1, R-AUTH-5). None implies another (R-AUTH-7).
const (
	PermRunRead        = "sessions:run:read"
	PermRunWrite       = "sessions:run:write"
	PermRunAdmin       = "sessions:run:admin"
	PermWorkspaceAdmin = "sessions:workspace:admin"
)

// roles bundles permissions per built-in role (R-AUTH-7).
var roles = map[string][]string{
	store.RoleViewer:   {PermRunRead},
	store.RoleOperator: {PermRunRead, PermRunWrite},
	store.RoleAdmin:    {PermRunRead, PermRunWrite, PermRunAdmin, PermWorkspaceAdmin},
}

// ValidRole reports whether r is a built-in role.
func ValidRole(r string) bool { _, ok := roles[r]; return ok }

// ValidKind reports whether k is a principal kind.
func ValidKind(k string) bool { return k == store.KindHuman || k == store.KindAgent }

// RolePermissions returns the permissions a role grants.
func RolePermissions(role string) []string { return append([]string(nil), roles[role]...) }

// Grants reports whether role grants perm, literally.
func Grants(role, perm string) bool {
	for _, p := range roles[role] {
		if p == perm {
			return true
		}
	}
	return false
}

// Token prefixes make a leaked token recognisable for what it is.
const (
	PrefixAPIToken  = "olv_"
	PrefixJoinToken = "olvj_"
)

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewToken returns prefix + 256 random bits, base32 (lower case).
func NewToken(prefix string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("auth: random: %w", err)
	}
	return prefix + strings.ToLower(b32.EncodeToString(b[:])), nil
}

// NewID returns prefix + 64 random bits in hex, for record ids.
func NewID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return prefix + hex.EncodeToString(b[:])
}

// Hash is what a store keeps of a token: lowercase hex SHA-256.
func Hash(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// The console's sign-in (coordinator/console).
const (
	// SessionCookie holds a console session's bearer token: HttpOnly,
	// SameSite=Strict, Secure under TLS.
	SessionCookie = "olivares_session"
	// PrefixSigninLink marks a one-time sign-in link's secret.
	PrefixSigninLink = "olvs_"
)

// CrossSite reports whether a browser sent r from a page of another origin.
// A state-changing request authenticated by the session cookie must come
// from the console's own pages: a cross-site form or script can make the
// browser attach the cookie (SameSite counts every port of a host as one
// site), but it cannot hide where it came from. Clients other than browsers
// send neither header and are not cross-site.
func CrossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return true // "null" and garbage are never our own pages
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return u.Scheme != scheme || !strings.EqualFold(u.Host, r.Host)
}

// Unsafe reports whether method may change state.
func Unsafe(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}
