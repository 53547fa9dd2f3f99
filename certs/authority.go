package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Validity periods.
const (
	// DefaultNodeValidity is a node certificate's lifetime when SignNode is
	// given zero. Nodes renew at half-life (RenewAt), over the live tunnel.
	DefaultNodeValidity = 7 * 24 * time.Hour
	// ServerValidity is the coordinator server certificate's lifetime when
	// IssueServer is given zero.
	ServerValidity = 365 * 24 * time.Hour
	// rootValidityYears is a CA root's lifetime.
	rootValidityYears = 10
	// clockSkew backdates NotBefore so that a peer whose clock is a little
	// behind accepts a certificate issued just now.
	clockSkew = time.Minute
)

// File names in an authority directory; see the package documentation.
const (
	fileCert      = "ca.pem"
	fileKey       = "ca-key.pem"
	fileNextCert  = "ca-next.pem"
	fileNextKey   = "ca-next-key.pem"
	fileNextState = "ca-next.state"
	filePending   = "ca-pending.pem"

	stateUpcoming = "upcoming"
	stateRetiring = "retiring"

	// PEM headers in ca-pending.pem.
	hdrRole     = "Role"
	hdrState    = "State"
	roleCurrent = "current"
	roleNext    = "next"
)

// Authority is the Olivares CA: the Current root signs every certificate, and
// an optional Next root is trusted alongside it during a rotation.
//
// The methods are safe for concurrent use. Read the fields directly only when
// no Rotate or Promote can run at the same time.
type Authority struct {
	Current    *x509.Certificate // signs everything
	CurrentKey *ecdsa.PrivateKey
	// Next is an optional second trusted root: the upcoming one after Rotate,
	// or the retiring one (the previous Current) after Promote. Its key is
	// kept in both cases.
	Next    *x509.Certificate
	NextKey *ecdsa.PrivateKey
	// NextRetiring is true when Next is the retiring root (set by Promote)
	// and false when Next is upcoming (set by Rotate) or absent.
	NextRetiring bool

	mu sync.RWMutex
}

// rootSet is an Authority's state without the lock, as stored on disk.
type rootSet struct {
	cur, next       *x509.Certificate
	curKey, nextKey *ecdsa.PrivateKey
	retiring        bool
}

// rootsLocked and setLocked copy the state out of and into a; the caller
// holds a.mu or has the only reference to a.
func (a *Authority) rootsLocked() rootSet {
	return rootSet{cur: a.Current, curKey: a.CurrentKey, next: a.Next, nextKey: a.NextKey, retiring: a.NextRetiring}
}

func (a *Authority) setLocked(r rootSet) {
	a.Current, a.CurrentKey = r.cur, r.curKey
	a.Next, a.NextKey, a.NextRetiring = r.next, r.nextKey, r.retiring
}

// InitAuthority returns the CA in dir, creating it if there is none: dir
// (mode 0700), ca.pem (0644) and ca-key.pem (0600) with a fresh self-signed
// ECDSA P-256 root valid for 10 years. created reports whether it was made
// now. An existing CA is never overwritten; if its files are unreadable or
// inconsistent, that is an error.
func InitAuthority(dir string, now time.Time) (a *Authority, created bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("certs: create authority directory: %w", err)
	}
	a, err = LoadAuthority(dir)
	if err == nil {
		return a, false, nil
	}
	if !errors.Is(err, ErrNoAuthority) {
		return nil, false, err
	}
	cert, key, err := newRoot(now)
	if err != nil {
		return nil, false, err
	}
	r := rootSet{cur: cert, curKey: key}
	if err := commit(dir, r); err != nil {
		return nil, false, err
	}
	a = &Authority{}
	a.setLocked(r)
	return a, true, nil
}

// LoadAuthority reads the CA in dir; ErrNoAuthority if there is none. If a
// change was interrupted (ca-pending.pem exists), it is finished first.
func LoadAuthority(dir string) (*Authority, error) {
	if err := recoverPending(dir); err != nil {
		return nil, err
	}
	r, err := readRoots(dir)
	if err != nil {
		return nil, err
	}
	a := &Authority{}
	a.setLocked(r)
	return a, nil
}

