package proto

// Account sign-in ops (R-ACCT-*), coordinator→agent. Each answers with
// apitypes.SigninAttempt.
const (
	OpSigninStart  = "profile.signin_start"  // SigninStart
	OpSigninGet    = "profile.signin_get"    // SigninRef
	OpSigninCode   = "profile.signin_code"   // SigninRef with Code
	OpSigninCancel = "profile.signin_cancel" // SigninRef
)

// SigninStart starts attempt ID for the tenant's profile Ref.
type SigninStart struct {
	ID     string `json:"id"`
	Ref    string `json:"ref"`
	Tenant string `json:"tenant"`
}

// SigninRef names an attempt; Code is the pasted code (OpSigninCode).
type SigninRef struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Code   string `json:"code,omitempty"`
}

// OpProfileAccount asks the node whether a profile's account is signed in
// (R-ACCT-9): RecordDelete's shape names the profile → apitypes.ProfileAccount.
const OpProfileAccount = "profile.account"
