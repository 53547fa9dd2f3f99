package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newTestAuthority creates a CA in a fresh directory.
func newTestAuthority(t *testing.T) (*Authority, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ca")
	a, created, err := InitAuthority(dir, time.Now())
	if err != nil {
		t.Fatalf("InitAuthority: %v", err)
	}
	if !created {
		t.Fatalf("created = false for a new directory, want true")
	}
	return a, dir
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := NewKey()
	if err != nil {
		t.Fatalf("NewKey: %v", err)
	}
	return k
}

func mustCSR(t *testing.T, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	if tmpl == nil {
		tmpl = &x509.CertificateRequest{}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatalf("CreateCertificateRequest: %v", err)
	}
	return der
}

// mustNodeCert signs a node certificate for a fresh key.
func mustNodeCert(t *testing.T, a *Authority, id string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := mustKey(t)
	csr, err := NewCSR(key)
	if err != nil {
		t.Fatalf("NewCSR: %v", err)
	}
	cert, err := a.SignNode(csr, id, time.Now(), 0)
	if err != nil {
		t.Fatalf("SignNode: %v", err)
	}
	return cert, key
}

func verifyClient(cert *x509.Certificate, pool *x509.CertPool) error {
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err
}

func TestInitAuthority(t *testing.T) {
	a, dir := newTestAuthority(t)

	again, created, err := InitAuthority(dir, time.Now())
	if err != nil {
		t.Fatalf("second InitAuthority: %v", err)
	}
	if created {
		t.Errorf("second InitAuthority: created = true, want false")
	}
	if got, want := Pin(again.Current), Pin(a.Current); got != want {
		t.Errorf("second InitAuthority: pin got %v, want %v", got, want)
	}
	if !again.CurrentKey.Equal(a.CurrentKey) {
		t.Errorf("second InitAuthority loaded a different key")
	}

	modes := []struct {
		name string
		want os.FileMode
	}{
		{".", 0o700 | os.ModeDir},
		{fileKey, 0o600},
		{fileCert, 0o644},
	}
	for _, m := range modes {
		fi, err := os.Stat(filepath.Join(dir, m.name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode(); got != m.want {
			t.Errorf("mode of %s: got %v, want %v", m.name, got, m.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, filePending)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left behind: stat error %v", filePending, err)
	}

	ca := a.Current
	if !ca.IsCA || !ca.BasicConstraintsValid || ca.MaxPathLen != 0 || !ca.MaxPathLenZero {
		t.Errorf("basic constraints: IsCA=%v valid=%v MaxPathLen=%d zero=%v, want a CA with path length 0",
			ca.IsCA, ca.BasicConstraintsValid, ca.MaxPathLen, ca.MaxPathLenZero)
	}
	if got, want := ca.KeyUsage, x509.KeyUsageCertSign|x509.KeyUsageCRLSign; got != want {
		t.Errorf("key usage: got %v, want %v", got, want)
	}
	if pub, ok := ca.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("CA key: got %s, want ECDSA P-256", describeKey(ca.PublicKey))
	}
	if got, want := ca.NotAfter.Sub(ca.NotBefore), 10*365*24*time.Hour; got < want {
		t.Errorf("CA lifetime: got %v, want at least %v", got, want)
	}
	if !strings.HasPrefix(ca.Subject.CommonName, "Olivares CA ") || len(ca.Subject.CommonName) <= len("Olivares CA ") {
		t.Errorf("CA CN: got %q, want \"Olivares CA <random>\"", ca.Subject.CommonName)
	}
	if err := ca.CheckSignatureFrom(ca); err != nil {
		t.Errorf("CA is not self-signed: %v", err)
	}
	if ca.SerialNumber.Sign() <= 0 || ca.SerialNumber.BitLen() > 128 {
		t.Errorf("CA serial %v: want positive, at most 128 bits", ca.SerialNumber)
	}
	_, otherDir := newTestAuthority(t)
	other, err := LoadAuthority(otherDir)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Subject.CommonName == other.Current.Subject.CommonName || ca.SerialNumber.Cmp(other.Current.SerialNumber) == 0 {
		t.Errorf("two CAs share a name or serial: %q %v", ca.Subject.CommonName, ca.SerialNumber)
	}
}

func TestLoadAuthority(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		_, err := LoadAuthority(t.TempDir())
		if !errors.Is(err, ErrNoAuthority) {
			t.Errorf("got %v, want %v", err, ErrNoAuthority)
		}
	})
	t.Run("key without root is kept", func(t *testing.T) {
		_, dir := newTestAuthority(t)
		if err := os.Remove(filepath.Join(dir, fileCert)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := InitAuthority(dir, time.Now()); err == nil || errors.Is(err, ErrNoAuthority) {
			t.Errorf("InitAuthority over an orphan key: got %v, want a refusal", err)
		}
	})
	t.Run("mismatched key", func(t *testing.T) {
		_, dir := newTestAuthority(t)
		key, err := EncodeKeyPEM(mustKey(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteFileAtomic(filepath.Join(dir, fileKey), key, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadAuthority(dir); err == nil || !strings.Contains(err.Error(), "does not match") {
			t.Errorf("got %v, want a key mismatch error", err)
		}
	})
}

func TestSignNodeCSR(t *testing.T) {
	a, _ := newTestAuthority(t)
	const id = "node-1"
	p256 := mustKey(t)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024) // smallest size Go allows; only the type matters
	if err != nil {
		t.Fatal(err)
	}
	isCA, err := asn1.Marshal(struct{ IsCA bool }{true})
	if err != nil {
		t.Fatal(err)
	}
	badSig := mustCSR(t, p256, nil)
	badSig[len(badSig)-1] ^= 0xff // last byte of the ECDSA signature's s
	if _, err := x509.ParseCertificateRequest(badSig); err != nil {
		t.Fatalf("tampered CSR must still parse so that the signature check is tested: %v", err)
	}
	mustURL := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}

	tests := []struct {
		name   string
		csr    []byte
		nodeID string
		want   error
	}{
		{"empty subject", mustCSR(t, p256, nil), id, nil},
		{"CN is the node id", mustCSR(t, p256, &x509.CertificateRequest{Subject: pkix.Name{CommonName: id}}), id, nil},
		{"SANs name the node id", mustCSR(t, p256, &x509.CertificateRequest{
			DNSNames: []string{id}, URIs: []*url.URL{mustURL("olivares://node/" + id)}}), id, nil},
		{"asks to be a CA", mustCSR(t, p256, &x509.CertificateRequest{ExtraExtensions: []pkix.Extension{
			{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: isCA}}}), id, nil},
		{"other organisation is ignored", mustCSR(t, p256, &x509.CertificateRequest{Subject: pkix.Name{Organization: []string{"admins"}}}), id, nil},
		{"CN other", mustCSR(t, p256, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "other"}}), id, ErrCSRIdentity},
		{"DNS SAN", mustCSR(t, p256, &x509.CertificateRequest{DNSNames: []string{"coordinator.example"}}), id, ErrCSRIdentity},
		{"URI SAN evil", mustCSR(t, p256, &x509.CertificateRequest{URIs: []*url.URL{mustURL("olivares://node/evil")}}), id, ErrCSRIdentity},
		{"IP SAN", mustCSR(t, p256, &x509.CertificateRequest{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}), id, ErrCSRIdentity},
		{"email SAN", mustCSR(t, p256, &x509.CertificateRequest{EmailAddresses: []string{"node-1@example.com"}}), id, ErrCSRIdentity},
		{"RSA key", mustCSR(t, rsaKey, nil), id, ErrCSRKey},
		{"P-384 key", mustCSR(t, p384, nil), id, ErrCSRKey},
		{"corrupted bytes", []byte("not a csr"), id, ErrCSRInvalid},
		{"truncated", mustCSR(t, p256, nil)[:40], id, ErrCSRInvalid},
		{"bad signature", badSig, id, ErrCSRInvalid},
		{"empty node id", mustCSR(t, p256, nil), "", ErrNodeID},
		{"node id with slash", mustCSR(t, p256, nil), "a/b", ErrNodeID},
		{"node id starting with dot", mustCSR(t, p256, nil), "..", ErrNodeID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, err := a.SignNode(tt.csr, tt.nodeID, time.Now(), 0)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if err != nil {
				return
			}
			if got := cert.Subject.CommonName; got != tt.nodeID {
				t.Errorf("CN: got %q, want %q", got, tt.nodeID)
			}
			if len(cert.Subject.Organization) != 0 {
				t.Errorf("organisation copied from the CSR: %v", cert.Subject.Organization)
			}
			if len(cert.URIs) != 1 || cert.URIs[0].String() != "olivares://node/"+tt.nodeID {
				t.Errorf("URI SANs: got %v, want [olivares://node/%s]", cert.URIs, tt.nodeID)
			}
			if len(cert.DNSNames)+len(cert.IPAddresses)+len(cert.EmailAddresses) != 0 {
				t.Errorf("SANs copied from the CSR: %v %v %v", cert.DNSNames, cert.IPAddresses, cert.EmailAddresses)
			}
			if cert.IsCA {
				t.Errorf("IsCA = true, want false")
			}
			if got, err := NodeID(cert); err != nil || got != tt.nodeID {
				t.Errorf("NodeID: got %q, %v, want %q", got, err, tt.nodeID)
			}
			if err := verifyClient(cert, a.Pool()); err != nil {
				t.Errorf("verify for client auth: %v", err)
			}
		})
	}
}

