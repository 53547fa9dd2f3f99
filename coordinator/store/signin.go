package store

import (
	"context"
	"time"
)

// SigninLink is a one-time sign-in link for the console, stored as the
// hash of its secret (the secret travels in the link's fragment, so no
// server log sees it). Redeeming it creates a session credential of the
// principal; a link is good for one redemption before ExpiresAt.
type SigninLink struct {
	Hash        string    `json:"hash"`
	PrincipalID string    `json:"principal_id"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	// UsedAt is zero until the link was redeemed.
	UsedAt time.Time `json:"used_at,omitempty"`
}

// Signer is the console sign-in part of Store.
type Signer interface {
	// CreateSigninLink stores l. ErrNotFound if its principal does not
	// exist, ErrExists on a hash collision.
	CreateSigninLink(ctx context.Context, l SigninLink) error
	// RedeemSigninLink consumes the link with the given hash at now and
	// stores cred (whose PrincipalID is set to the link's) in one
	// transaction: an unknown link is ErrNotFound, a used one ErrTokenUsed,
	// an expired one ErrTokenExpired, and then nothing is written.
	RedeemSigninLink(ctx context.Context, hash string, now time.Time, cred Credential) (Principal, Credential, error)
	// RevokeCredential removes the credential with the given hash and
	// every credential derived from it, transitively (Credential.Parent),
	// in one transaction, so none of their tokens authenticates anything
	// any more. It returns how many derived credentials went with it.
	// ErrNotFound if absent.
	RevokeCredential(ctx context.Context, hash string) (int, error)
}
