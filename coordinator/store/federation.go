package store

import (
	"context"
	"time"
)

// External is a person's identity at an OpenID Connect provider: the
// issuer and the subject it gives that person, which never changes for
// them (an email address can, and can be given to someone else). A
// principal signed in by single sign-on is found by this pair, never by
// email.
type External struct {
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
}

// Federator is the single sign-on part of Store.
type Federator interface {
	// SignInExternal records one sign-in of the person the provider knows
	// as id, in one transaction: the principal linked to id, created on
	// the first sign-in (KindHuman, id newID), takes name and roles (which
	// replace its roles: the provider is their source, so a change there
	// applies at the next sign-in), every tenant in roles exists
	// afterwards, and cred is stored for it (its PrincipalID set to the
	// principal's). created reports a first sign-in. ErrExists if cred's
	// hash is taken; then nothing is written.
	SignInExternal(ctx context.Context, id External, newID, name string, roles map[string]string, now time.Time, cred Credential) (p Principal, created bool, err error)
}