// Node certificates last 7 days by default (R-PKI-2).
func TestSignNodeValidity(t *testing.T) {
	a, _ := newTestAuthority(t)
	now := time.Now().Truncate(time.Second) // certificates hold whole seconds
	tests := []struct {
		name     string
		validity time.Duration
		want     time.Duration
		wantErr  bool
	}{
		{"default", 0, 7 * 24 * time.Hour, false},
		{"custom", 3 * time.Hour, 3 * time.Hour, false},
		{"capped by the CA", 20 * 365 * 24 * time.Hour, a.Current.NotAfter.Sub(now), false},
		{"negative", -time.Hour, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			csr, err := NewCSR(mustKey(t))
			if err != nil {
				t.Fatal(err)
			}
			cert, err := a.SignNode(csr, "n", now, tt.validity)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("error: got %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := cert.NotAfter.Sub(now); got != tt.want {
				t.Errorf("NotAfter - now: got %v, want %v", got, tt.want)
			}
			if got, want := cert.NotBefore, now.Add(-time.Minute); !got.Equal(want) {
				t.Errorf("NotBefore: got %v, want %v", got, want)
			}
			if got := cert.ExtKeyUsage; len(got) != 1 || got[0] != x509.ExtKeyUsageClientAuth {
				t.Errorf("ExtKeyUsage: got %v, want [ClientAuth]", got)
			}
			if cert.SerialNumber.Sign() <= 0 || cert.SerialNumber.BitLen() > 128 {
				t.Errorf("serial %v: want positive, at most 128 bits", cert.SerialNumber)
			}
		})
	}
	c1, _ := mustNodeCert(t, a, "n")
	c2, _ := mustNodeCert(t, a, "n")
	if c1.SerialNumber.Cmp(c2.SerialNumber) == 0 {
		t.Errorf("two certificates share serial %v", c1.SerialNumber)
	}
}

