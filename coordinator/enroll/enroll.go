// Package enroll turns single-use join tokens into node certificates.
//
// The node's identity always comes from the token, never from the CSR
// subject; a refused enrollment writes nothing (the token stays as it was).
// enroll never sees a node's private key.
package enroll

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Join-token lifetimes (issue 2).
const (
	DefaultTTL = 30 * time.Minute
	MaxTTL     = 24 * time.Hour
)

// Errors of token creation.
var (
	// ErrTTL: the TTL is not in (0, MaxTTL].
	ErrTTL = errors.New("enroll: ttl must be more than 0 and at most 24h")
	// ErrLabel: a label is not key=value with a valid key.
	ErrLabel = errors.New("enroll: bad label")
)

var labelKey = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,62})$`)

// ValidateLabels checks label keys and values.
func ValidateLabels(labels map[string]string) error {
	for k, v := range labels {
		if !labelKey.MatchString(k) {
			return fmt.Errorf("%w: key %q must be 1-63 letters, digits, '.', '_', '/' or '-'", ErrLabel, k)
		}
		if len(v) > 256 {
			return fmt.Errorf("%w: value of %q is longer than 256 bytes", ErrLabel, k)
		}
	}
	return nil
}

// Issued is a freshly created join token. Token is shown once and never
// stored; the store keeps its hash.
type Issued struct {
	Token     string            `json:"token"`
	NodeID    string            `json:"node_id"`
	Tenant    string            `json:"tenant"`
	Labels    map[string]string `json:"labels,omitempty"`
	ExpiresAt time.Time         `json:"expires_at"`
	CAPin     string            `json:"ca_pin"`
}

// Server issues join tokens and serves enrollment connections.
type Server struct {
	Store     store.Store
	Authority *certs.Authority
	// Validity of node certificates. When zero, certs.DefaultNodeValidity.
	Validity time.Duration
	// Now is the clock. When nil, time.Now.
	Now func() time.Time
	// Log gets enrollments and their refusals (never a token). When nil,
	// nothing is logged.
	Log *slog.Logger
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Server) log() *slog.Logger {
	return logging.OrDiscard(s.Log).With(logging.KeyComponent, "enroll")
}

// CreateToken makes a join token for a new node of tenant. ttl 0 means
// DefaultTTL.
func (s *Server) CreateToken(ctx context.Context, tenant string, labels map[string]string, ttl time.Duration) (Issued, error) {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < 0 || ttl > MaxTTL {
		return Issued{}, ErrTTL
	}
	if err := ValidateLabels(labels); err != nil {
		return Issued{}, err
	}
	if _, err := s.Store.GetTenant(ctx, tenant); err != nil {
		return Issued{}, fmt.Errorf("enroll: tenant %q: %w", tenant, err)
	}
	tok, err := auth.NewToken(auth.PrefixJoinToken)
	if err != nil {
		return Issued{}, err
	}
	now := s.now()
	jt := store.JoinToken{
		Hash:      auth.Hash(tok),
		NodeID:    auth.NewID("node-"),
		Tenant:    tenant,
		Labels:    labels,
		CreatedAt: now,
		ExpiresAt: now.Add(ttl),
	}
	if err := s.Store.CreateJoinToken(ctx, jt); err != nil {
		return Issued{}, err
	}
	// Join tokens are minted over the admin socket (or by dev mode):
	// the local operator's act (R-AUD-6).
	s.audit(ctx, apitypes.AuditEntry{At: now, Tenant: tenant, Event: apitypes.AuditNodeTokenCreated,
		Actor:  apitypes.AuditActor{CredentialID: "admin-socket", Kind: apitypes.ActorOperator},
		Target: apitypes.AuditTarget{NodeID: jt.NodeID}, Detail: mustJSON(map[string]any{"expires_at": jt.ExpiresAt})})
	return Issued{Token: tok, NodeID: jt.NodeID, Tenant: tenant, Labels: labels, ExpiresAt: jt.ExpiresAt, CAPin: certs.Pin(s.Authority.Current)}, nil
}

// Enroll validates req and, only if everything is right, consumes the token
// and stores the node in one transaction.
func (s *Server) Enroll(ctx context.Context, req proto.EnrollRequest) (proto.EnrollResponse, error) {
	if req.Token == "" {
		return proto.EnrollResponse{}, &wire.Error{Status: http.StatusBadRequest, Code: "join_token_missing", Message: "the enrollment request has no join token; pass --token"}
	}
	if len(req.CSR) == 0 {
		return proto.EnrollResponse{}, &wire.Error{Status: http.StatusBadRequest, Code: "csr_invalid", Message: "the enrollment request has no CSR"}
	}
	now := s.now()
	var cert *x509.Certificate
	node, err := s.Store.Enroll(ctx, auth.Hash(req.Token), now, func(jt store.JoinToken) (store.Node, error) {
		c, err := s.Authority.SignNode(req.CSR, jt.NodeID, now, s.Validity)
		if err != nil {
			return store.Node{}, err
		}
		cert = c
		return store.Node{
			ID:           jt.NodeID,
			Tenant:       jt.Tenant,
			Labels:       jt.Labels,
			EnrolledAt:   now,
			CertSerial:   c.SerialNumber.Text(16),
			CertNotAfter: c.NotAfter.UTC(),
		}, nil
	})
	if err != nil {
		we := enrollError(err)
		s.log().Warn("enrollment refused", "code", we.Code, "reason", we.Message)
		return proto.EnrollResponse{}, we
	}
	s.log().Info("node enrolled", logging.KeyNodeID, node.ID, logging.KeyTenant, node.Tenant, "cert_serial", node.CertSerial)
	s.audit(ctx, apitypes.AuditEntry{At: now, Tenant: node.Tenant, Event: apitypes.AuditNodeEnrolled,
		Actor:  apitypes.AuditActor{CredentialID: node.ID, Kind: apitypes.ActorNode},
		Target: apitypes.AuditTarget{NodeID: node.ID}, Detail: mustJSON(map[string]string{"cert_serial": node.CertSerial})})
	return proto.EnrollResponse{
		NodeID:    node.ID,
		Tenant:    node.Tenant,
		CertPEM:   certs.EncodeCertPEM(cert.Raw),
		BundlePEM: s.Authority.BundlePEM(),
	}, nil
}

// audit appends e; the change it records has committed, so a failure is
// logged and the caller goes on.
func (s *Server) audit(ctx context.Context, e apitypes.AuditEntry) {
	if _, err := s.Store.AppendAudit(ctx, e); err != nil {
		s.log().Error("audit append failed", "event", e.Event, logging.Err(err))
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings and times always encode
	}
	return b
}

func enrollError(err error) *wire.Error {
	e := func(status int, code, msg string) *wire.Error {
		return &wire.Error{Status: status, Code: code, Message: msg}
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return e(http.StatusUnauthorized, "join_token_unknown", "the join token is not known to this coordinator; create one with olivares-coordinator token create")
	case errors.Is(err, store.ErrTokenUsed):
		return e(http.StatusUnauthorized, "join_token_used", "the join token was already used; join tokens are single use, create a new one with olivares-coordinator token create")
	case errors.Is(err, store.ErrTokenExpired):
		return e(http.StatusUnauthorized, "join_token_expired", "the join token has expired; create a new one with olivares-coordinator token create")
	case errors.Is(err, store.ErrExists):
		return e(http.StatusConflict, "node_exists", "a node with this token's identity is already enrolled")
	case errors.Is(err, certs.ErrCSRIdentity):
		return e(http.StatusBadRequest, "csr_identity_mismatch", "the CSR claims an identity; the coordinator assigns the node id from the token, so send a CSR with an empty subject")
	case errors.Is(err, certs.ErrCSRKey):
		return e(http.StatusBadRequest, "csr_key_unsupported", "the CSR key must be ECDSA P-256")
	case errors.Is(err, certs.ErrCSRInvalid):
		return e(http.StatusBadRequest, "csr_invalid", "the CSR cannot be parsed or its signature is wrong")
	}
	return e(http.StatusInternalServerError, "enroll_failed", "enrollment failed on the coordinator: "+err.Error())
}

// HandleConn serves one enrollment connection (ALPN olivares-enroll/1): one
// request message, one reply, then the connection is closed.
func (s *Server) HandleConn(conn net.Conn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	var req proto.EnrollRequest
	if err := wire.ReadMessage(conn, &req); err != nil {
		s.log().Warn("bad enrollment request", "remote", conn.RemoteAddr().String(), logging.Err(err))
		wire.Respond(conn, nil, &wire.Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "cannot read the enrollment request"})
		return
	}
	resp, err := s.Enroll(context.Background(), req)
	if err != nil {
		wire.Respond(conn, nil, err)
		return
	}
	wire.Respond(conn, resp, nil)
}

// Renew signs a renewal CSR for a connected node and records the new
// certificate. A revoked node gets nothing.
func (s *Server) Renew(ctx context.Context, nodeID string, csr []byte) (proto.RenewResponse, error) {
	now := s.now()
	var cert *x509.Certificate
	_, err := s.Store.UpdateNode(ctx, nodeID, func(n *store.Node) error {
		if !n.RevokedAt.IsZero() {
			return &wire.Error{Status: http.StatusForbidden, Code: "node_revoked", Message: "this node was revoked"}
		}
		c, err := s.Authority.SignNode(csr, nodeID, now, s.Validity)
		if err != nil {
			return err
		}
		cert = c
		n.CertSerial = c.SerialNumber.Text(16)
		n.CertNotAfter = c.NotAfter.UTC()
		return nil
	})
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			return proto.RenewResponse{}, we
		}
		return proto.RenewResponse{}, enrollError(err)
	}
	return proto.RenewResponse{CertPEM: certs.EncodeCertPEM(cert.Raw), BundlePEM: s.Authority.BundlePEM()}, nil
}
