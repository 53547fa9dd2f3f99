package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// signinAPI serves a profile's account (R-ACCT-9) and its sign-in
// (R-ACCT-1..5): the attempt runs on the profile's node; the coordinator
// relays and audits. A sign-in changes what the profile's runs act as, so
// it is profile administration (R-PROF-4's permission).
type signinAPI struct {
	*core
	keepMu sync.Mutex // keepProfile's
	mu     sync.Mutex
	// endedSet names the ends audited (node id/attempt id, R-ACCT-10): a
	// node that did not hear the answer to its push reports them again.
	endedSet map[string]bool
}

// maxEnded bounds signinAPI.endedSet; past it the set starts again.
const maxEnded = 4096

func (s *signinAPI) routes() []Route {
	return []Route{
		{http.MethodGet, Base + "/profiles/:ref/account", auth.PermRunRead, s.profileAccount, nil},
		{http.MethodPost, Base + "/profiles/:ref/signin", auth.PermWorkspaceAdmin, s.startSignin, nil},
		{http.MethodGet, Base + "/profiles/:ref/signin/:id", auth.PermWorkspaceAdmin, s.getSignin, nil},
		{http.MethodPost, Base + "/profiles/:ref/signin/:id/code", auth.PermWorkspaceAdmin, s.signinCode, nil},
		{http.MethodDelete, Base + "/profiles/:ref/signin/:id", auth.PermWorkspaceAdmin, s.cancelSignin, nil},
	}
}

func (s *signinAPI) startSignin(c echo.Context) error {
	p, err := s.refProfile(c)
	if err != nil {
		return err
	}
	if err := noBody(c); err != nil {
		return err
	}
	id := auth.NewID("signin_")
	var a apitypes.SigninAttempt
	if err := s.call(c.Request().Context(), p.NodeID, wire.Header{Op: proto.OpSigninStart},
		proto.SigninStart{ID: id, Ref: p.Ref, Tenant: p.Tenant}, &a); err != nil {
		return err
	}
	s.auditCaller(c, apitypes.AuditProfileSigninStarted, apitypes.AuditTarget{ProfileRef: p.Ref, NodeID: p.NodeID},
		map[string]string{"signin_id": a.ID, "tool": a.Tool, "signin_state": a.State})
	return c.JSON(http.StatusAccepted, s.signinSeen(c, a))
}

// signinCall relays op on the attempt named in the path; an attempt of
// another profile is 404 like an unknown one.
func (s *signinAPI) signinCall(c echo.Context, op, code string) (apitypes.Profile, apitypes.SigninAttempt, error) {
	p, err := s.refProfile(c)
	if err != nil {
		return p, apitypes.SigninAttempt{}, err
	}
	var a apitypes.SigninAttempt
	err = s.call(c.Request().Context(), p.NodeID, wire.Header{Op: op}, proto.SigninRef{ID: c.Param("id"), Tenant: p.Tenant, Code: code}, &a)
	if err == nil && a.ProfileRef != p.Ref {
		err = apierr.New(http.StatusNotFound, "signin_not_found", "profile %s has no sign-in %s", p.Ref, c.Param("id"))
	}
	return p, a, err
}

// signinSeen keeps the index's copy of a profile a sign-in changed, by the
// caller who first saw the change (keepProfile).
func (s *signinAPI) signinSeen(c echo.Context, a apitypes.SigninAttempt) apitypes.SigninAttempt {
	if p, err := s.refProfile(c); err == nil {
		_ = s.keepProfile(c.Request().Context(), p, a, CallerOf(c).Actor()) // logged; the node's report tries again
	}
	return a
}

// keepProfile keeps in the index's copy of profile p the env_keys attempt
// a names (the token kept on the node, R-ACCT-6), and nothing else of what
// the node sent: audited as a profile update naming the variable, never
// its value (R-AUD-6), by actor. The caller who reads the attempt and the
// node's report may both bring it: keepMu and a fresh read make the first
// one the one audited (on this coordinator).
func (s *signinAPI) keepProfile(ctx context.Context, p apitypes.Profile, a apitypes.SigninAttempt, actor apitypes.AuditActor) error {
	if a.Profile == nil || a.Profile.Ref != p.Ref {
		return nil
	}
	s.keepMu.Lock()
	defer s.keepMu.Unlock()
	p, err := s.o.Store.GetProfile(ctx, p.Ref)
	if err != nil {
		return err
	}
	if slices.Equal(p.EnvKeys, a.Profile.EnvKeys) {
		return nil
	}
	var set []string
	for _, k := range a.Profile.EnvKeys {
		if !slices.Contains(p.EnvKeys, k) {
			set = append(set, k)
		}
	}
	p.EnvKeys = slices.Clone(a.Profile.EnvKeys)
	if err := s.o.Store.UpdateProfile(ctx, p); err != nil {
		s.log.ErrorContext(ctx, "a sign-in changed a profile the index did not take", "profile_ref", p.Ref, logging.Err(err))
		return err
	}
	s.Audit(ctx, p.Tenant, actor, apitypes.AuditProfileUpdated, apitypes.AuditTarget{ProfileRef: p.Ref, NodeID: p.NodeID},
		map[string]any{"fields": []string{"env"}, "env_set": set, "signin_id": a.ID})
	return nil
}

// maxEndMessage bounds the message of an audited end (the node's words).
const maxEndMessage = 1024

