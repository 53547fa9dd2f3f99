package agentd

import (
	"context"

	"github.com/olivares-dev/olivares/agent/link"
	"github.com/olivares-dev/olivares/agent/registry"
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

// signinStartOp starts the tool's sign-in under the profile's home, with
// its environment and PATH as its runs get them (R-ACCT-1).
func (a *Agent) signinStartOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.SigninStart
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	prof, err := a.reg.ProfileIn(p.Ref, p.Tenant)
	if err != nil {
		respond(s, nil, err)
		return
	}
	sp, err := a.sup.Host.Signin(prof)
	if err != nil {
		respond(s, nil, err)
		return
	}
	v, err := a.signin.Start(p.ID, sp)
	respond(s, v, err)
}

// signinOp is one of get, code and cancel on an attempt.
func (a *Agent) signinOp(do func(p proto.SigninRef) (apitypes.SigninAttempt, error)) link.Handler {
	return func(ctx context.Context, h wire.Header, s tunnel.Stream) {
		var p proto.SigninRef
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
		proto.OpSigninStart:    a.signinStartOp,
		proto.OpProfileAccount: a.profileAccountOp,
		proto.OpSigninGet: a.signinOp(func(p proto.SigninRef) (apitypes.SigninAttempt, error) {
			return a.signin.Get(p.ID, p.Tenant)
		}),
		proto.OpSigninCode: a.signinOp(func(p proto.SigninRef) (apitypes.SigninAttempt, error) {
			return a.signin.Code(p.ID, p.Tenant, p.Code)
		}),
		proto.OpSigninCancel: a.signinOp(func(p proto.SigninRef) (apitypes.SigninAttempt, error) {
			return a.signin.Cancel(p.ID, p.Tenant)
		}),
	}
}

// profileAccountOp says whether the profile's account is signed in
// (R-ACCT-9).
func (a *Agent) profileAccountOp(ctx context.Context, h wire.Header, s tunnel.Stream) {
	var p proto.RecordDelete
	if err := params(h, &p); err != nil {
		respond(s, nil, err)
		return
	}
	prof, err := a.reg.ProfileIn(p.Ref, p.Tenant)
	if err != nil {
		respond(s, nil, err)
		return
	}
	sp, err := a.sup.Host.Signin(prof)
	if err != nil {
		respond(s, nil, err)
		return
	}
	v, err := a.signin.Account(sp)
	respond(s, v, err)
}
