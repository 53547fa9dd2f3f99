package coordd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/shared/webpush"
)

// R-NOTIF-8: the coordinator makes its Web Push key at the first start,
// 0600, and reads the same one at every later start; a damaged file is an
// error that says what to do.
func TestVAPIDKeyPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), VAPIDKeyFile)
	k1, err := loadVAPIDKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want 0600", fi, err)
	}
	k2, err := loadVAPIDKey(path)
	if err != nil || webpush.PublicKey(k2) != webpush.PublicKey(k1) {
		t.Fatalf("second start: %v, key changed %v", err, webpush.PublicKey(k2) != webpush.PublicKey(k1))
	}
	os.WriteFile(path, []byte("garbage"), 0o600)
	if _, err := loadVAPIDKey(path); err == nil || !strings.Contains(err.Error(), "delete it and restart") {
		t.Fatalf("a damaged key: %v", err)
	}
}
