package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

// maxSecretValue bounds one vault value (the agent's bound too).
const maxSecretValue = 64 << 10

func (s *Server) vaultRoutes() []Route {
	return []Route{
		// The vault is workspace administration: whoever may set a setup
		// command may hand credentials to runs (R-AUTH-5's permission).
		{http.MethodPost, Base + "/vault/secrets", auth.PermWorkspaceAdmin, s.createSecret},
		{http.MethodGet, Base + "/vault/secrets", auth.PermWorkspaceAdmin, s.listSecrets},
		{http.MethodDelete, Base + "/vault/secrets/:ref", auth.PermWorkspaceAdmin, s.deleteSecret},
	}
}

func secretView(sec store.Secret) apitypes.Secret {
	return apitypes.Secret{Ref: sec.Ref, Tenant: sec.Tenant, Name: sec.Name, CreatedAt: sec.CreatedAt.UTC()}
}

func (s *Server) createSecret(c echo.Context) error {
	if s.o.Vault == nil {
		return apierr.New(http.StatusServiceUnavailable, "vault_unavailable", "this coordinator has no vault key")
	}
	var req apitypes.SecretCreate
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	switch {
	case !nameOK(req.Name):
		return apierr.BadRequest("bad_name", "secret name %q: use 1-64 letters, digits, '.', '_' or '-'", req.Name)
	case req.Value == nil:
		return apierr.BadRequest("bad_value", "value is required")
	case len(*req.Value) > maxSecretValue:
		return apierr.BadRequest("bad_value", "the value is over %d bytes", maxSecretValue)
	}
	tenant := CallerOf(c).Tenant
	ref := auth.NewID("sec_")
	sealed, err := s.o.Vault.Seal(tenant, ref, []byte(*req.Value))
	if err != nil {
		return err
	}
	sec := store.Secret{Ref: ref, Tenant: tenant, Name: req.Name, Sealed: sealed, CreatedAt: s.o.Now().UTC()}
	if err := s.o.Store.CreateSecret(c.Request().Context(), sec); err != nil {
		if errors.Is(err, store.ErrExists) {
			return apierr.New(http.StatusConflict, "name_taken", "a secret named %q exists in this tenant", req.Name)
		}
		return err
	}
	s.auditCaller(c, apitypes.AuditSecretAdded, apitypes.AuditTarget{SecretRef: sec.Ref}, nil)
	return c.JSON(http.StatusCreated, secretView(sec))
}

func (s *Server) listSecrets(c echo.Context) error {
	secs, err := s.o.Store.ListSecrets(c.Request().Context(), CallerOf(c).Tenant)
	if err != nil {
		return err
	}
	out := apitypes.SecretList{Items: []apitypes.Secret{}}
	for _, sec := range secs {
		out.Items = append(out.Items, secretView(sec))
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) deleteSecret(c echo.Context) error {
	ctx := c.Request().Context()
	sec, err := s.o.Store.GetSecret(ctx, c.Param("ref"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && sec.Tenant != CallerOf(c).Tenant) {
		return apierr.NotFound("secret", c.Param("ref"))
	}
	if err != nil {
		return err
	}
	if err := noBody(c); err != nil {
		return err
	}
	if err := s.o.Store.DeleteSecret(ctx, sec.Ref); err != nil {
		return err
	}
	s.auditCaller(c, apitypes.AuditSecretDeleted, apitypes.AuditTarget{SecretRef: sec.Ref}, nil)
	return c.NoContent(http.StatusNoContent)
}

func nameOK(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for i, r := range n {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || (i > 0 && strings.ContainsRune("._-", r))
		if !ok {
			return false
		}
	}
	return true
}

// checkGrants validates a launch's grants (400, R-GRANT-1) and that each names
// a secret of the tenant (404, R-TEN-3).
func (s *Server) checkGrants(ctx context.Context, tenant string, gs []apitypes.Grant) ([]store.GrantRef, error) {
	var out []store.GrantRef
	for _, g := range gs {
		if !slices.Contains(apitypes.GrantKinds, g.Kind) {
			return nil, apierr.BadRequest("bad_grant", "grant kind %q: use %s", g.Kind, strings.Join(apitypes.GrantKinds, ", "))
		}
		if g.Env == "" {
			return nil, apierr.BadRequest("bad_grant", "a grant needs env: the variable the tool reads it from")
		}
		sec, err := s.o.Store.GetSecret(ctx, g.SecretRef)
		if errors.Is(err, store.ErrNotFound) || (err == nil && sec.Tenant != tenant) {
			return nil, apierr.NotFound("secret", g.SecretRef)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, store.GrantRef{Kind: g.Kind, SecretRef: g.SecretRef, Env: g.Env, AsFile: g.AsFile})
	}
	return out, nil
}

// openGrants resolves grants to their values for the node. A secret
// deleted since the launch refuses the resume (409): the run would start
// without a credential it had.
func (s *Server) openGrants(ctx context.Context, tenant string, gs []store.GrantRef) ([]proto.Grant, error) {
	out := make([]proto.Grant, 0, len(gs))
	for _, g := range gs {
		sec, err := s.o.Store.GetSecret(ctx, g.SecretRef)
		if errors.Is(err, store.ErrNotFound) {
			return nil, apierr.New(http.StatusConflict, "grant_unavailable", "secret %s granted to this run as %s is gone from the vault", g.SecretRef, g.Env)
		}
		if err != nil {
			return nil, err
		}
		if s.o.Vault == nil {
			return nil, apierr.New(http.StatusServiceUnavailable, "vault_unavailable", "this coordinator has no vault key")
		}
		v, err := s.o.Vault.Open(tenant, sec.Ref, sec.Sealed)
		if err != nil {
			return nil, err
		}
		out = append(out, proto.Grant{Kind: g.Kind, Env: g.Env, AsFile: g.AsFile, Value: v})
	}
	return out, nil
}

// runGrants resolves the grants recorded for a run (for resume and
// approve).
func (s *Server) runGrants(ctx context.Context, r apitypes.Run) ([]proto.Grant, error) {
	metas, err := s.o.Store.GetRunMeta(ctx, []string{r.RunRef})
	if err != nil {
		return nil, err
	}
	return s.openGrants(ctx, r.Tenant, metas[r.RunRef].Grants)
}
