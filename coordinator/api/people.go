package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// peopleAPI serves who the caller is, its tenants, principals and their credentials, and the CLI's own session (R-LIFE).
type peopleAPI struct{ *core }

// The lifecycle of people (issue 21): principals and their credentials,
// and the CLI's own login. Managing people and tokens needs
// sessions:run:admin, like revoking a node (the seeds name no identity
// permission; R-LIFE-1).
func (s *peopleAPI) routes() []Route {
	return []Route{
		{http.MethodGet, "/v1/whoami", "", s.whoami, nil},
		// The tenants the caller belongs to, before it picks one (the
		// console's tenant switch).
		{http.MethodGet, "/v1/tenants", "", s.tenants, nil},
		{http.MethodGet, "/v1/principals", auth.PermRunAdmin, s.listPrincipals, nil},
		{http.MethodPost, "/v1/principals", auth.PermRunAdmin, s.createPrincipal, nil},
		{http.MethodGet, "/v1/principals/:id", auth.PermRunAdmin, s.getPrincipal, nil},
		{http.MethodPost, "/v1/principals/:id/revoke", auth.PermRunAdmin, s.revokePrincipal, nil},
		{http.MethodPost, "/v1/principals/:id/credentials", auth.PermRunAdmin, s.createCredential, nil},
		{http.MethodGet, "/v1/credentials", auth.PermRunAdmin, s.listCredentials, query("principal")},
		{http.MethodPost, "/v1/credentials/:id/revoke", auth.PermRunAdmin, s.revokeCredential, nil},
		// The CLI's own session: any member of the tenant (R-LIFE-5).
		{http.MethodPost, "/v1/login", "", s.login, nil},
		{http.MethodPost, "/v1/logout", "", s.logout, nil},
	}
}

