package agentd

import (
	"context"

	"github.com/olivares-dev/olivares/agent/link"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/signin"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/wire"
)

// keepToken puts a token a tool printed in the profile's environment on
// this node (R-ACCT-6): it never travels to the coordinator.
func (a *Agent) keepToken(ref, tenant, key, value string) (apitypes.Profile, error) {
	p, err := a.reg.UpdateProfile(ref, tenant, registry.ProfileUpdate{Env: map[string]string{key: value}})
	if err == nil {
		p.NodeID = a.id.NodeID
	}
	return p, err
}

// signinProfile is the profile as the tool's sign-in sees it: its home,
// its environment and PATH as its runs get them (R-ACCT-1).
func (a *Agent) signinProfile(ref, tenant string) (signin.Profile, error) {
	prof, err := a.reg.ProfileIn(ref, tenant)
	if err != nil {
		return signin.Profile{}, err
	}
	return a.sup.Host.Signin(prof)
}

// signinOp is a sign-in call: its params read as P, its answer do's.
func signinOp[P any, V any](do func(P) (V, error)) link.Handler {
	return func(ctx context.Context, h wire.Header, s tunnel.Stream) {
		var p P
		if err := params(h, &p); err != nil {
			respond(s, nil, err)
			return
		}
		v, err := do(p)
		respond(s, v, err)
	}
}

func (a *Agent) signinHandlers() map[string]link.Handler {
	return map[string]link.Handler{
		// Starts the tool's sign-in under the profile's home (R-ACCT-1).
		proto.OpSigninStart: signinOp(func(p proto.SigninStart) (apitypes.SigninAttempt, error) {
			sp, err := a.signinProfile(p.Ref, p.Tenant)
			if err != nil {
				return apitypes.SigninAttempt{}, err
			}
			return a.signin.Start(p.ID, sp)
		}),
		// Whether the profile's account is signed in (R-ACCT-9).
		proto.OpProfileAccount: signinOp(func(p proto.RecordDelete) (apitypes.ProfileAccount, error) {
			sp, err := a.signinProfile(p.Ref, p.Tenant)
			if err != nil {
				return apitypes.ProfileAccount{}, err
			}
			return a.signin.Account(sp)
		}),
		proto.OpSigninGet: signinOp(func(p proto.SigninRef) (apitypes.SigninAttempt, error) {
			return a.signin.Get(p.ID, p.Tenant)
		}),
		proto.OpSigninCode: signinOp(func(p proto.SigninRef) (apitypes.SigninAttempt, error) {
			return a.signin.Code(p.ID, p.Tenant, p.Code)
		}),
		proto.OpSigninCancel: signinOp(func(p proto.SigninRef) (apitypes.SigninAttempt, error) {
			return a.signin.Cancel(p.ID, p.Tenant)
		}),
	}
}
