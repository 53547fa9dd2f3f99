package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

const (
	pinPrefix = "sha256:"
	// nodeURIPrefix + node id is the one URI SAN of a node certificate.
	nodeURIPrefix = "olivares://node/"
	maxNodeIDLen  = 128
	// maxRenewJitter bounds RenewAt's jitter (R: renew at half-life ±10 %).
	maxRenewJitter = 0.1
)

// NewKey generates an ECDSA P-256 private key.
func NewKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: generate key: %w", err)
	}
	return k, nil
}

// NewCSR returns a DER certificate request for key with an empty subject and
// no SANs: the coordinator decides the node's identity, so the node asks for
// none.
func NewCSR(key *ecdsa.PrivateKey) ([]byte, error) {
	if key == nil {
		return nil, errors.New("certs: nil private key")
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, fmt.Errorf("certs: create CSR: %w", err)
	}
	return der, nil
}

// Pin returns "sha256:" and the lowercase hex SHA-256 of cert's
// SubjectPublicKeyInfo. Pinning the key rather than the whole certificate
// keeps a pin valid if the CA certificate is re-issued with the same key.
func Pin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return pinPrefix + hex.EncodeToString(sum[:])
}

// ParsePin checks that s has the form Pin returns and returns the 32-byte
// digest. Any other form, uppercase hex included, is ErrPinFormat.
func ParsePin(s string) ([]byte, error) {
	h, ok := strings.CutPrefix(s, pinPrefix)
	if !ok || len(h) != 2*sha256.Size {
		return nil, fmt.Errorf("%w: got %q", ErrPinFormat, truncate(s, 80))
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return nil, fmt.Errorf("%w: got %q", ErrPinFormat, truncate(s, 80))
		}
	}
	b, err := hex.DecodeString(h)
	if err != nil { // unreachable after the loop above; kept for safety
		return nil, fmt.Errorf("%w: %v", ErrPinFormat, err)
	}
	return b, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// VerifyPinned returns a tls.Config.VerifyPeerCertificate callback for
// enrollment, when the node has no CA yet and dials with InsecureSkipVerify:
// it accepts the server only if one of the certificates after the leaf is a CA
// certificate whose Pin equals pin and the leaf verifies against that CA alone
// for server authentication. The host name is not checked: the pin, which the
// operator copied from the coordinator, is the trust anchor. Every refusal
// wraps ErrPinMismatch, except a malformed pin, which wraps ErrPinFormat.
func VerifyPinned(pin string) func(rawCerts [][]byte, verified [][]*x509.Certificate) error {
	want, pinErr := ParsePin(pin)
	return func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
		if pinErr != nil {
			return fmt.Errorf("certs: cannot check the coordinator against the enrollment pin: %w", pinErr)
		}
		if len(rawCerts) == 0 {
			return fmt.Errorf("%w: the server presented no certificate", ErrPinMismatch)
		}
		leaf, err := x509.ParseCertificate(rawCerts[0])
		if err != nil {
			return fmt.Errorf("%w: the server certificate does not parse: %v", ErrPinMismatch, err)
		}
		var lastErr error
		for _, raw := range rawCerts[1:] {
			ca, err := x509.ParseCertificate(raw)
			if err != nil || !ca.IsCA || !ca.BasicConstraintsValid {
				continue
			}
			sum := sha256.Sum256(ca.RawSubjectPublicKeyInfo)
			if subtle.ConstantTimeCompare(sum[:], want) != 1 {
				continue
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca)
			_, err = leaf.Verify(x509.VerifyOptions{
				Roots:     roots,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err == nil {
				return nil
			}
			lastErr = err
		}
		if lastErr != nil {
			return fmt.Errorf("%w: the server presented the pinned CA, but its certificate is not a server certificate signed by it: %v", ErrPinMismatch, lastErr)
		}
		return fmt.Errorf("%w: the server presented no CA certificate with pin %s; check the pin printed by the coordinator", ErrPinMismatch, pin)
	}
}

// NodeID returns the node id of a node certificate: its one URI SAN must be
// olivares://node/<id> with a valid id equal to the subject common name.
// Anything else is ErrNotNodeCert. NodeID does not verify the certificate.
func NodeID(cert *x509.Certificate) (string, error) {
	if cert == nil || len(cert.URIs) != 1 {
		return "", ErrNotNodeCert
	}
	id, ok := strings.CutPrefix(cert.URIs[0].String(), nodeURIPrefix)
	if !ok || checkNodeID(id) != nil || cert.Subject.CommonName != id {
		return "", ErrNotNodeCert
	}
	return id, nil
}

func nodeURI(id string) string { return nodeURIPrefix + id }

// checkNodeID keeps ids safe to use verbatim in a URI path and in a CN.
func checkNodeID(id string) error {
	if id == "" || len(id) > maxNodeIDLen {
		return fmt.Errorf("%w: %q must be 1 to %d characters", ErrNodeID, truncate(id, 80), maxNodeIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("%w: %q", ErrNodeID, truncate(id, 80))
		}
	}
	return nil
}

// RenewAt returns when cert should be renewed: at half its lifetime, moved by
// jitter, that is issued + lifetime/2 * (1 + jitter). jitter is clamped to
// [-0.1, 0.1] (NaN counts as 0); callers pass (rand.Float64()*2-1)*0.1 so that
// a fleet enrolled at once does not renew at once. The lifetime counts from
// issuance: NotBefore is backdated by the clock skew allowance, which is
// not lived (else a certificate shorter than the allowance would be due
// for renewal the moment it was issued, and renewed in a loop).
func RenewAt(cert *x509.Certificate, jitter float64) time.Time {
	if math.IsNaN(jitter) {
		jitter = 0
	}
	jitter = max(-maxRenewJitter, min(maxRenewJitter, jitter))
	issued := cert.NotBefore
	if cert.NotAfter.Sub(issued) > clockSkew {
		issued = issued.Add(clockSkew)
	}
	half := cert.NotAfter.Sub(issued) / 2
	// Integer half plus a rounded offset, so that jitter 0 is exact.
	return issued.Add(half + time.Duration(math.Round(float64(half)*jitter)))
}