// auditAll appends the entry to every tenant of p that credential c
// serves.
func (s *peopleAPI) auditAll(ctx context.Context, p store.Principal, c store.Credential, actor apitypes.AuditActor, event string, target apitypes.AuditTarget, detail any) {
	ts := make([]string, 0, len(p.Roles))
	for t := range p.Roles {
		if c.Serves(p, t) {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	for _, t := range ts {
		s.Audit(ctx, t, actor, event, target, detail)
	}
}

func principalView(p store.Principal, tenant string) apitypes.Principal {
	return apitypes.Principal{ID: p.ID, Name: p.Name, Kind: p.Kind, Role: p.Roles[tenant], CreatedAt: p.CreatedAt.UTC()}
}

// credentialView is c as the API shows it; parentID is the public id of
// its parent, if any.
func credentialView(c store.Credential, current, parentID string) apitypes.Credential {
	kind := c.Kind
	if kind == "" {
		kind = store.CredSession
	}
	v := apitypes.Credential{ID: c.PublicID(), PrincipalID: c.PrincipalID, Kind: kind, Label: c.Label,
		CreatedAt: c.CreatedAt.UTC(), ExpiresAt: tp(c.ExpiresAt), Tenant: c.Tenant, ParentID: parentID, Current: c.Hash == current}
	return v
}

// credentialViews shows the credentials of cs that serve tenant: those
// of the tenant, a person's own sign-ins and the older ones without a
// tenant. Another tenant's credentials of the same person are not this
// tenant's admin's to see or revoke (R-LIFE-9).
func credentialViews(p store.Principal, cs []store.Credential, tenant, current string) []apitypes.Credential {
	ids := make(map[string]string, len(cs))
	for _, c := range cs {
		ids[c.Hash] = c.PublicID()
	}
	out := []apitypes.Credential{}
	for _, c := range cs {
		if c.Serves(p, tenant) {
			out = append(out, credentialView(c, current, ids[c.Parent]))
		}
	}
	return out
}

// personAct refuses an agent identity what only a person may do
// (R-AUTH-10): create a person or an admin, mint a token for one, or take
// a role or a token away from one. An agent admin may manage agent identities below
// admin, as automation that provisions its own helpers does.
func personAct(cl Caller, kind, role, what string) error {
	if cl.Principal.Kind != store.KindAgent || (kind == store.KindAgent && role != store.RoleAdmin) {
		return nil
	}
	return apierr.New(http.StatusForbidden, "agent_identity_refused",
		"%s a person or an admin needs a person: agent identities may manage only agent identities below admin", what)
}

// principalMu serializes the name check and the creation of a principal
// in one coordinator (names are unique per tenant, R-LIFE-4).
var principalMu sync.Mutex

// NewPrincipal creates a principal with role in an existing tenant and its
// first token (a session credential), and audits it as actor. A name
// another principal of the tenant holds is 409 name_taken.
func (s *peopleAPI) NewPrincipal(ctx context.Context, tenant, name, role, kind string, actor apitypes.AuditActor) (string, store.Principal, store.Credential, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "" || utf8.RuneCountInString(name) > 100 || strings.ContainsAny(name, "\x00\n\r\t"):
		return "", store.Principal{}, store.Credential{}, apierr.BadRequest("bad_name", "give the principal a name of 1-100 characters on one line")
	case !auth.ValidRole(role):
		return "", store.Principal{}, store.Credential{}, apierr.BadRequest("bad_role", "role %q: use viewer, operator or admin", role)
	case !auth.ValidKind(kind):
		return "", store.Principal{}, store.Credential{}, apierr.BadRequest("bad_kind", "kind %q: use human or agent", kind)
	}
	principalMu.Lock()
	defer principalMu.Unlock()
	ps, err := s.o.Store.ListPrincipals(ctx, tenant)
	if err != nil {
		return "", store.Principal{}, store.Credential{}, err
	}
	if slices.ContainsFunc(ps, func(p store.Principal) bool { return p.Name == name }) {
		return "", store.Principal{}, store.Credential{}, apierr.New(http.StatusConflict, "name_taken", "a principal named %q exists in tenant %s; pick another name", name, tenant)
	}
	tok, err := auth.NewToken(auth.PrefixAPIToken)
	if err != nil {
		return "", store.Principal{}, store.Credential{}, err
	}
	now := s.o.Now().UTC()
	p := store.Principal{ID: auth.NewID("prn_"), Name: name, Kind: kind, Roles: map[string]string{tenant: role}, CreatedAt: now}
	cred := store.Credential{Hash: auth.Hash(tok), ID: auth.NewID("cred_"), Kind: store.CredSession, PrincipalID: p.ID, Label: "created", CreatedAt: now, Tenant: tenant}
	if err := s.o.Store.CreatePrincipal(ctx, p, cred); err != nil {
		return "", store.Principal{}, store.Credential{}, err
	}
	s.Audit(ctx, tenant, actor, apitypes.AuditPrincipalCreated, apitypes.AuditTarget{PrincipalID: p.ID},
		map[string]string{"role": role, "kind": kind, "credential_id": cred.ID})
	return tok, p, cred, nil
}

// NewCredential gives principal p another token and audits it. spec
// gives its kind, label, tenant (store.Credential.Tenant: required), and,
// for a derived credential, its parent and expiry (Credential.Derive); the
// rest is filled in here. A parent revoked meanwhile is 401.
func (s *peopleAPI) NewCredential(ctx context.Context, p store.Principal, spec store.Credential, actor apitypes.AuditActor) (string, store.Credential, error) {
	switch spec.Kind {
	case "":
		spec.Kind = store.CredSession
	case store.CredSession, store.CredAPIToken:
	default:
		return "", store.Credential{}, apierr.BadRequest("bad_kind", "credential kind %q: use session or api_token", spec.Kind)
	}
	if utf8.RuneCountInString(spec.Label) > 200 || strings.ContainsAny(spec.Label, "\x00\n\r") {
		return "", store.Credential{}, apierr.BadRequest("bad_label", "a label is one line of at most 200 characters")
	}
	if spec.Tenant == "" {
		return "", store.Credential{}, errors.New("new credential: no tenant")
	}
	tok, err := auth.NewToken(auth.PrefixAPIToken)
	if err != nil {
		return "", store.Credential{}, err
	}
	cred := spec
	cred.Hash, cred.ID, cred.PrincipalID, cred.CreatedAt = auth.Hash(tok), auth.NewID("cred_"), p.ID, s.o.Now().UTC()
	if err := s.o.Store.AddCredential(ctx, cred); err != nil {
		if cred.Parent != "" && errors.Is(err, store.ErrNotFound) {
			return "", store.Credential{}, apierr.Unauthenticated()
		}
		return "", store.Credential{}, err
	}
	s.auditAll(ctx, p, cred, actor, apitypes.AuditCredentialCreated, apitypes.AuditTarget{PrincipalID: p.ID, CredentialID: cred.ID},
		map[string]string{"kind": cred.Kind})
	return tok, cred, nil
}

func (s *peopleAPI) listPrincipals(c echo.Context) error {
	tenant := CallerOf(c).Tenant
	ps, err := s.o.Store.ListPrincipals(c.Request().Context(), tenant)
	if err != nil {
		return err
	}
	out := apitypes.PrincipalList{Items: []apitypes.Principal{}}
	for _, p := range ps {
		out.Items = append(out.Items, principalView(p, tenant))
	}
	return c.JSON(http.StatusOK, out)
}

func (s *peopleAPI) createPrincipal(c echo.Context) error {
	var req apitypes.PrincipalCreate
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	if req.Kind == "" {
		req.Kind = store.KindHuman
	}
	cl := CallerOf(c)
	if err := personAct(cl, req.Kind, req.Role, "creating"); err != nil {
		return err
	}
	tok, p, cred, err := s.NewPrincipal(c.Request().Context(), cl.Tenant, req.Name, req.Role, req.Kind, cl.Actor())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, apitypes.PrincipalCreated{Principal: principalView(p, cl.Tenant), CredentialID: cred.ID, Token: tok})
}

