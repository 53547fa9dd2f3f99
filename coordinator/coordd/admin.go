package coordd

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/olivares-dev/olivares/coordinator/enroll"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/localsock"
)

// The admin socket is how `olivares-coordinator token create` and
// `principal create` reach the running coordinator: only the coordinator
// opens its store. Whoever can open the 0600 socket is the operator.

func localsockListen(path string) (net.Listener, error) { return localsock.Listen(path) }

// PrincipalRequest is the admin socket's body for POST /principals.
type PrincipalRequest struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
	Role   string `json:"role"`
	Kind   string `json:"kind"`
	// NewTenant creates the tenant when it does not exist; without it an
	// unknown tenant is refused (a typo never makes a tenant, R-LIFE-4).
	NewTenant bool `json:"new_tenant,omitempty"`
}

// TenantRequest is the admin socket's body for POST /tenants.
type TenantRequest struct {
	ID string `json:"id"`
}

// PrincipalResponse carries the token, shown once.
type PrincipalResponse struct {
	PrincipalID string `json:"principal_id"`
	Tenant      string `json:"tenant"`
	Name        string `json:"name"`
	Role        string `json:"role"`
	Kind        string `json:"kind"`
	Token       string `json:"token"`
}

// CredentialRequest is the admin socket's body for POST /credentials.
type CredentialRequest struct {
	PrincipalID string `json:"principal_id"`
	Kind        string `json:"kind"`
	Label       string `json:"label,omitempty"`
}

// CredentialResponse carries the new token, shown once.
type CredentialResponse struct {
	PrincipalID  string `json:"principal_id"`
	CredentialID string `json:"credential_id"`
	Kind         string `json:"kind"`
	Token        string `json:"token"`
}

// SigninLinkRequest is the admin socket's body for POST /signin-links.
type SigninLinkRequest struct {
	PrincipalID string        `json:"principal_id"`
	TTL         time.Duration `json:"ttl"`
	// BaseURL is the console's address as the person reaches it; when
	// empty, the API's listen URL.
	BaseURL string `json:"base_url,omitempty"`
}

// SigninLinkResponse carries the link, shown once.
type SigninLinkResponse struct {
	PrincipalID string    `json:"principal_id"`
	URL         string    `json:"url"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// TokenRequest is the admin socket's body for POST /join-tokens.
type TokenRequest struct {
	Tenant string            `json:"tenant"`
	Labels map[string]string `json:"labels,omitempty"`
	TTL    time.Duration     `json:"ttl"`
}

// TokenResponse is enroll.Issued plus where to enroll.
type TokenResponse struct {
	enroll.Issued
	Coordinator string `json:"coordinator"`
}

// writeAdminError answers an API error with its own status and code, and
// anything else as a 400 with its text.
func writeAdminError(w http.ResponseWriter, err error) {
	var ae *apierr.Error
	if errors.As(err, &ae) {
		localsock.WriteError(w, ae.Status, ae.Code, ae.Message)
		return
	}
	localsock.WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
}

func serveAdmin(ctx context.Context, ln net.Listener, c *Coordinator) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /principals", func(w http.ResponseWriter, r *http.Request) {
		var req PrincipalRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			localsock.WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		tok, p, err := c.NewPrincipal(r.Context(), req.Tenant, req.Name, req.Role, req.Kind, req.NewTenant)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		localsock.WriteJSON(w, http.StatusCreated, PrincipalResponse{PrincipalID: p.ID, Tenant: req.Tenant, Name: p.Name, Role: req.Role, Kind: p.Kind, Token: tok})
	})
	mux.HandleFunc("POST /credentials", func(w http.ResponseWriter, r *http.Request) {
		var req CredentialRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			localsock.WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		tok, cred, err := c.AddCredential(r.Context(), req.PrincipalID, req.Kind, req.Label)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		localsock.WriteJSON(w, http.StatusCreated, CredentialResponse{PrincipalID: cred.PrincipalID, CredentialID: cred.ID, Kind: cred.Kind, Token: tok})
	})
	mux.HandleFunc("POST /signin-links", func(w http.ResponseWriter, r *http.Request) {
		var req SigninLinkRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			localsock.WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		u, exp, err := c.SigninLink(r.Context(), req.PrincipalID, req.TTL, req.BaseURL)
		if err != nil {
			localsock.WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		localsock.WriteJSON(w, http.StatusCreated, SigninLinkResponse{PrincipalID: req.PrincipalID, URL: u, ExpiresAt: exp})
	})
	mux.HandleFunc("POST /join-tokens", func(w http.ResponseWriter, r *http.Request) {
		var req TokenRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			localsock.WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		iss, err := c.Enroll.CreateToken(r.Context(), req.Tenant, req.Labels, req.TTL)
		if err != nil {
			localsock.WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		localsock.WriteJSON(w, http.StatusCreated, TokenResponse{Issued: iss, Coordinator: c.TunnelAddr()})
	})
	mux.HandleFunc("POST /tenants", func(w http.ResponseWriter, r *http.Request) {
		var req TenantRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			localsock.WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		t, err := c.CreateTenant(r.Context(), req.ID)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		localsock.WriteJSON(w, http.StatusCreated, t)
	})
	mux.HandleFunc("GET /tenants", func(w http.ResponseWriter, r *http.Request) {
		ts, err := c.Store.ListTenants(r.Context())
		if err != nil {
			writeAdminError(w, err)
			return
		}
		if ts == nil {
			ts = []store.Tenant{}
		}
		localsock.WriteJSON(w, http.StatusOK, map[string]any{"items": ts})
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		localsock.WriteJSON(w, http.StatusOK, map[string]any{"api_url": c.APIURL(), "tunnel": c.TunnelAddr(), "version": Version, "fleet": c.Fleet.Stats()})
	})
	return localsock.Serve(ctx, ln, c.requests.wrap(mux))
}