// signinsEnded is R-ACCT-10: node reported attempts that ended, whether or
// not anyone read them, and gets back the ids it may forget. Each end is
// audited once (on this coordinator), by the node, as
// sessions.profile.signin_finished with its state and the tool's words,
// and the env_keys it named reach the index. An attempt of a profile the
// node does not hold is taken and dropped; one the store could not take
// now is not taken, so the node reports it again.
func (s *signinAPI) signinsEnded(ctx context.Context, nodeID string, as []apitypes.SigninAttempt) []string {
	actor := apitypes.AuditActor{CredentialID: nodeID, Kind: apitypes.ActorNode}
	var taken []string
	for _, a := range as {
		key := nodeID + "/" + a.ID
		if !a.Done() || s.ended(key) {
			taken = append(taken, a.ID)
			continue
		}
		p, err := s.o.Store.GetProfile(ctx, a.ProfileRef)
		if err == nil && p.NodeID != nodeID {
			err = store.ErrNotFound
		}
		if errors.Is(err, store.ErrNotFound) {
			s.log.WarnContext(ctx, "a node reported the sign-in of a profile it does not hold", logging.KeyNodeID, nodeID, "profile_ref", a.ProfileRef, "signin_id", a.ID)
			taken = append(taken, a.ID)
			continue
		}
		if err == nil {
			err = s.keepProfile(ctx, p, a, actor)
		}
		msg := a.Message
		if len(msg) > maxEndMessage {
			msg = msg[:maxEndMessage]
		}
		detail := map[string]any{"signin_id": a.ID, "tool": a.Tool, "signin_state": a.State, "message": msg}
		if a.Account != nil {
			detail["account"] = a.Account
		}
		if err == nil {
			_, err = s.o.Store.AppendAudit(ctx, apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: p.Tenant, Actor: actor,
				Event: apitypes.AuditProfileSigninFinished, Target: apitypes.AuditTarget{ProfileRef: p.Ref, NodeID: nodeID}, Detail: mustJSON(detail)})
		}
		if err != nil {
			s.log.ErrorContext(ctx, "the end of a sign-in could not be audited; the node reports it again", logging.KeyNodeID, nodeID, "signin_id", a.ID, logging.Err(err))
			continue
		}
		s.markEnded(key)
		taken = append(taken, a.ID)
	}
	return taken
}

// ended reports whether the end keyed key was audited here.
func (s *signinAPI) ended(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endedSet[key]
}

// markEnded remembers that the end keyed key was audited.
func (s *signinAPI) markEnded(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.endedSet == nil || len(s.endedSet) >= maxEnded {
		s.endedSet = map[string]bool{}
	}
	s.endedSet[key] = true
}

func (s *signinAPI) getSignin(c echo.Context) error {
	_, a, err := s.signinCall(c, proto.OpSigninGet, "")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.signinSeen(c, a))
}

// signinCode sends the pasted code (R-ACCT-3). The code is a secret of
// the person's: it is audited as sent, never with its text.
func (s *signinAPI) signinCode(c echo.Context) error {
	var req apitypes.SigninCode
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Code) == "" {
		return apierr.BadRequest("bad_code", "code is required: paste the code the sign-in page showed")
	}
	p, a, err := s.signinCall(c, proto.OpSigninCode, req.Code)
	if err != nil {
		return err
	}
	s.auditCaller(c, apitypes.AuditProfileSigninCode, apitypes.AuditTarget{ProfileRef: p.Ref, NodeID: p.NodeID},
		map[string]string{"signin_id": a.ID})
	return c.JSON(http.StatusOK, s.signinSeen(c, a))
}

// cancelSignin ends the attempt; the node kills its process (R-ACCT-4).
func (s *signinAPI) cancelSignin(c echo.Context) error {
	if err := noBody(c); err != nil {
		return err
	}
	p, a, err := s.signinCall(c, proto.OpSigninCancel, "")
	if err != nil {
		return err
	}
	s.auditCaller(c, apitypes.AuditProfileSigninCancelled, apitypes.AuditTarget{ProfileRef: p.Ref, NodeID: p.NodeID},
		map[string]string{"signin_id": a.ID, "signin_state": a.State})
	return c.JSON(http.StatusOK, a)
}

// profileAccount is R-ACCT-9: the node says whether the account is signed
// in; the rate-limit windows are the usage report's for the profile
// (R-USE-5).
func (s *signinAPI) profileAccount(c echo.Context) error {
	p, err := s.refProfile(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var a apitypes.ProfileAccount
	if err := s.call(ctx, p.NodeID, wire.Header{Op: proto.OpProfileAccount}, proto.RecordDelete{Ref: p.Ref, Tenant: p.Tenant}, &a); err != nil {
		return err
	}
	if p.APIKeyRef != "" {
		// R-ACCT-7: the profile's runs get its API key, which the tools
		// prefer to a sign-in kept in the home.
		yes := true
		a.SignedIn, a.Method, a.Email, a.Plan = &yes, "api_key", "", ""
		a.Message = "its sessions get the API key in vault secret " + p.APIKeyRef + " as " + apitypes.APIKeyEnv[p.Tool]
	}
	a.RateLimits = []apitypes.RateWindow{}
	latest, err := s.o.Store.LatestAccountUsage(ctx, p.Tenant)
	if err != nil {
		return err
	}
	for _, u := range latest {
		if u.ProfileRef == p.Ref {
			at := u.At.UTC()
			a.RateLimitsAt, a.Limit = &at, u.Limit
			if u.RateLimits != nil {
				a.RateLimits = u.RateLimits
			}
		}
	}
	return c.JSON(http.StatusOK, a)
}
