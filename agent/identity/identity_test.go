package identity

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/state"
	"github.com/olivares-dev/olivares/certs"
)

func issue(t *testing.T, ca *certs.Authority, id string) ([]byte, []byte) {
	t.Helper()
	key, _ := certs.NewKey()
	csr, _ := certs.NewCSR(key)
	c, err := ca.SignNode(csr, id, time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := certs.EncodeKeyPEM(key)
	return k, certs.EncodeCertPEM(c.Raw)
}

func TestSaveLoadRenew(t *testing.T) {
	dir := t.TempDir()
	ca, _, err := certs.InitAuthority(filepath.Join(t.TempDir(), "ca"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := Load(db, dir); !errors.Is(err, ErrNotEnrolled) {
		t.Fatalf("empty dir: got %v, want ErrNotEnrolled", err)
	}
	keyPEM, certPEM := issue(t, ca, "node-1")
	key, _ := certs.ParseKeyPEM(keyPEM)
	rec := Record{NodeID: "node-1", Tenant: "default", Coordinator: "127.0.0.1:1", EnrolledAt: time.Now().UTC()}
	if _, err := Save(db, dir, rec, key, certPEM, ca.BundlePEM()); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, KeyFile)); st.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v, want 0600", st.Mode().Perm())
	}
	id, err := Load(db, dir)
	if err != nil || id.NodeID != "node-1" {
		t.Fatalf("load: %v %+v", err, id)
	}

	// A renewal interrupted after staging is finished by the next Load,
	// so the key and certificate on disk always match.
	keyPEM2, certPEM2 := issue(t, ca, "node-1")
	raw, _ := json.Marshal(staged{keyPEM2, certPEM2, ca.BundlePEM()})
	if err := certs.WriteFileAtomic(filepath.Join(dir, StagingFile), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	// Simulate the crash: only the key was installed.
	if err := certs.WriteFileAtomic(filepath.Join(dir, KeyFile), keyPEM2, 0o600); err != nil {
		t.Fatal(err)
	}
	id2, err := Load(db, dir)
	if err != nil {
		t.Fatalf("load after interrupted renewal: %v", err)
	}
	want, _ := certs.ParseCertsPEM(certPEM2)
	if !id2.Leaf().Equal(want[0]) {
		t.Fatal("interrupted renewal not finished")
	}
	if _, err := os.Stat(filepath.Join(dir, StagingFile)); !os.IsNotExist(err) {
		t.Fatal("staging file left behind")
	}

	// Renew swaps the certificate used by the next handshake.
	keyPEM3, certPEM3 := issue(t, ca, "node-1")
	key3, _ := certs.ParseKeyPEM(keyPEM3)
	if err := id2.Renew(key3, certPEM3, ca.BundlePEM()); err != nil {
		t.Fatal(err)
	}
	got, err := id2.TLSConfig().GetClientCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	want3, _ := certs.ParseCertsPEM(certPEM3)
	if !got.Leaf.Equal(want3[0]) {
		t.Fatal("TLS config still presents the old certificate")
	}
	// A mismatched pair is refused and nothing changes.
	if err := id2.Renew(key, certPEM3, ca.BundlePEM()); err == nil {
		t.Fatal("mismatched key accepted")
	}
	if !id2.Leaf().Equal(want3[0]) {
		t.Fatal("a refused renewal changed the identity")
	}
}
