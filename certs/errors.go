package certs

import "errors"

// Errors from SignNode, while checking a node's CSR.
var (
	// ErrCSRInvalid: the CSR is not parsable DER or its self-signature does
	// not verify.
	ErrCSRInvalid = errors.New("certs: CSR is malformed or its signature does not verify")
	// ErrCSRKey: the CSR's public key is not ECDSA P-256.
	ErrCSRKey = errors.New("certs: CSR key is not ECDSA P-256")
	// ErrCSRIdentity: the CSR's subject common name, or one of its DNS, IP,
	// URI or email SANs, names something other than the node id the
	// coordinator assigned. An empty subject without SANs is accepted, as is
	// a common name equal to the node id.
	ErrCSRIdentity = errors.New("certs: CSR names an identity other than the assigned node id")
	// ErrNodeID: the node id is empty, too long, or has characters other than
	// ASCII letters, digits, '.', '_' and '-' (it must start with a letter or
	// digit), so it cannot be put in a certificate.
	ErrNodeID = errors.New("certs: invalid node id")
)

// Errors from Pin handling and enrollment verification.
var (
	// ErrPinFormat: a pin is not "sha256:" followed by 64 lowercase hex digits.
	ErrPinFormat = errors.New("certs: pin must be \"sha256:\" followed by 64 lowercase hex digits")
	// ErrPinMismatch: the peer presented no CA certificate with the pinned key,
	// or its leaf certificate is not signed by that CA for server use.
	ErrPinMismatch = errors.New("certs: server certificate does not match the pinned CA")
)

// Errors from the authority directory and certificate inspection.
var (
	// ErrNoAuthority: the directory holds no CA (no ca.pem).
	ErrNoAuthority = errors.New("certs: no certificate authority in directory")
	// ErrNoNext: Promote needs an upcoming root and there is none (no Next,
	// or Next is the retiring root); run Rotate first.
	ErrNoNext = errors.New("certs: authority has no upcoming root; run Rotate first")
	// ErrNotNodeCert: the certificate carries no valid node identity (exactly
	// one URI SAN olivares://node/<id> whose id equals the subject CN).
	ErrNotNodeCert = errors.New("certs: not a node certificate")
)
