package certs

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// replicaURIPrefix + replica id is the one URI SAN of a replica
// certificate: the identity a coordinator replica shows its peers on the
// replica-to-replica link (issue 24). It is never a node's: NodeID refuses
// it, and ReplicaID refuses a node certificate.
const replicaURIPrefix = "olivares://replica/"

// ErrNotReplicaCert: the certificate does not carry exactly one replica URI.
var ErrNotReplicaCert = errors.New("certs: not a replica certificate")

// IssueReplica issues the certificate coordinator replica id shows on the
// replica link, as server and as client, with a new P-256 key, valid for
// validity from now (zero means ServerValidity). id follows the node id
// rule (ErrNodeID). The chain is the leaf then Current; Leaf is set.
func (a *Authority) IssueReplica(id string, now time.Time, validity time.Duration) (tls.Certificate, error) {
	if err := checkNodeID(id); err != nil {
		return tls.Certificate{}, fmt.Errorf("replica id: %w", err)
	}
	if validity == 0 {
		validity = ServerValidity
	}
	u, err := url.Parse(replicaURIPrefix + id)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "Olivares replica " + id},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{u},
	}
	key, err := NewKey()
	if err != nil {
		return tls.Certificate{}, err
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	leaf, err := a.signLocked(tmpl, key.Public(), now, validity)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{leaf.Raw, a.Current.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// ReplicaID returns the replica id a replica certificate carries.
func ReplicaID(cert *x509.Certificate) (string, error) {
	if cert == nil || len(cert.URIs) != 1 {
		return "", ErrNotReplicaCert
	}
	id, ok := strings.CutPrefix(cert.URIs[0].String(), replicaURIPrefix)
	if !ok || checkNodeID(id) != nil {
		return "", ErrNotReplicaCert
	}
	return id, nil
}

// VerifyReplica checks a peer's chain against pool and returns the replica
// id of its leaf: the check both ends of the replica link make, each
// against the CA bundle it trusts now.
func VerifyReplica(rawCerts [][]byte, pool *x509.CertPool, now time.Time) (string, error) {
	if len(rawCerts) == 0 {
		return "", errors.New("certs: the peer sent no certificate")
	}
	certs := make([]*x509.Certificate, len(rawCerts))
	for i, raw := range rawCerts {
		c, err := x509.ParseCertificate(raw)
		if err != nil {
			return "", fmt.Errorf("certs: peer certificate: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return "", fmt.Errorf("certs: peer certificate: %w", err)
	}
	return ReplicaID(certs[0])
}
