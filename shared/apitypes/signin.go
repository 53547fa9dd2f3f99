package apitypes

import "time"

// The states of a sign-in attempt (R-ACCT-2).
const (
	SigninStarting          = "starting"
	SigninWaitingForCode    = "waiting_for_code"
	SigninWaitingForBrowser = "waiting_for_browser"
	SigninSignedIn          = "signed_in"
	SigninFailed            = "failed"
	SigninExpired           = "expired"
)

// SigninAttempt is one run of a tool's own sign-in on a profile's node
// (R-ACCT-1): what the person opens (URL), types there (UserCode) or is
// told (Message). It never holds a secret the tool printed (R-ACCT-6).
type SigninAttempt struct {
	ID         string `json:"id"`
	ProfileRef string `json:"profile_ref"`
	Tool       string `json:"tool"`
	State      string `json:"state"`
	URL        string `json:"url,omitempty"`
	UserCode   string `json:"user_code,omitempty"`
	Message    string `json:"message,omitempty"`
	// Account is who the tool says is signed in, when it says (Codex's
	// account/read).
	Account   *SigninAccount `json:"account,omitempty"`
	CreatedAt time.Time      `json:"created_at"`
	ExpiresAt time.Time      `json:"expires_at"`
	UpdatedAt time.Time      `json:"updated_at"`
	// Profile is the profile after a sign-in that changed it (a token kept
	// in its environment on the node, R-ACCT-6): its env_keys say so.
	Profile *Profile `json:"profile,omitempty"`
}

// Done reports whether the attempt ended.
func (a SigninAttempt) Done() bool {
	switch a.State {
	case SigninSignedIn, SigninFailed, SigninExpired:
		return true
	}
	return false
}

// SigninAccount is the account a tool reports.
type SigninAccount struct {
	Email string `json:"email,omitempty"`
	Plan  string `json:"plan,omitempty"`
}

// SigninCode is the body of POST …/signin/{id}/code: the code the person
// pasted from the sign-in page.
type SigninCode struct {
	Code string `json:"code"`
}

// ProfileAccount is GET /profiles/{ref}/account: whether the profile's
// account is signed in, how and as whom when the tool says, and its plan's
// rate-limit windows as its last turn reported them (R-ACCT-9).
type ProfileAccount struct {
	ProfileRef string `json:"profile_ref"`
	Tool       string `json:"tool"`
	// SignedIn is nil when the node cannot tell (the tool keeps no sign-in
	// Olivares can see, and no key is set).
	SignedIn *bool `json:"signed_in"`
	// Method is how: "oauth" (the tool's own sign-in in the home),
	// "token" (a token in the environment), "api_key", or "provider" (its
	// configured provider needs no sign-in).
	Method  string `json:"method,omitempty"`
	Email   string `json:"email,omitempty"`
	Plan    string `json:"plan,omitempty"`
	Message string `json:"message,omitempty"`
	// RateLimits and Limit are the usage report's for this profile
	// (R-USE-5), with the time of that report.
	RateLimits   []RateWindow `json:"rate_limits"`
	Limit        *Limit       `json:"limit,omitempty"`
	RateLimitsAt *time.Time   `json:"rate_limits_at,omitempty"`
}