// principalInTenant loads a principal with a role in tenant; any other is
// 404 (R-TEN-3).
func (s *peopleAPI) principalInTenant(ctx context.Context, tenant, id string) (store.Principal, error) {
	p, err := s.o.Store.GetPrincipal(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Principal{}, apierr.NotFound("principal", id)
	}
	if err != nil {
		return store.Principal{}, err
	}
	if _, ok := p.Roles[tenant]; !ok {
		return store.Principal{}, apierr.NotFound("principal", id)
	}
	return p, nil
}

func (s *peopleAPI) getPrincipal(c echo.Context) error {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	p, err := s.principalInTenant(ctx, cl.Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	cs, err := s.o.Store.ListCredentials(ctx, p.ID)
	if err != nil {
		return err
	}
	v := principalView(p, cl.Tenant)
	v.Credentials = credentialViews(p, cs, cl.Tenant, cl.Credential.Hash)
	return c.JSON(http.StatusOK, v)
}

// revokePrincipal removes the principal's role in this tenant; with no
// tenant left, its tokens go too (R-LIFE-4). One cannot revoke oneself:
// `olivares logout` ends one's own session.
func (s *peopleAPI) revokePrincipal(c echo.Context) error {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	if err := noBody(c); err != nil {
		return err
	}
	p, err := s.principalInTenant(ctx, cl.Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	if err := personAct(cl, p.Kind, p.Roles[cl.Tenant], "revoking"); err != nil {
		return err
	}
	if p.ID == cl.Principal.ID {
		return apierr.New(http.StatusConflict, "self_revoke_refused", "you cannot revoke your own principal; ask another admin, or end this session with olivares logout")
	}
	e := apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: cl.Tenant, Actor: cl.Actor(), Event: apitypes.AuditPrincipalRevoked,
		Target: apitypes.AuditTarget{PrincipalID: p.ID}}
	n, err := s.o.Store.RevokePrincipal(ctx, p.ID, cl.Tenant, e)
	if errors.Is(err, store.ErrNotFound) {
		return apierr.NotFound("principal", p.ID)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apitypes.PrincipalRevoked{ID: p.ID, Tenant: cl.Tenant, CredentialsRevoked: n})
}

func (s *peopleAPI) createCredential(c echo.Context) error {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	p, err := s.principalInTenant(ctx, cl.Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	var req apitypes.CredentialCreate
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	if err := personAct(cl, p.Kind, p.Roles[cl.Tenant], "minting a token for"); err != nil {
		return err
	}
	// The token serves this tenant only: its admin may not hand out a way
	// into another tenant the same person belongs to (R-LIFE-9).
	tok, cred, err := s.NewCredential(ctx, p, store.Credential{Kind: req.Kind, Label: req.Label, Tenant: cl.Tenant}, cl.Actor())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, apitypes.CredentialCreated{Credential: credentialView(cred, "", ""), Token: tok})
}

// listCredentials lists the credentials of the tenant's principals, or of
// one (?principal=ID).
func (s *peopleAPI) listCredentials(c echo.Context) error {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	var ps []store.Principal
	if id := c.QueryParam("principal"); id != "" {
		p, err := s.principalInTenant(ctx, cl.Tenant, id)
		if err != nil {
			return err
		}
		ps = []store.Principal{p}
	} else {
		var err error
		if ps, err = s.o.Store.ListPrincipals(ctx, cl.Tenant); err != nil {
			return err
		}
	}
	out := apitypes.CredentialList{Items: []apitypes.Credential{}}
	for _, p := range ps {
		cs, err := s.o.Store.ListCredentials(ctx, p.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		out.Items = append(out.Items, credentialViews(p, cs, cl.Tenant, cl.Credential.Hash)...)
	}
	return c.JSON(http.StatusOK, out)
}

// revokeCredential deletes one token of a principal of this tenant, and
// every credential derived from it: they authenticate nothing from the
// next request on, on every coordinator (R-LIFE-4, R-LIFE-10). An admin
// may revoke the credentials that serve the tenant: the tenant's own, and
// a person's sign-ins, which serve all their tenants.
func (s *peopleAPI) revokeCredential(c echo.Context) error {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	if err := noBody(c); err != nil {
		return err
	}
	id := c.Param("id")
	cred, err := s.o.Store.CredentialByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return apierr.NotFound("credential", id)
	}
	if err != nil {
		return err
	}
	p, err := s.principalInTenant(ctx, cl.Tenant, cred.PrincipalID)
	if err != nil || !cred.Serves(p, cl.Tenant) {
		return apierr.NotFound("credential", id)
	}
	if err := personAct(cl, p.Kind, p.Roles[cl.Tenant], "revoking a token of"); err != nil {
		return err
	}
	n, err := s.o.Store.RevokeCredential(ctx, cred.Hash)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return apierr.NotFound("credential", id)
		}
		return err
	}
	s.auditAll(ctx, p, cred, cl.Actor(), apitypes.AuditCredentialRevoked, apitypes.AuditTarget{PrincipalID: p.ID, CredentialID: id},
		map[string]int{"derived_revoked": n})
	v := credentialView(cred, cl.Credential.Hash, "")
	v.DerivedRevoked = &n
	return c.JSON(http.StatusOK, v)
}

