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
