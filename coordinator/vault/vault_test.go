package vault

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A sealed value opens only under its own key, tenant and ref, and the key
// survives a restart in a 0600 file (R-VAULT-2).
func TestSealOpen(t *testing.T) {
	dir := t.TempDir()
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := v.Seal("t1", "sec_1", []byte("hunter2"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("the sealed value holds the plain text")
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	again, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.Open("t1", "sec_1", sealed); err != nil || string(got) != "hunter2" {
		t.Fatalf("Open after reload: %q, %v", got, err)
	}
	for _, c := range []struct{ tenant, ref string }{{"t2", "sec_1"}, {"t1", "sec_2"}} {
		if _, err := again.Open(c.tenant, c.ref, sealed); !errors.Is(err, ErrSealed) {
			t.Fatalf("Open under %s/%s: got %v, want ErrSealed", c.tenant, c.ref, err)
		}
	}
	other, _ := Open(t.TempDir())
	if _, err := other.Open("t1", "sec_1", sealed); !errors.Is(err, ErrSealed) {
		t.Fatalf("Open under another key: %v", err)
	}
	if _, err := again.Open("t1", "sec_1", sealed[:5]); !errors.Is(err, ErrSealed) {
		t.Fatalf("Open of a cut value: %v", err)
	}
}