// login trades the presented token for a new credential of the same
// principal and kind, which the CLI keeps and `olivares logout` revokes,
// leaving the token it was given untouched (R-LIFE-5). The new credential
// is derived from the presented one: of its tenant, expiring no later,
// revoked with it (R-LIFE-10).
func (s *peopleAPI) login(c echo.Context) error {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	var req apitypes.LoginRequest
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	label := req.Label
	if label == "" {
		label = "olivares login"
	}
	tok, cred, err := s.NewCredential(ctx, cl.Principal, cl.Credential.Derive(store.Credential{Kind: cl.Credential.Kind, Label: label}), cl.Actor())
	if err != nil {
		return err
	}
	s.auditCaller(c, apitypes.AuditSignedIn, apitypes.AuditTarget{PrincipalID: cl.Principal.ID, CredentialID: cred.ID}, map[string]string{"via": "cli"})
	return c.JSON(http.StatusCreated, apitypes.CredentialCreated{Credential: credentialView(cred, "", cl.Credential.PublicID()), Token: tok})
}

// logout revokes the credential the request presents (R-LIFE-5).
func (s *peopleAPI) logout(c echo.Context) error {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	if err := noBody(c); err != nil {
		return err
	}
	if _, err := s.o.Store.RevokeCredential(ctx, cl.Credential.Hash); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	s.auditCaller(c, apitypes.AuditSignedOut, apitypes.AuditTarget{PrincipalID: cl.Principal.ID, CredentialID: cl.Credential.PublicID()}, map[string]string{"via": "cli"})
	return c.NoContent(http.StatusNoContent)
}

func (s *peopleAPI) tenants(c echo.Context) error {
	cl := CallerOf(c)
	return c.JSON(http.StatusOK, TenantsOf(cl.Principal, cl.Credential))
}

// TenantsOf lists the tenants of p that credential c serves, by id with
// their roles and permissions.
func TenantsOf(p store.Principal, c store.Credential) apitypes.Tenants {
	out := apitypes.Tenants{PrincipalID: p.ID, Name: p.Name, Kind: p.Kind, Items: []apitypes.TenantRole{}}
	for id, role := range p.Roles {
		if !c.Serves(p, id) {
			continue
		}
		out.Items = append(out.Items, apitypes.TenantRole{ID: id, Role: role, Permissions: append([]string{}, auth.RolePermissions(role)...)})
	}
	slices.SortFunc(out.Items, func(a, b apitypes.TenantRole) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (s *peopleAPI) whoami(c echo.Context) error {
	cl := CallerOf(c)
	return c.JSON(http.StatusOK, apitypes.Whoami{
		PrincipalID: cl.Principal.ID, Name: cl.Principal.Name, Kind: cl.Principal.Kind,
		Tenant: cl.Tenant, Role: cl.Role, Permissions: append([]string{}, auth.RolePermissions(cl.Role)...),
	})
}
