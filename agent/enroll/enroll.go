// Package enroll is the node's side of enrollment: make a key here, check the
// coordinator against the CA pin BEFORE sending the join token, send a CSR,
// store what comes back.
//
// enroll never sends the private key and stores nothing unless the
// coordinator accepted the request.
package enroll

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/olivares-dev/olivares/agent/identity"
	"github.com/olivares-dev/olivares/agent/state"
	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Options of an enrollment.
type Options struct {
	Coordinator string // host:port of the tunnel listener
	Token       string
	CAPin       string // sha256:<hex>
	StateDir    string
	// Replace enrolls a state dir that holds an identity already (dev
	// mode's --reenroll, after its node was revoked): the new key,
	// certificate and record replace the old ones once the coordinator
	// accepted the request; profiles, workspaces and runs in the state
	// dir stay. When false, an enrolled state dir is refused.
	Replace bool
}

// ErrAlreadyEnrolled: the state dir holds an identity already.
var ErrAlreadyEnrolled = errors.New("enroll: this state dir is already enrolled")

// Enroll enrolls the node and returns its identity.
func Enroll(ctx context.Context, o Options) (*identity.Identity, error) {
	if o.Coordinator == "" || o.Token == "" || o.CAPin == "" || o.StateDir == "" {
		return nil, errors.New("enroll: --coordinator, --token, --ca-pin and --state-dir are required")
	}
	if _, err := certs.ParsePin(o.CAPin); err != nil {
		return nil, fmt.Errorf("enroll: --ca-pin %q: %w (want sha256:<64 hex digits>, as token create prints it)", o.CAPin, err)
	}
	if state.Exists(o.StateDir) {
		db, err := state.Open(o.StateDir)
		if err != nil {
			return nil, err
		}
		id, err := identity.Load(db, o.StateDir)
		db.Close()
		if err == nil && !o.Replace {
			return nil, fmt.Errorf("%w as node %s; remove %s to enroll again", ErrAlreadyEnrolled, id.NodeID, o.StateDir)
		}
	}
	key, err := certs.NewKey()
	if err != nil {
		return nil, err
	}
	csr, err := certs.NewCSR(key)
	if err != nil {
		return nil, err
	}
	// The node has no CA yet: the chain is accepted only if it leads to the
	// pinned root, and this check runs during the handshake, before a byte
	// of the token is written.
	tc := &tls.Config{
		MinVersion:            tls.VersionTLS13,
		InsecureSkipVerify:    true,
		VerifyPeerCertificate: certs.VerifyPinned(o.CAPin),
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := tunnel.DialEnroll(dctx, o.Coordinator, tc)
	if err != nil {
		if errors.Is(err, certs.ErrPinMismatch) {
			return nil, fmt.Errorf("enroll: the coordinator at %s does not present the CA with pin %s; the token was not sent: %w", o.Coordinator, o.CAPin, err)
		}
		return nil, fmt.Errorf("enroll: connect %s: %w", o.Coordinator, err)
	}
	defer conn.Close()
	if dl, ok := dctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if err := wire.WriteMessage(conn, proto.EnrollRequest{Token: o.Token, CSR: csr}); err != nil {
		return nil, fmt.Errorf("enroll: send: %w", err)
	}
	var reply wire.Reply
	if err := wire.ReadMessage(conn, &reply); err != nil {
		return nil, fmt.Errorf("enroll: read reply: %w", err)
	}
	if !reply.OK {
		if reply.Error != nil {
			return nil, fmt.Errorf("enroll: refused by the coordinator: %w", reply.Error)
		}
		return nil, errors.New("enroll: refused by the coordinator")
	}
	var resp proto.EnrollResponse
	if err := unmarshal(reply.Result, &resp); err != nil {
		return nil, err
	}
	// The certificate must be for this key and this identity, chained to the
	// pinned root.
	cs, err := certs.ParseCertsPEM(resp.CertPEM)
	if err != nil || len(cs) == 0 {
		return nil, fmt.Errorf("enroll: coordinator sent a bad certificate: %v", err)
	}
	if got, err := certs.NodeID(cs[0]); err != nil || got != resp.NodeID {
		return nil, fmt.Errorf("enroll: certificate identity %q does not match node id %q", got, resp.NodeID)
	}
	db, err := state.Open(o.StateDir)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return identity.Save(db, o.StateDir, identity.Record{
		NodeID: resp.NodeID, Tenant: resp.Tenant, Coordinator: o.Coordinator, EnrolledAt: time.Now().UTC(),
	}, key, resp.CertPEM, resp.BundlePEM)
}
