// Package vault seals the secrets that launches are granted (vault
// secrets, repository credentials, managed credentials, package-registry
// tokens; R-VAULT-*, R-GRANT-*): AES-256-GCM under a key kept in the
// coordinator's state directory, with the secret's ref and tenant as the
// additional data, so a sealed value moved to another record does not open.
//
// vault never logs a value and never returns one to an API caller: the
// only way out is Open, which the launch path calls to hand the value to
// the node over the mTLS tunnel.
package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/olivares-dev/olivares/certs"
)

// KeyFile is the key's file name in the state directory (mode 0600).
const KeyFile = "vault.key"

const keyLen = 32

// ErrSealed: a sealed value that does not open with this key and record.
var ErrSealed = errors.New("vault: the sealed value does not open (wrong key or record)")

// Vault seals and opens secret values.
type Vault struct {
	aead cipher.AEAD
	// check identifies the key without revealing it (Fingerprint).
	check string
}

// Open loads the key from dir, creating it on first use.
func Open(dir string) (*Vault, error) {
	path := filepath.Join(dir, KeyFile)
	key, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key = make([]byte, keyLen)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("vault: new key: %w", err)
		}
		if err := certs.WriteFileAtomic(path, key, 0o600); err != nil {
			return nil, fmt.Errorf("vault: write key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("vault: read key: %w", err)
	}
	if len(key) != keyLen {
		return nil, fmt.Errorf("vault: %s holds %d bytes, want %d", path, len(key), keyLen)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("olivares vault key check"))
	return &Vault{aead: aead, check: "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil)[:16])}, nil
}

// Fingerprint identifies the key without revealing it: coordinator
// replicas sharing a database compare it, since a secret sealed by one
// must open on every other.
func (v *Vault) Fingerprint() string { return v.check }

func aad(tenant, ref string) []byte { return []byte("olivares vault v1\x00" + tenant + "\x00" + ref) }

// Seal encrypts value for the secret ref of tenant.
func (v *Vault) Seal(tenant, ref string, value []byte) ([]byte, error) {
	nonce := make([]byte, v.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return v.aead.Seal(nonce, nonce, value, aad(tenant, ref)), nil
}

// Open decrypts what Seal made for the same tenant and ref.
func (v *Vault) Open(tenant, ref string, sealed []byte) ([]byte, error) {
	n := v.aead.NonceSize()
	if len(sealed) < n {
		return nil, ErrSealed
	}
	out, err := v.aead.Open(nil, sealed[:n], sealed[n:], aad(tenant, ref))
	if err != nil {
		return nil, ErrSealed
	}
	return out, nil
}