// Rotate starts a root rotation: if there is no Next, or Next is the retiring
// root, it creates a fresh upcoming root as Next (ca-next.pem,
// ca-next-key.pem) and from then on both roots are trusted. Replacing a
// retiring root stops trust in it. If Next is already upcoming, Rotate does
// nothing. dir must be the directory the Authority was loaded from.
func (a *Authority) Rotate(dir string, now time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Next != nil && !a.NextRetiring {
		return nil
	}
	cert, key, err := newRoot(now)
	if err != nil {
		return err
	}
	r := a.rootsLocked()
	r.next, r.nextKey, r.retiring = cert, key, false
	if err := commit(dir, r); err != nil {
		return err
	}
	a.setLocked(r)
	return nil
}

// Promote makes the upcoming Next root Current, so it signs from now on, and
// keeps the old Current as the retiring Next, still trusted. ErrNoNext if
// there is no upcoming root. dir must be the directory the Authority was
// loaded from.
func (a *Authority) Promote(dir string, now time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Next == nil || a.NextRetiring {
		return ErrNoNext
	}
	if !now.Before(a.Next.NotAfter) {
		return fmt.Errorf("certs: upcoming root expired at %s", a.Next.NotAfter.Format(time.RFC3339))
	}
	r := rootSet{cur: a.Next, curKey: a.NextKey, next: a.Current, nextKey: a.CurrentKey, retiring: true}
	if err := commit(dir, r); err != nil {
		return err
	}
	a.setLocked(r)
	return nil
}

// Roots returns the trusted roots: Current, then Next if there is one.
func (a *Authority) Roots() []*x509.Certificate {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.rootListLocked()
}

// rootListLocked is Roots for a caller that holds a.mu.
func (a *Authority) rootListLocked() []*x509.Certificate {
	out := []*x509.Certificate{a.Current}
	if a.Next != nil {
		out = append(out, a.Next)
	}
	return out
}

// Pool returns a new pool with the trusted roots, for tls.Config RootCAs and
// ClientCAs.
func (a *Authority) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range a.Roots() {
		p.AddCert(c)
	}
	return p
}

// BundlePEM returns the trusted roots as PEM, Current first: what a node
// stores as its CA bundle.
func (a *Authority) BundlePEM() []byte {
	var der [][]byte
	for _, c := range a.Roots() {
		der = append(der, c.Raw)
	}
	return EncodeCertPEM(der...)
}

// IssueServer issues a coordinator server certificate with a new P-256 key
// for hosts (DNS names, or IP addresses as net.ParseIP reads them), valid for
// validity from now (zero means ServerValidity). The chain is the leaf then
// Current, so that an enrolling node can check the CA against its pin
// (VerifyPinned); Leaf is set.
func (a *Authority) IssueServer(hosts []string, now time.Time, validity time.Duration) (tls.Certificate, error) {
	if len(hosts) == 0 {
		return tls.Certificate{}, errors.New("certs: a server certificate needs at least one host")
	}
	if validity == 0 {
		validity = ServerValidity
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "Olivares coordinator"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			continue
		}
		if h == "" || strings.ContainsAny(h, " \t\r\n/") {
			return tls.Certificate{}, fmt.Errorf("certs: server host %q is neither a DNS name nor an IP address", h)
		}
		tmpl.DNSNames = append(tmpl.DNSNames, h)
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
	return tls.Certificate{
		Certificate: [][]byte{leaf.Raw, a.Current.Raw},
		PrivateKey:  key,
		Leaf:        leaf,
	}, nil
}