// A node certificate names its node by CN and by one olivares://node/<id>
// URI SAN, which must agree; nothing else is a node certificate (R-PKI-1).
func TestNodeID(t *testing.T) {
	a, _ := newTestAuthority(t)
	node, _ := mustNodeCert(t, a, "node_7.a-b")
	server, err := a.IssueServer([]string{"coordinator.test"}, time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	// forge builds a certificate from a template to reach NodeID's checks.
	forge := func(cn string, uris ...string) *x509.Certificate {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
		for _, s := range uris {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			c.URIs = append(c.URIs, u)
		}
		return c
	}
	tests := []struct {
		name    string
		cert    *x509.Certificate
		want    string
		wantErr error
	}{
		{"node certificate", node, "node_7.a-b", nil},
		{"server certificate", server.Leaf, "", ErrNotNodeCert},
		{"CA", a.Current, "", ErrNotNodeCert},
		{"nil", nil, "", ErrNotNodeCert},
		{"CN differs from URI", forge("n2", "olivares://node/n1"), "", ErrNotNodeCert},
		{"two URIs", forge("n1", "olivares://node/n1", "olivares://node/n1"), "", ErrNotNodeCert},
		{"other scheme", forge("n1", "https://node/n1"), "", ErrNotNodeCert},
		{"query", forge("n1?x", "olivares://node/n1?x"), "", ErrNotNodeCert},
		{"nested path", forge("a/b", "olivares://node/a/b"), "", ErrNotNodeCert},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NodeID(tt.cert)
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("got %q, %v, want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestIssueServer(t *testing.T) {
	a, _ := newTestAuthority(t)
	now := time.Now().Truncate(time.Second)
	c, err := a.IssueServer([]string{"coordinator.test", "127.0.0.1", "::1"}, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Leaf == nil || len(c.Certificate) != 2 {
		t.Fatalf("got Leaf %v and %d chain certificates, want Leaf and 2", c.Leaf != nil, len(c.Certificate))
	}
	if string(c.Certificate[1]) != string(a.Current.Raw) {
		t.Errorf("chain[1] is not the current root")
	}
	if string(c.Certificate[0]) != string(c.Leaf.Raw) {
		t.Errorf("chain[0] is not Leaf")
	}
	if got, want := c.Leaf.NotAfter.Sub(now), ServerValidity; got != want {
		t.Errorf("validity: got %v, want %v", got, want)
	}
	if got := c.Leaf.DNSNames; len(got) != 1 || got[0] != "coordinator.test" {
		t.Errorf("DNSNames: got %v, want [coordinator.test]", got)
	}
	if got := c.Leaf.IPAddresses; len(got) != 2 || !got[0].Equal(net.IPv4(127, 0, 0, 1)) || !got[1].Equal(net.IPv6loopback) {
		t.Errorf("IPAddresses: got %v, want [127.0.0.1 ::1]", got)
	}
	for _, host := range []string{"coordinator.test", "127.0.0.1", "::1"} {
		_, err := c.Leaf.Verify(x509.VerifyOptions{Roots: a.Pool(), DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if err != nil {
			t.Errorf("verify for %s: %v", host, err)
		}
	}
	if verifyClient(c.Leaf, a.Pool()) == nil {
		t.Errorf("server certificate verifies for client auth, want refusal")
	}
	if !c.Leaf.PublicKey.(*ecdsa.PublicKey).Equal(c.PrivateKey.(*ecdsa.PrivateKey).Public()) {
		t.Errorf("private key does not match the leaf")
	}

	bad := [][]string{nil, {""}, {"a b"}}
	for _, hosts := range bad {
		if _, err := a.IssueServer(hosts, now, 0); err == nil {
			t.Errorf("IssueServer(%q): got nil error, want one", hosts)
		}
	}
}

// signWith signs a client certificate directly with a root, bypassing Current.
func signWith(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	serial, err := randSerial()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, mustKey(t).Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A rotation adds the next root, a promotion swaps them, and the old root
// stays trusted (R-PKI-3).
func TestRotation(t *testing.T) {
	a, dir := newTestAuthority(t)
	now := time.Now()
	oldRoot := a.Current
	if err := a.Promote(dir, now); !errors.Is(err, ErrNoNext) {
		t.Fatalf("Promote without Next: got %v, want %v", err, ErrNoNext)
	}
	before, _ := mustNodeCert(t, a, "n1")

	// Step 1: an upcoming root, trusted but not signing.
	if err := a.Rotate(dir, now); err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	if a.Next == nil || a.NextRetiring {
		t.Fatalf("after Rotate: Next=%v retiring=%v, want an upcoming root", a.Next != nil, a.NextRetiring)
	}
	upcoming := a.Next
	if Pin(upcoming) == Pin(oldRoot) {
		t.Fatalf("Rotate reused the current root")
	}
	if fi, err := os.Stat(filepath.Join(dir, fileNextKey)); err != nil || fi.Mode() != 0o600 {
		t.Errorf("%s: got %v, %v, want mode 0600", fileNextKey, fi, err)
	}
	pool := a.Pool()
	if err := verifyClient(before, pool); err != nil {
		t.Errorf("after Rotate, cert from the current root: %v", err)
	}
	if err := verifyClient(signWith(t, a.Next, a.NextKey), pool); err != nil {
		t.Errorf("after Rotate, cert from the upcoming root: %v", err)
	}
	if err := a.Rotate(dir, now); err != nil || Pin(a.Next) != Pin(upcoming) {
		t.Errorf("second Rotate: got %v, next changed=%v, want a no-op", err, Pin(a.Next) != Pin(upcoming))
	}
	mid, _ := mustNodeCert(t, a, "n1")
	if err := mid.CheckSignatureFrom(oldRoot); err != nil {
		t.Errorf("before Promote, certs must be signed by the current root: %v", err)
	}
	assertLoaded(t, dir, a)

	// Step 2: promote.
	if err := a.Promote(dir, now); err != nil {
		t.Fatalf("Promote: %v", err)
	}
	if Pin(a.Current) != Pin(upcoming) || a.Next == nil || Pin(a.Next) != Pin(oldRoot) || !a.NextRetiring {
		t.Fatalf("after Promote: current=upcoming %v, next=old %v, retiring %v; want all true",
			Pin(a.Current) == Pin(upcoming), a.Next != nil && Pin(a.Next) == Pin(oldRoot), a.NextRetiring)
	}
	if err := verifyClient(before, a.Pool()); err != nil {
		t.Errorf("after Promote, cert signed before: %v", err)
	}
	after, _ := mustNodeCert(t, a, "n1")
	if err := after.CheckSignatureFrom(upcoming); err != nil {
		t.Errorf("after Promote, cert not signed by the new current root: %v", err)
	}
	if string(after.AuthorityKeyId) != string(upcoming.SubjectKeyId) {
		t.Errorf("after Promote: AuthorityKeyId got %x, want %x", after.AuthorityKeyId, upcoming.SubjectKeyId)
	}
	server, err := a.IssueServer([]string{"coordinator.test"}, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(server.Certificate[1]) != string(upcoming.Raw) {
		t.Errorf("after Promote, server chain does not end in the new current root")
	}
	bundle, err := ParseCertsPEM(a.BundlePEM())
	if err != nil {
		t.Fatal(err)
	}
	if len(bundle) != 2 || Pin(bundle[0]) != Pin(upcoming) || Pin(bundle[1]) != Pin(oldRoot) {
		t.Errorf("BundlePEM: got %d certs, want [new current, retiring]", len(bundle))
	}
	if err := a.Promote(dir, now); !errors.Is(err, ErrNoNext) {
		t.Errorf("Promote of a retiring root: got %v, want %v", err, ErrNoNext)
	}
	assertLoaded(t, dir, a)

	// Step 3: the next Rotate drops the retiring root.
	if err := a.Rotate(dir, now); err != nil {
		t.Fatalf("third Rotate: %v", err)
	}
	if a.Next == nil || a.NextRetiring || Pin(a.Next) == Pin(oldRoot) || Pin(a.Next) == Pin(upcoming) {
		t.Fatalf("after third Rotate: want a fresh upcoming root")
	}
	if err := verifyClient(before, a.Pool()); err == nil {
		t.Errorf("cert from the dropped root still verifies")
	}
	if err := verifyClient(after, a.Pool()); err != nil {
		t.Errorf("cert from the current root: %v", err)
	}
	assertLoaded(t, dir, a)
}

// assertLoaded checks that dir holds the same state as a.
func assertLoaded(t *testing.T, dir string, a *Authority) {
	t.Helper()
	got, err := LoadAuthority(dir)
	if err != nil {
		t.Fatalf("LoadAuthority: %v", err)
	}
	if Pin(got.Current) != Pin(a.Current) || !got.CurrentKey.Equal(a.CurrentKey) {
		t.Errorf("LoadAuthority: current root differs")
	}
	if (got.Next == nil) != (a.Next == nil) || got.NextRetiring != a.NextRetiring {
		t.Fatalf("LoadAuthority: Next present %v retiring %v, want %v %v", got.Next != nil, got.NextRetiring, a.Next != nil, a.NextRetiring)
	}
	if a.Next != nil && (Pin(got.Next) != Pin(a.Next) || !got.NextKey.Equal(a.NextKey)) {
		t.Errorf("LoadAuthority: next root differs")
	}
}

// TestInterruptedCommit stands in for a kill -9 between writing
// ca-pending.pem and the individual files.
func TestInterruptedCommit(t *testing.T) {
	a, dir := newTestAuthority(t)
	if err := a.Rotate(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	promoted := rootSet{cur: a.Next, curKey: a.NextKey, next: a.Current, nextKey: a.CurrentKey, retiring: true}
	journal, err := encodePending(promoted)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, filePending), journal, 0o600); err != nil {
		t.Fatal(err)
	}
	// Half applied: the new current certificate with the old current key.
	if err := WriteFileAtomic(filepath.Join(dir, fileCert), EncodeCertPEM(promoted.cur.Raw), 0o644); err != nil {
		t.Fatal(err)
	}

	got, err := LoadAuthority(dir)
	if err != nil {
		t.Fatalf("LoadAuthority after a crash: %v", err)
	}
	want := &Authority{}
	want.setLocked(promoted)
	assertLoaded(t, dir, want)
	if Pin(got.Current) != Pin(promoted.cur) || !got.NextRetiring {
		t.Errorf("recovered state is not the promoted one")
	}
	if _, err := os.Stat(filepath.Join(dir, filePending)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s not removed after recovery: %v", filePending, err)
	}
}

// TestConcurrentRotation runs signing next to rotation; -race checks the lock.
func TestConcurrentRotation(t *testing.T) {
	a, dir := newTestAuthority(t)
	csr, err := NewCSR(mustKey(t))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Verifying here would be racy by design: two steps can drop the
			// signing root between SignNode and Pool.
			cert, err := a.SignNode(csr, "n1", time.Now(), 0)
			if err == nil {
				_, err = NodeID(cert)
			}
			if err != nil {
				errs <- err
				return
			}
			_ = a.Pool()
			_ = a.BundlePEM()
		}
	}()
	for range 3 {
		if err := a.Rotate(dir, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := a.Promote(dir, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Errorf("SignNode during rotation: %v", err)
	}
}
