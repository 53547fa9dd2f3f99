package certs

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestKeyPEM(t *testing.T) {
	key := mustKey(t)
	enc, err := EncodeKeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	rsaDER, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      []byte
		wantErr bool
	}{
		{"PKCS #8", enc, false},
		{"SEC 1", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}), false},
		{"RSA", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rsaDER}), true},
		{"certificate", EncodeCertPEM([]byte{1, 2, 3}), true},
		{"corrupt", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("junk")}), true},
		{"not PEM", []byte("junk"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKeyPEM(tt.in)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("error: got %v, want error %v", err, tt.wantErr)
			}
			if err == nil && !got.Equal(key) {
				t.Errorf("got a different key")
			}
		})
	}
	if !strings.HasPrefix(string(enc), "-----BEGIN PRIVATE KEY-----") {
		t.Errorf("EncodeKeyPEM: got %q, want a PKCS #8 block", enc[:30])
	}
}

func TestParseCertsPEM(t *testing.T) {
	a, _ := newTestAuthority(t)
	b, _ := newTestAuthority(t)
	key, err := EncodeKeyPEM(a.CurrentKey)
	if err != nil {
		t.Fatal(err)
	}
	two := EncodeCertPEM(a.Current.Raw, b.Current.Raw)
	tests := []struct {
		name    string
		in      []byte
		want    int
		wantErr bool
	}{
		{"one", EncodeCertPEM(a.Current.Raw), 1, false},
		{"two in order", two, 2, false},
		{"text around blocks", append(append([]byte("# bundle\n"), two...), "trailer\n"...), 2, false},
		{"key block", append(EncodeCertPEM(a.Current.Raw), key...), 0, true},
		{"bad DER", EncodeCertPEM([]byte("junk")), 0, true},
		{"empty", nil, 0, true},
		{"not PEM", []byte("junk"), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCertsPEM(tt.in)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("error: got %v, want error %v", err, tt.wantErr)
			}
			if len(got) != tt.want {
				t.Fatalf("got %d certificates, want %d", len(got), tt.want)
			}
			if tt.want == 2 && (Pin(got[0]) != Pin(a.Current) || Pin(got[1]) != Pin(b.Current)) {
				t.Errorf("certificates out of order")
			}
		})
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	steps := []struct {
		data []byte
		perm os.FileMode
	}{
		{[]byte("secret"), 0o600},
		{[]byte("replaced, and longer than before"), 0o644},
		{nil, 0o600},
	}
	for _, s := range steps {
		if err := WriteFileAtomic(path, s.data, s.perm); err != nil {
			t.Fatalf("WriteFileAtomic: %v", err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, s.data) {
			t.Errorf("content: got %q, want %q", got, s.data)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != s.perm {
			t.Errorf("mode: got %v, want %v", fi.Mode(), s.perm)
		}
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Errorf("write into a missing directory: got nil error, want one")
	}
	// A target that cannot be replaced: the temporary file must go away.
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d", "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "d"), []byte("x"), 0o600); err == nil {
		t.Errorf("replace a non-empty directory: got nil error, want one")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got, want := strings.Join(names, ","), "d,f"; got != want {
		t.Errorf("directory entries: got %v, want %v", got, want)
	}
}

func TestParsePin(t *testing.T) {
	a, _ := newTestAuthority(t)
	valid := Pin(a.Current)
	digits := strings.TrimPrefix(valid, "sha256:")
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"Pin output", valid, true},
		{"uppercase hex", "sha256:" + strings.ToUpper(digits), digits == strings.ToUpper(digits)},
		{"uppercase prefix", "SHA256:" + digits, false},
		{"no prefix", digits, false},
		{"other algorithm", "sha512:" + digits, false},
		{"short", valid[:len(valid)-1], false},
		{"long", valid + "0", false},
		{"not hex", "sha256:" + strings.Repeat("g", 64), false},
		{"trailing newline", valid + "\n", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePin(tt.in)
			if tt.ok {
				if err != nil || hex.EncodeToString(got) != digits {
					t.Errorf("got %x, %v, want %s", got, err, digits)
				}
				return
			}
			if !errors.Is(err, ErrPinFormat) {
				t.Errorf("got %v, want %v", err, ErrPinFormat)
			}
		})
	}
	if !strings.HasPrefix(valid, "sha256:") || len(valid) != len("sha256:")+64 || strings.ToLower(valid) != valid {
		t.Errorf("Pin: got %q, want sha256: and 64 lowercase hex digits", valid)
	}
}