// SignNode signs a node certificate for the public key in csrDER, valid for
// validity from now (zero means DefaultNodeValidity). The identity is nodeID
// alone: the certificate's CN is nodeID and its one URI SAN is
// olivares://node/<nodeID>; nothing else from the CSR is copied. The CSR must
// carry a valid signature (ErrCSRInvalid), an ECDSA P-256 key (ErrCSRKey) and
// name no other identity (ErrCSRIdentity). nodeID must pass ErrNodeID's rule.
func (a *Authority) SignNode(csrDER []byte, nodeID string, now time.Time, validity time.Duration) (*x509.Certificate, error) {
	if err := checkNodeID(nodeID); err != nil {
		return nil, err
	}
	if validity == 0 {
		validity = DefaultNodeValidity
	}
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCSRInvalid, err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCSRInvalid, err)
	}
	pub, ok := csr.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: got %s", ErrCSRKey, describeKey(csr.PublicKey))
	}
	if err := checkCSRIdentity(csr, nodeID); err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: nodeID},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	u, err := url.Parse(nodeURI(nodeID))
	if err != nil {
		return nil, fmt.Errorf("certs: node URI: %w", err)
	}
	tmpl.URIs = append(tmpl.URIs, u)
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.signLocked(tmpl, pub, now, validity)
}

func describeKey(k any) string {
	if ek, ok := k.(*ecdsa.PublicKey); ok && ek.Curve != nil {
		return "ECDSA " + ek.Curve.Params().Name
	}
	return fmt.Sprintf("%T", k)
}

func checkCSRIdentity(csr *x509.CertificateRequest, nodeID string) error {
	bad := func(what string, v any) error {
		return fmt.Errorf("%w: CSR %s %v, assigned node id %q", ErrCSRIdentity, what, v, nodeID)
	}
	if cn := csr.Subject.CommonName; cn != "" && cn != nodeID {
		return bad("subject CN", fmt.Sprintf("%q", cn))
	}
	for _, d := range csr.DNSNames {
		if d != nodeID {
			return bad("DNS SAN", fmt.Sprintf("%q", d))
		}
	}
	for _, u := range csr.URIs {
		if u.String() != nodeURI(nodeID) {
			return bad("URI SAN", fmt.Sprintf("%q", u.String()))
		}
	}
	// An IP address or a mailbox can never be a node id.
	if len(csr.IPAddresses) > 0 {
		return bad("IP SAN", csr.IPAddresses[0])
	}
	if len(csr.EmailAddresses) > 0 {
		return bad("email SAN", fmt.Sprintf("%q", csr.EmailAddresses[0]))
	}
	return nil
}

// signLocked completes tmpl (serial, validity) and signs it with Current.
// The caller holds a.mu. NotAfter never passes Current's own NotAfter.
func (a *Authority) signLocked(tmpl *x509.Certificate, pub crypto.PublicKey, now time.Time, validity time.Duration) (*x509.Certificate, error) {
	if validity < 0 {
		return nil, fmt.Errorf("certs: validity %v is negative", validity)
	}
	if !now.Before(a.Current.NotAfter) {
		return nil, fmt.Errorf("certs: CA root expired at %s", a.Current.NotAfter.Format(time.RFC3339))
	}
	serial, err := randSerial()
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-clockSkew)
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(a.Current.NotAfter) {
		tmpl.NotAfter = a.Current.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Current, pub, a.CurrentKey)
	if err != nil {
		return nil, fmt.Errorf("certs: sign certificate: %w", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parse signed certificate: %w", err)
	}
	return c, nil
}

