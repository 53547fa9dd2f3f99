package api

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// maxSecretValue bounds one vault value (the agent's bound too).
const maxSecretValue = 64 << 10

// vaultAPI serves the tenant's secrets (R-VAULT); the grants of a run are core's.
type vaultAPI struct{ *core }

func (s *vaultAPI) routes() []Route {
	return []Route{
		// The vault is workspace administration: whoever may set a setup
		// command may hand credentials to runs (R-AUTH-5's permission).
		{http.MethodPost, Base + "/vault/secrets", auth.PermWorkspaceAdmin, s.createSecret, nil},
		{http.MethodGet, Base + "/vault/secrets", auth.PermWorkspaceAdmin, s.listSecrets, nil},
		{http.MethodDelete, Base + "/vault/secrets/:ref", auth.PermWorkspaceAdmin, s.deleteSecret, nil},
	}
}

func secretView(sec store.Secret) apitypes.Secret {
	return apitypes.Secret{Ref: sec.Ref, Tenant: sec.Tenant, Name: sec.Name, CreatedAt: sec.CreatedAt.UTC()}
}

func (s *vaultAPI) createSecret(c echo.Context) error {
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

func (s *vaultAPI) listSecrets(c echo.Context) error {
	secs, err := s.o.Store.ListSecrets(c.Request().Context(), CallerOf(c).Tenant)
	out := make([]apitypes.Secret, 0, len(secs))
	for _, sec := range secs {
		out = append(out, secretView(sec))
	}
	return items(c, out, err)
}

func (s *vaultAPI) deleteSecret(c echo.Context) error {
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
	// R-ACCT-7: a profile's API key is not deleted under it.
	ps, err := s.o.Store.ListProfiles(ctx, sec.Tenant)
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(ps, func(p apitypes.Profile) bool { return p.APIKeyRef == sec.Ref }); i >= 0 {
		return apierr.New(http.StatusConflict, "secret_in_use", "secret %s is the API key of profile %s; remove it from the profile first (api_key_ref \"\")", sec.Name, ps[i].Name)
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