func TestRenewAt(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// NotBefore is backdated by the skew allowance: the lifetime is the
	// 10 hours after it.
	cert := &x509.Certificate{NotBefore: t0.Add(-clockSkew), NotAfter: t0.Add(10 * time.Hour)}
	tests := []struct {
		jitter float64
		want   time.Duration
	}{
		{0, 5 * time.Hour},
		{0.1, 5*time.Hour + 30*time.Minute},
		{-0.1, 4*time.Hour + 30*time.Minute},
		{0.05, 5*time.Hour + 15*time.Minute},
		{0.5, 5*time.Hour + 30*time.Minute},
		{-3, 4*time.Hour + 30*time.Minute},
		{math.Inf(1), 5*time.Hour + 30*time.Minute},
		{math.NaN(), 5 * time.Hour},
	}
	for _, tt := range tests {
		if got := RenewAt(cert, tt.jitter).Sub(t0); got != tt.want {
			t.Errorf("RenewAt(jitter %v): got %v, want %v", tt.jitter, got, tt.want)
		}
	}

	a, _ := newTestAuthority(t)
	node, _ := mustNodeCert(t, a, "n")
	issued := node.NotBefore.Add(clockSkew)
	half := issued.Add(node.NotAfter.Sub(issued) / 2)
	if got := RenewAt(node, 0); !got.Equal(half) {
		t.Errorf("RenewAt of a node certificate: got %v, want %v", got, half)
	}
	// A certificate shorter than the skew allowance is due at half its
	// own life, not at once (an agent renewed such a one in a loop).
	csr, err := NewCSR(mustKey(t))
	if err != nil {
		t.Fatal(err)
	}
	// (A certificate's times are whole seconds: the life counted here is
	// 9 to 10 s, half of it at least 4 s less the jitter.)
	short, err := a.SignNode(csr, "short", time.Now(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if at := RenewAt(short, -0.1); time.Until(at) < 2*time.Second {
		t.Errorf("a 10 s certificate is due for renewal at %v, %v from now", at, time.Until(at))
	}
}

func FuzzParsePin(f *testing.F) {
	f.Add("sha256:" + strings.Repeat("0", 64))
	f.Add("sha256:" + strings.Repeat("ab", 32))
	f.Add("sha256:" + strings.Repeat("AB", 32))
	f.Add("sha256:")
	f.Add("")
	f.Add("sha256:" + strings.Repeat("0", 63) + "é")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParsePin(s)
		if err != nil {
			if !errors.Is(err, ErrPinFormat) {
				t.Errorf("error %v does not wrap %v", err, ErrPinFormat)
			}
			return
		}
		if len(b) != 32 || "sha256:"+hex.EncodeToString(b) != s {
			t.Errorf("ParsePin(%q) = %x: not the canonical form", s, b)
		}
	})
}

func FuzzParseCertsPEM(f *testing.F) {
	root, key, err := newRoot(time.Now())
	if err != nil {
		f.Fatal(err)
	}
	keyPEM, err := EncodeKeyPEM(key)
	if err != nil {
		f.Fatal(err)
	}
	one := EncodeCertPEM(root.Raw)
	f.Add(one)
	f.Add(EncodeCertPEM(root.Raw, root.Raw))
	f.Add(append([]byte("comment\n"), one...))
	f.Add(keyPEM)
	f.Add(one[:len(one)/2])
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n\n-----END CERTIFICATE-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		certs, err := ParseCertsPEM(b)
		if err != nil {
			return
		}
		if len(certs) == 0 {
			t.Fatalf("no error and no certificates")
		}
		var der [][]byte
		for _, c := range certs {
			der = append(der, c.Raw)
		}
		again, err := ParseCertsPEM(EncodeCertPEM(der...))
		if err != nil || len(again) != len(certs) {
			t.Fatalf("re-encoded bundle: got %d, %v, want %d certificates", len(again), err, len(certs))
		}
		for i := range again {
			if !bytes.Equal(again[i].Raw, certs[i].Raw) {
				t.Errorf("certificate %d changed on re-encoding", i)
			}
		}
	})
}