// randSerial returns a random positive serial of at most 128 bits.
func randSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("certs: serial: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// newRoot makes a self-signed CA root valid for 10 years from now.
func newRoot(now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := NewKey()
	if err != nil {
		return nil, nil, err
	}
	serial, err := randSerial()
	if err != nil {
		return nil, nil, err
	}
	short := make([]byte, 4)
	if _, err := rand.Read(short); err != nil {
		return nil, nil, fmt.Errorf("certs: CA name: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Olivares CA " + hex.EncodeToString(short)},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.AddDate(rootValidityYears, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: create CA root: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: parse CA root: %w", err)
	}
	return cert, key, nil
}

// commit stores r in dir: first all of it in ca-pending.pem (one atomic
// write, the commit point), then the individual files, then it removes
// ca-pending.pem. recoverPending redoes the second step after a crash.
func commit(dir string, r rootSet) error {
	if err := checkRoots(r); err != nil {
		return err
	}
	journal, err := encodePending(r)
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(filepath.Join(dir, filePending), journal, 0o600); err != nil {
		return err
	}
	return applyPending(dir, r)
}

// applyPending writes r to the individual files and removes ca-pending.pem.
func applyPending(dir string, r rootSet) error {
	write := func(name string, data []byte, perm os.FileMode) error {
		return WriteFileAtomic(filepath.Join(dir, name), data, perm)
	}
	key, err := EncodeKeyPEM(r.curKey)
	if err != nil {
		return err
	}
	if err := write(fileKey, key, 0o600); err != nil {
		return err
	}
	if err := write(fileCert, EncodeCertPEM(r.cur.Raw), 0o644); err != nil {
		return err
	}
	if r.next != nil {
		nextKey, err := EncodeKeyPEM(r.nextKey)
		if err != nil {
			return err
		}
		state := stateUpcoming
		if r.retiring {
			state = stateRetiring
		}
		if err := write(fileNextKey, nextKey, 0o600); err != nil {
			return err
		}
		if err := write(fileNextCert, EncodeCertPEM(r.next.Raw), 0o644); err != nil {
			return err
		}
		if err := write(fileNextState, []byte(state+"\n"), 0o644); err != nil {
			return err
		}
	} else {
		for _, name := range []string{fileNextCert, fileNextKey, fileNextState} {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("certs: %w", err)
			}
		}
	}
	if err := os.Remove(filepath.Join(dir, filePending)); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("certs: sync %s: %w", dir, err)
	}
	return nil
}

// recoverPending finishes a commit that was interrupted after ca-pending.pem
// was written.
func recoverPending(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, filePending))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("certs: read %s: %w", filePending, err)
	}
	r, err := decodePending(b)
	if err != nil {
		return fmt.Errorf("certs: %s in %s: %w", filePending, dir, err)
	}
	return applyPending(dir, r)
}

func encodePending(r rootSet) ([]byte, error) {
	var out []byte
	add := func(role string, cert *x509.Certificate, key *ecdsa.PrivateKey, hdr map[string]string) error {
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return fmt.Errorf("certs: encode private key: %w", err)
		}
		h := map[string]string{hdrRole: role}
		for k, v := range hdr {
			h[k] = v
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: pemCert, Headers: h, Bytes: cert.Raw})...)
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: pemKey, Headers: map[string]string{hdrRole: role}, Bytes: kder})...)
		return nil
	}
	if err := add(roleCurrent, r.cur, r.curKey, nil); err != nil {
		return nil, err
	}
	if r.next != nil {
		state := stateUpcoming
		if r.retiring {
			state = stateRetiring
		}
		if err := add(roleNext, r.next, r.nextKey, map[string]string{hdrState: state}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodePending(b []byte) (rootSet, error) {
	var r rootSet
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		role := block.Headers[hdrRole]
		switch block.Type {
		case pemCert:
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return r, err
			}
			switch role {
			case roleCurrent:
				r.cur = c
			case roleNext:
				r.next = c
				st, err := parseNextState(block.Headers[hdrState])
				if err != nil {
					return r, err
				}
				r.retiring = st
			default:
				return r, fmt.Errorf("unknown role %q", role)
			}
		case pemKey:
			k, err := parsePKCS8EC(block.Bytes)
			if err != nil {
				return r, err
			}
			switch role {
			case roleCurrent:
				r.curKey = k
			case roleNext:
				r.nextKey = k
			default:
				return r, fmt.Errorf("unknown role %q", role)
			}
		default:
			return r, fmt.Errorf("unexpected PEM block %q", block.Type)
		}
	}
	return r, checkRoots(r)
}

// parseNextState reads ca-next.state; retiring reports a retiring root.
func parseNextState(s string) (retiring bool, err error) {
	switch strings.TrimSpace(s) {
	case stateUpcoming:
		return false, nil
	case stateRetiring:
		return true, nil
	default:
		return false, fmt.Errorf("next root state %q, want %q or %q", s, stateUpcoming, stateRetiring)
	}
}

