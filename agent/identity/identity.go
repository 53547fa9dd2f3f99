// Package identity is the node's enrolled identity: its private key (made
// here, never sent anywhere, mode 0600), its certificate, the CA bundle, and
// the enrollment record in the agent's bbolt file (bucket "identity").
//
// identity writes a renewed certificate atomically and never leaves a key
// without its certificate.
package identity

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/certs"
)

// Files in the state dir.
const (
	KeyFile    = "node-key.pem"
	CertFile   = "node.pem"
	BundleFile = "ca-bundle.pem"
)

var bucket = []byte("identity")
var recordKey = []byte("record")

// ErrNotEnrolled: the state dir has no identity.
var ErrNotEnrolled = errors.New("identity: this node is not enrolled (run olivares-agent enroll --coordinator HOST:PORT --token T --ca-pin sha256:PIN)")

// Record is the enrollment record kept in bbolt.
type Record struct {
	NodeID      string    `json:"node_id"`
	Tenant      string    `json:"tenant"`
	Coordinator string    `json:"coordinator"`
	EnrolledAt  time.Time `json:"enrolled_at"`
}

// Identity is a loaded identity. Safe for concurrent use.
type Identity struct {
	dir string
	Record

	mu     sync.RWMutex
	cert   tls.Certificate
	leaf   *x509.Certificate
	bundle []*x509.Certificate
}

// Load reads the identity from db and the files in dir.
func Load(db *bbolt.DB, dir string) (*Identity, error) {
	var rec Record
	err := db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil || b.Get(recordKey) == nil {
			return ErrNotEnrolled
		}
		return json.Unmarshal(b.Get(recordKey), &rec)
	})
	if err != nil {
		return nil, err
	}
	id := &Identity{dir: dir, Record: rec}
	if err := finishStaged(dir); err != nil {
		return nil, fmt.Errorf("identity: finishing an interrupted renewal: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	bundlePEM, err := os.ReadFile(filepath.Join(dir, BundleFile))
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	if err := id.set(keyPEM, certPEM, bundlePEM); err != nil {
		return nil, err
	}
	return id, nil
}

func (id *Identity) set(keyPEM, certPEM, bundlePEM []byte) error {
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("identity: key pair: %w", err)
	}
	bundle, err := certs.ParseCertsPEM(bundlePEM)
	if err != nil || len(bundle) == 0 {
		return fmt.Errorf("identity: CA bundle: %v", err)
	}
	id.mu.Lock()
	id.cert, id.leaf, id.bundle = kp, kp.Leaf, bundle
	id.mu.Unlock()
	return nil
}

// Save writes a new identity: files first (atomically, key 0600), then the
// record, which is the commit point.
func Save(db *bbolt.DB, dir string, rec Record, key *ecdsa.PrivateKey, certPEM, bundlePEM []byte) (*Identity, error) {
	keyPEM, err := certs.EncodeKeyPEM(key)
	if err != nil {
		return nil, err
	}
	id := &Identity{dir: dir, Record: rec}
	if err := id.set(keyPEM, certPEM, bundlePEM); err != nil {
		return nil, err
	}
	if err := writeFiles(dir, keyPEM, certPEM, bundlePEM); err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(rec)
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		return b.Put(recordKey, raw)
	})
	if err != nil {
		return nil, err
	}
	return id, nil
}

// StagingFile holds a key, certificate and bundle being installed.
const StagingFile = "identity-staging.json"

type staged struct {
	Key, Cert, Bundle []byte
}

func writeFiles(dir string, keyPEM, certPEM, bundlePEM []byte) error {
	raw, _ := json.Marshal(staged{keyPEM, certPEM, bundlePEM})
	sp := filepath.Join(dir, StagingFile)
	if err := certs.WriteFileAtomic(sp, raw, 0o600); err != nil {
		return err
	}
	if err := installFiles(dir, keyPEM, certPEM, bundlePEM); err != nil {
		return err
	}
	return os.Remove(sp)
}

// finishStaged completes an install a crash interrupted.
func finishStaged(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, StagingFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var s staged
	if json.Unmarshal(raw, &s) != nil {
		return os.Remove(filepath.Join(dir, StagingFile)) // torn: the old files stand
	}
	return writeFiles(dir, s.Key, s.Cert, s.Bundle)
}

func installFiles(dir string, keyPEM, certPEM, bundlePEM []byte) error {
	if err := certs.WriteFileAtomic(filepath.Join(dir, KeyFile), keyPEM, 0o600); err != nil {
		return err
	}
	if err := certs.WriteFileAtomic(filepath.Join(dir, CertFile), certPEM, 0o644); err != nil {
		return err
	}
	return certs.WriteFileAtomic(filepath.Join(dir, BundleFile), bundlePEM, 0o644)
}

// Renew installs a renewed key and certificate (and bundle). The new pair is
// staged in one file first, so a crash between the writes is finished by the
// next Load instead of leaving a key that does not match its certificate.
func (id *Identity) Renew(key *ecdsa.PrivateKey, certPEM, bundlePEM []byte) error {
	keyPEM, err := certs.EncodeKeyPEM(key)
	if err != nil {
		return err
	}
	next := &Identity{}
	if err := next.set(keyPEM, certPEM, bundlePEM); err != nil {
		return err
	}
	if err := writeFiles(id.dir, keyPEM, certPEM, bundlePEM); err != nil {
		return err
	}
	id.mu.Lock()
	id.cert, id.leaf, id.bundle = next.cert, next.leaf, next.bundle
	id.mu.Unlock()
	return nil
}

// Leaf returns the current certificate.
func (id *Identity) Leaf() *x509.Certificate {
	id.mu.RLock()
	defer id.mu.RUnlock()
	return id.leaf
}

// Pool returns the CA bundle as a pool.
func (id *Identity) Pool() *x509.CertPool {
	id.mu.RLock()
	defer id.mu.RUnlock()
	p := x509.NewCertPool()
	for _, c := range id.bundle {
		p.AddCert(c)
	}
	return p
}

// TLSConfig is the client config for the tunnel: the current certificate
// (picked per handshake, so a renewal applies at the next dial) and the CA
// bundle (current and next root).
func (id *Identity) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    id.Pool(),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			id.mu.RLock()
			defer id.mu.RUnlock()
			c := id.cert
			return &c, nil
		},
	}
}