// readRoots reads the individual files of dir.
func readRoots(dir string) (rootSet, error) {
	var r rootSet
	cert, key, err := readPair(dir, fileCert, fileKey)
	if errors.Is(err, fs.ErrNotExist) && cert == nil {
		// A key without its root is never made by this package (see commit);
		// refuse rather than let InitAuthority overwrite it.
		if _, kerr := os.Stat(filepath.Join(dir, fileKey)); kerr == nil {
			return r, fmt.Errorf("certs: %s has %s but no %s; restore it or remove the key", dir, fileKey, fileCert)
		}
		return r, fmt.Errorf("%w: %s has no %s", ErrNoAuthority, dir, fileCert)
	}
	if err != nil {
		return r, err
	}
	r.cur, r.curKey = cert, key
	next, nextKey, err := readPair(dir, fileNextCert, fileNextKey)
	switch {
	case errors.Is(err, fs.ErrNotExist) && next == nil:
		// No rotation in progress.
	case err != nil:
		return r, err
	default:
		r.next, r.nextKey = next, nextKey
		st, err := os.ReadFile(filepath.Join(dir, fileNextState))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Without a marker the second root is taken as upcoming.
		case err != nil:
			return r, fmt.Errorf("certs: %w", err)
		default:
			if r.retiring, err = parseNextState(string(st)); err != nil {
				return r, fmt.Errorf("certs: %s: %w", fileNextState, err)
			}
		}
	}
	if err := checkRoots(r); err != nil {
		return r, fmt.Errorf("%w (in %s)", err, dir)
	}
	return r, nil
}

// readPair reads one root and its key. cert is non-nil if the certificate
// file exists and parses, so a missing key is told apart from a missing root.
func readPair(dir, certName, keyName string) (cert *x509.Certificate, key *ecdsa.PrivateKey, err error) {
	b, err := os.ReadFile(filepath.Join(dir, certName))
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	certs, err := ParseCertsPEM(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", certName, err)
	}
	if len(certs) != 1 {
		return nil, nil, fmt.Errorf("certs: %s holds %d certificates, want 1", certName, len(certs))
	}
	cert = certs[0]
	b, err = os.ReadFile(filepath.Join(dir, keyName))
	if err != nil {
		return cert, nil, fmt.Errorf("certs: %s exists but its key cannot be read: %w", certName, err)
	}
	key, err = ParseKeyPEM(b)
	if err != nil {
		return cert, nil, fmt.Errorf("%s: %w", keyName, err)
	}
	return cert, key, nil
}

// checkRoots checks that each root is a CA and is paired with its own key.
func checkRoots(r rootSet) error {
	if r.cur == nil || r.curKey == nil {
		return errors.New("certs: authority has no current root and key")
	}
	check := func(name string, c *x509.Certificate, k *ecdsa.PrivateKey) error {
		if !c.IsCA || !c.BasicConstraintsValid {
			return fmt.Errorf("certs: %s root %q is not a CA certificate", name, c.Subject.CommonName)
		}
		if !k.PublicKey.Equal(c.PublicKey) {
			return fmt.Errorf("certs: %s root %q does not match its private key", name, c.Subject.CommonName)
		}
		return nil
	}
	if err := check(roleCurrent, r.cur, r.curKey); err != nil {
		return err
	}
	if r.next != nil {
		if r.nextKey == nil {
			return errors.New("certs: next root has no private key")
		}
		if err := check(roleNext, r.next, r.nextKey); err != nil {
			return err
		}
	}
	return nil
}

// Reload re-reads the CA in dir into a (as LoadAuthority reads it), so
// that every holder of a signs and trusts what is on disk now: a root that
// `ca rotate` or `ca promote` changed in another process applies without a
// restart. On an error a is unchanged.
func (a *Authority) Reload(dir string) error {
	b, err := LoadAuthority(dir)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.setLocked(b.rootsLocked())
	a.mu.Unlock()
	return nil
}
